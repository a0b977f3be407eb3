"""Query plans (docs/api.md, "Query: plans in one round trip"): rows and the
steps the server runs on them, lookups on resident indexes, filters, an
aggregation, projection and a limit, sent in one stream; only the result
comes back.

::

    out = (client.query({"sensor_id": [1, 2, 2, 9], "latency_ms": [3.0, 7.5, 9.0, 1.0]})
           .lookup("sensors", key="sensor_id", select=["type"])
           .filter("latency_ms > 2")
           .aggregate(by=["type"], measures=["count()", "mean(latency_ms)"])
           .run())
    # out["type"] ['temp', 'door'], out["count"] [1, 2], out["mean_latency_ms"] [3.0, 8.25]

A :class:`Query` is immutable: each step method returns a new Query with the
step appended, so a common prefix can be run with different tails. The input
is converted when the Query is made (as payload columns are, gpujoin.columns:
numpy arrays, masked arrays, pandas Series or lists with None for nulls; nulls
travel as validity), the plan is checked whole by the server against the
first batch and the live indexes before any batch runs.

Measures (``aggregate(measures=...)``) are given as text, ``"count()"``,
``"count(col)"``, ``"sum(bytes) as total"``; as tuples ``("mean", "col")`` or
``("sum", "col", "total")``; as dicts ``{"op": "sum", "column": "col",
"name": "total"}``; or as a mapping output name -> text or tuple. Ops are
count, sum, min, max and mean; without a name the server names the column
``count`` or ``<op>_<column>``.
"""
import re
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from ._common import _AGGREGATE_OPS, _JOIN_KINDS, _choice
from ._proto import pb
from .errors import InvalidArgument

#: The most steps a plan may have (the server's limit).
MAX_STEPS = 64

_MEASURE = re.compile(r"^\s*([A-Za-z_]+)\s*\(\s*(.*?)\s*\)\s*(?:[Aa][Ss]\s+(.+?))?\s*$", re.S)

_OP_NAME = re.compile(r"^\s*[A-Za-z_]+\s*$")

MeasureSpec = Union[str, Tuple[Any, ...], Mapping[str, Any]]


def _unquote(name: str) -> str:
    """A name as written, or the text of a double-quoted one (a quote doubled inside)."""
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return name[1:-1].replace('""', '"')
    return name


def _op(op: Any, what: str) -> int:
    if not isinstance(op, str):
        raise InvalidArgument(f"{what}: the op must be a str, got {op!r}")
    return _choice(_AGGREGATE_OPS, op.strip().lower(), f"{what} op")


def measure(spec: MeasureSpec, name: Optional[str] = None, what: str = "measure"):
    """The proto Measure of one measure spec (see the module doc); `name`, when
    given, names its output column (a mapping's key)."""
    if isinstance(spec, str) and spec.strip().lower() == "count":
        spec = "count()"
    if isinstance(spec, str):
        m = _MEASURE.match(spec)
        if not m:
            raise InvalidArgument(f"{what}: {spec!r} is not 'op(column)', 'op()' or "
                                  "'op(column) as name'")
        op, column, alias = m.group(1), m.group(2), m.group(3)
        column = "" if column in ("", "*") else _unquote(column)
        alias = _unquote(alias) if alias else ""
    elif isinstance(spec, Mapping):
        unknown = set(spec) - {"op", "column", "name"}
        if unknown or "op" not in spec:
            raise InvalidArgument(f"{what}: a dict measure has 'op' and optional 'column' and "
                                  f"'name', got keys {sorted(spec)}")
        op, column, alias = spec["op"], spec.get("column") or "", spec.get("name") or ""
    elif isinstance(spec, (tuple, list)) and 1 <= len(spec) <= 3:
        op = spec[0]
        column = (spec[1] if len(spec) > 1 else None) or ""
        alias = (spec[2] if len(spec) > 2 else None) or ""
    else:
        raise InvalidArgument(f"{what}: {spec!r} is not a measure (a str such as 'sum(bytes)', a "
                              "tuple (op, column[, name]) or a dict)")
    if not isinstance(column, str) or not isinstance(alias, str):
        raise InvalidArgument(f"{what}: column and name must be str, got {column!r} and {alias!r}")
    if name is not None:
        if alias and alias != name:
            raise InvalidArgument(f"{what}: named {name!r} and {alias!r}")
        alias = name
    number = _op(op, what)
    if not column and number != _AGGREGATE_OPS["count"]:
        raise InvalidArgument(f"{what}: {op}() needs a column")
    return pb.Measure(op=number, column=column, name=alias)


def measures(specs: Union[Sequence[MeasureSpec], Mapping[str, MeasureSpec], str]) -> List[Any]:
    """The proto Measures of `specs`: a sequence of measure specs, one spec, or a
    mapping output name -> spec."""
    one_tuple = isinstance(specs, tuple) and bool(specs) and isinstance(specs[0], str) and \
        _OP_NAME.match(specs[0]) is not None  # ("sum", "bytes"), not ("count()", "sum(bytes)")
    if isinstance(specs, str) or one_tuple or (isinstance(specs, Mapping) and "op" in specs):
        specs = [specs]
    if isinstance(specs, Mapping):
        return [measure(s, str(n), f"measures[{n!r}]") for n, s in specs.items()]
    return [measure(s, what=f"measures[{i}]") for i, s in enumerate(specs)]


def _names(value: Union[str, Sequence[str], None], what: str) -> List[str]:
    """One name or a sequence of them, as a list of str."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    for i, v in enumerate(items):
        if not isinstance(v, str) or not v:
            raise InvalidArgument(f"{what}[{i}]: a column name (non-empty str) is needed, "
                                  f"got {v!r}")
    return items


def lookup_step(index: str, key: Union[str, Sequence[str]], select: Union[str, Sequence[str]] = (),
                prefix: str = "", how: str = "inner", found_column: Optional[str] = None):
    """A PlanStep looking `key` up in `index` (see Query.lookup)."""
    if not isinstance(index, str) or not index:
        raise InvalidArgument(f"lookup: index must be a non-empty str, got {index!r}")
    keys = _names(key, "lookup key")
    if not keys:
        raise InvalidArgument("lookup: key names no column; give the key column(s)")
    return pb.PlanStep(lookup=pb.LookupStep(
        index=index, key=keys, select=_names(select, "lookup select"), prefix=prefix or "",
        kind=_choice(_JOIN_KINDS, how, "lookup how"), found_column=found_column or ""))


def filter_step(where: str):
    """A PlanStep keeping the rows for which `where` is true."""
    if not isinstance(where, str) or not where.strip():
        raise InvalidArgument(f"filter: where must be a non-empty str expression, got {where!r}")
    return pb.PlanStep(filter=pb.FilterStep(where=where))


def aggregate_step(by: Union[str, Sequence[str], None], specs: Any):
    """A PlanStep grouping by `by` and computing `specs` (see measures())."""
    ms = measures(specs)
    if not ms:
        raise InvalidArgument("aggregate: no measures; give at least one, e.g. 'count()'")
    return pb.PlanStep(aggregate=pb.AggregateStep(group_by=_names(by, "aggregate by"),
                                                  measures=ms))


def project_step(columns: Sequence[Any]):
    """A PlanStep keeping `columns`: names, (column, new name) pairs, or
    mappings column -> new name, in order; one list of them is the same."""
    if len(columns) == 1 and isinstance(columns[0], list):
        columns = columns[0]
    out = []
    for i, c in enumerate(columns):
        if isinstance(c, str):
            out.append(pb.ProjectColumn(column=c))
        elif isinstance(c, Mapping):
            out += [pb.ProjectColumn(column=k, name=v) for k, v in c.items()]
        elif isinstance(c, tuple) and len(c) == 2:
            out.append(pb.ProjectColumn(column=c[0], name=c[1] or ""))
        else:
            raise InvalidArgument(f"project columns[{i}]: a name, a (column, name) pair or a "
                                  f"mapping column -> name is needed, got {c!r}")
    if not out:
        raise InvalidArgument("project: no columns; name the columns to keep")
    for p in out:
        if not isinstance(p.column, str) or not p.column:
            raise InvalidArgument(f"project: {p.column!r} is not a column name")
    return pb.PlanStep(project=pb.ProjectStep(columns=out))


def limit_step(rows: int):
    """A PlanStep keeping the first `rows` rows."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise InvalidArgument(f"limit: rows must be a non-negative int, got {rows!r}")
    return pb.PlanStep(limit=pb.LimitStep(rows=rows))


class Query:
    """A plan over input rows, run by :meth:`run` in one Query stream.

    Made by ``Client.query(data)``; the step methods return a new Query with
    the step appended (the original is unchanged).
    """

    def __init__(self, client: Any, source: Any, steps: Tuple[Any, ...] = ()):
        self._client = client
        self._source = source      # gpujoin._query.QueryInput: the encoded columns
        self._steps = steps

    def _with(self, step) -> "Query":
        if len(self._steps) >= MAX_STEPS:
            raise InvalidArgument(f"a plan has at most {MAX_STEPS} steps")
        return Query(self._client, self._source, self._steps + (step,))

    def lookup(self, index: str, key: Union[str, Sequence[str]],
               select: Union[str, Sequence[str]] = (), prefix: str = "", how: str = "inner",
               found_column: Optional[str] = None) -> "Query":
        """Looks the rows' `key` up in `index`: one integer column for a
        uint32 or uint64 index (a null, a negative value or one the key type
        cannot hold is missing), or a list of columns in the key schema's order
        and of its types. Adds the `select`ed payload columns (named `prefix` +
        name) and a bool column, `found_column` (default "<index>.found").

        `how`: "inner" (rows with a match; one per match on a keep_all index),
        "left" (every row; null payload without a match), "semi" (rows with a
        match, once, the first match's payload) or "anti" (rows without one);
        also "left_outer", "left_semi", "left_anti".
        """
        return self._with(lookup_step(index, key, select, prefix, how, found_column))

    def filter(self, where: str) -> "Query":
        """Keeps the rows for which `where` is true (SQL: false and null drop the
        row). `where` compares columns with literals (= != < <= > >=, ``is
        [not] null``, ``[not] in (...)``, and/or/not, parentheses; docs/api.md
        "Filter" gives the grammar)."""
        return self._with(filter_step(where))

    def aggregate(self, by: Union[str, Sequence[str], None] = None,
                  measures: Any = ("count()",)) -> "Query":
        """Groups the stream's rows by the columns `by` (integer, bool, string
        or binary; nulls form one group; none: one group of every row) and
        computes `measures` (see the module doc). Groups come out in the order
        their first row arrived; later steps apply to the groups."""
        return self._with(aggregate_step(by, measures))

    def project(self, *columns: Any) -> "Query":
        """Keeps these columns, in this order: names, (column, new name)
        pairs, or mappings column -> new name (``project("a", ("b", "bee"))``)."""
        return self._with(project_step(columns))

    def limit(self, rows: int) -> "Query":
        """Keeps the first `rows` rows (over the whole stream)."""
        return self._with(limit_step(rows))

    @property
    def plan(self):
        """The proto Plan of the steps so far."""
        return pb.Plan(steps=list(self._steps))

    def execute(self, *, batch_rows: Optional[int] = None, timeout: Optional[float] = None):
        """Runs the plan and returns a gpujoin.QueryResult: the result
        `columns` (name -> numpy array; masked where a row is null; object
        arrays of str/bytes with None for nulls), `rows` and `statistics` (a
        PlanStatistics: each batch's StepStatistics).

        The input is sent in batches of at most `batch_rows` rows (default: the
        client's batch_rows, fewer where the server's message size or
        --max-result-bytes needs it; a batch the server still refuses for
        --max-result-bytes runs the query again in smaller batches). Raises
        the Error subclass of a refused plan or batch (``.batch`` its batch),
        e.g. NotFound for an unknown index, InvalidArgument for a bad filter
        or an empty plan, OutOfRange for an integer sum that overflowed."""
        if not self._steps:
            raise InvalidArgument("a plan needs at least one step (lookup, filter, aggregate, "
                                  "project or limit)")
        return self._client._run_query(self.plan, self._source, batch_rows=batch_rows,
                                       timeout=timeout)

    def run(self, *, return_statistics: bool = False, as_frame: Optional[bool] = None,
            batch_rows: Optional[int] = None, timeout: Optional[float] = None):
        """Runs the plan (see execute()) and returns its rows: a pandas DataFrame
        when the input was one (or `as_frame` is True), else a dict name ->
        column. With `return_statistics`, a pair (rows, PlanStatistics)."""
        result = self.execute(batch_rows=batch_rows, timeout=timeout)
        frame = self._source.was_frame if as_frame is None else as_frame
        data = result.to_pandas() if frame else dict(result.columns)
        return (data, result.statistics) if return_statistics else data

    def __repr__(self) -> str:
        kinds = [s.WhichOneof("step") for s in self._steps]
        return (f"Query({self._source.rows} rows x {len(self._source.columns)} columns, "
                f"steps={kinds})")
