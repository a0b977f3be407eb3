"""A pure-Python reference of the Query contract (docs/api.md, "Query: plans in
one round trip"), written from the documentation and never from the server:
resident indexes and their matches, the filter expression language with SQL's
three-valued logic, the row steps, the stream-wide limit, the aggregate
(first-seen group order, exact integer sums, skipped nulls and non-finite
floats) and the statistics each step reports.

Filters are evaluated from an expression tree (`Cmp`, `IsNull`, `In`, `And`,
`Or`, `Not`); `render` writes the text the server parses, so a test keeps
the tree beside the plan it sends.
"""
import dataclasses
import math
import re
from collections import OrderedDict

from gpujoin._proto import pb

from query_columns import FLOAT_TYPES, INT_TYPES, SIGNED, kind_of

# ----------------------------------------------------------------- indexes


class Index:
    """One resident index as the contract sees it: key -> its rows' payload
    (a dict per kept row, in build order; lowest_row keeps the first only)."""

    def __init__(self, name, key_type, payload, keep_all, key_columns=()):
        self.name = name
        self.key_type = key_type                  # pb.KEY_TYPE_UINT32 / _UINT64 / _COLUMNS
        self.key_columns = list(key_columns)      # [(name, type)] of a key schema
        self.payload = list(payload)              # [(name, type)] as declared
        self.keep_all = keep_all
        self.groups = OrderedDict()
        self.version = 0
        self.mutation_sequence = 0

    def build(self, keys, payload_rows, version):
        """keys: one per source row (None: an invalid row, kept by no key)."""
        self.groups = OrderedDict()
        self.version = version
        self.mutation_sequence = 0
        for k, p in zip(keys, payload_rows):
            if k is None:
                continue
            rows = self.groups.setdefault(k, [])
            if self.keep_all or not rows:
                rows.append(p)

    def mutate(self, deletes, upserts):
        """Deletes first, then upserts (lowest_row: assign, the last of a key
        wins; keep_all: appended to the key's group)."""
        for k in deletes:
            self.groups.pop(k, None)
        for k, p in upserts:
            if self.keep_all:
                self.groups.setdefault(k, []).append(p)
            else:
                self.groups[k] = [p]
        self.mutation_sequence += 1

    def key_of(self, values):
        """The key that input values (one per `LookupStep.key` column) form,
        or None where the row is missing: a null anywhere, a negative value or
        one the word type cannot hold."""
        if any(v is None for v in values):
            return None
        if self.key_type == pb.KEY_TYPE_COLUMNS:
            return tuple(values)
        (v,) = values
        top = 2**32 - 1 if self.key_type == pb.KEY_TYPE_UINT32 else 2**64 - 1
        return v if 0 <= v <= top else None

    def matches(self, key):
        return [] if key is None else self.groups.get(key, [])


# ----------------------------------------------------------------- filters


@dataclasses.dataclass
class Lit:
    kind: str      # "int", "float", "string", "bool"
    value: object  # int, float, bytes, bool
    text: str      # as written in the expression


@dataclasses.dataclass
class Cmp:
    column: str
    op: str
    lit: Lit


@dataclasses.dataclass
class IsNull:
    column: str
    negated: bool


@dataclasses.dataclass
class In:
    column: str
    negated: bool
    lits: list


@dataclasses.dataclass
class And:
    a: object
    b: object


@dataclasses.dataclass
class Or:
    a: object
    b: object


@dataclasses.dataclass
class Not:
    a: object


KEYWORDS = {"and", "or", "not", "is", "null", "in", "true", "false"}
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")


def column_text(name, rng):
    """A column reference: bare where the grammar allows, else (or at random)
    double-quoted with quotes doubled."""
    if _BARE.match(name) and name.lower() not in KEYWORDS and rng.random() < 0.8:
        return name
    return '"' + name.replace('"', '""') + '"'


def string_text(value):
    return "'" + value.decode("utf-8").replace("'", "''") + "'"


def _kw(word, rng):
    return rng.choice([word, word.upper(), word.capitalize()])


def render(e, rng, top=True):
    """The filter text of tree `e`, with random keyword case, spacing and
    redundant parentheses."""
    sp = lambda: rng.choice([" ", " ", "  "])  # noqa: E731
    if isinstance(e, Cmp):
        gap = rng.choice(["", " "])
        return f"{column_text(e.column, rng)}{gap}{e.op}{gap}{e.lit.text}"
    if isinstance(e, IsNull):
        neg = f"{sp()}{_kw('not', rng)}" if e.negated else ""
        return f"{column_text(e.column, rng)}{sp()}{_kw('is', rng)}{neg}{sp()}{_kw('null', rng)}"
    if isinstance(e, In):
        neg = f"{_kw('not', rng)}{sp()}" if e.negated else ""
        items = rng.choice([",", ", ", " , "]).join(lit.text for lit in e.lits)
        return f"{column_text(e.column, rng)}{sp()}{neg}{_kw('in', rng)}{sp()}({items})"
    if isinstance(e, Not):
        inner = render(e.a, rng, False)
        if not isinstance(e.a, (Cmp, IsNull, In, Not)):
            inner = f"({inner})"
        return f"{_kw('not', rng)}{sp()}{inner}"
    op = "and" if isinstance(e, And) else "or"
    parts = []
    for side in (e.a, e.b):
        t = render(side, rng, False)
        # `and` binds tighter than `or`: an `or` under an `and` needs parentheses.
        if (isinstance(e, And) and isinstance(side, Or)) or rng.random() < 0.2:
            t = f"({t})"
        parts.append(t)
    return f"{parts[0]}{sp()}{_kw(op, rng)}{sp()}{parts[1]}"


def _compare(v, op, lit, column_kind):
    """SQL comparison of a non-null value with a literal (docs/api.md, Filter)."""
    if column_kind == "int" and lit.kind == "int":
        a, b = v, lit.value
    elif column_kind in ("int", "float") and lit.kind in ("int", "float"):
        a, b = float(v), float(lit.value)  # float64; NaN compares false except !=
    elif column_kind == "string":
        a, b = v, lit.value
    elif column_kind == "bool":
        a, b = v, lit.value
    else:
        raise AssertionError(f"the generator compared a {column_kind} column with {lit}")
    return {"=": a == b, "==": a == b, "!=": a != b, "<>": a != b, "<": a < b,
            "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def evaluate(e, row, types):
    """True, False or None (SQL null) for one row (a dict name -> value)."""
    if isinstance(e, Cmp):
        v = row[e.column]
        return None if v is None else _compare(v, e.op, e.lit, kind_of(types[e.column]))
    if isinstance(e, IsNull):
        return (row[e.column] is not None) if e.negated else (row[e.column] is None)
    if isinstance(e, In):
        v = row[e.column]
        if v is None:
            return None
        hit = any(_compare(v, "=", lit, kind_of(types[e.column])) for lit in e.lits)
        return not hit if e.negated else hit
    if isinstance(e, Not):
        a = evaluate(e.a, row, types)
        return None if a is None else not a
    a, b = evaluate(e.a, row, types), evaluate(e.b, row, types)
    if isinstance(e, And):
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


# ----------------------------------------------------------------- tables


class Table:
    """Named typed columns of equal length (values as query_columns uses them)."""

    def __init__(self, names, types, columns):
        self.names, self.types, self.columns = list(names), list(types), [list(c) for c in columns]

    @property
    def rows(self):
        return len(self.columns[0]) if self.columns else 0

    def column(self, name):
        return self.columns[self.names.index(name)]

    def type(self, name):
        return self.types[self.names.index(name)]

    def take(self, rows):
        return Table(self.names, self.types, [[c[i] for i in rows] for c in self.columns])

    def row(self, i):
        return {n: c[i] for n, c in zip(self.names, self.columns)}


def empty_like(names, types):
    return Table(names, types, [[] for _ in names])


@dataclasses.dataclass
class StepStats:
    step: int
    kind: str
    rows_in: int
    rows_out: int
    index: str = ""
    index_version: int = 0
    mutation_sequence: int = 0
    found: int = 0
    missing: int = 0


OP_NAMES = {pb.AGGREGATE_OP_COUNT: "count", pb.AGGREGATE_OP_SUM: "sum",
            pb.AGGREGATE_OP_MIN: "min", pb.AGGREGATE_OP_MAX: "max",
            pb.AGGREGATE_OP_MEAN: "mean"}


def measure_name(m):
    if m.name:
        return m.name
    if m.op == pb.AGGREGATE_OP_COUNT and not m.column:
        return "count"
    return f"{OP_NAMES[m.op]}_{m.column}"


def measure_type(m, input_type):
    if m.op == pb.AGGREGATE_OP_COUNT:
        return pb.COLUMN_TYPE_UINT64
    if m.op == pb.AGGREGATE_OP_SUM:
        if input_type in SIGNED:
            return pb.COLUMN_TYPE_INT64
        if input_type in INT_TYPES:
            return pb.COLUMN_TYPE_UINT64
        return input_type
    if m.op in (pb.AGGREGATE_OP_MIN, pb.AGGREGATE_OP_MAX):
        return input_type
    return pb.COLUMN_TYPE_FLOAT32 if input_type == pb.COLUMN_TYPE_FLOAT32 else pb.COLUMN_TYPE_FLOAT64


@dataclasses.dataclass
class Approx:
    """An expected float result: `value` computed exactly (math.fsum), matched
    within `tolerance`; `f32` results may also be off by binary32 rounding."""
    value: float
    tolerance: float

    def matches(self, got):
        if not isinstance(got, float) or math.isnan(got):
            return False
        return abs(got - self.value) <= self.tolerance

    def __repr__(self):
        return f"~{self.value!r}(±{self.tolerance:.3g})"


class Overflow(Exception):
    """An integer sum left its 64-bit type: the answer is OUT_OF_RANGE naming
    the measure. `certain` is False where only a running total (not the final
    exact sum) left the range, which the contract leaves open."""

    def __init__(self, measure, certain):
        super().__init__(measure)
        self.measure, self.certain = measure, certain


class Stream:
    """The reference of one Query stream: feed it the batches in order
    (`batch`), then ask for the groups (`groups`) at a flush or the end."""

    def __init__(self, plan, filters, indexes, names, types):
        self.steps = list(plan.steps)
        self.filters = filters          # step position -> expression tree
        self.indexes = indexes          # name -> Index (live state, shared with the test)
        self.agg = next((i for i, s in enumerate(self.steps)
                         if s.WhichOneof("step") == "aggregate"), None)
        self.limit_left = {i: s.limit.rows for i, s in enumerate(self.steps)
                           if s.WhichOneof("step") == "limit"}
        self.groups = OrderedDict()     # group key -> [row count, per measure accumulator]
        self.agg_rows = 0
        self.agg_input = None           # (names, types) the aggregate sees

    # Row steps -----------------------------------------------------------

    def _lookup(self, i, s, t):
        """Lookup step i on table t; its probe statistics count t's rows
        (found + missing = rows_in, also where consecutive lookups run together)."""
        ix = self.indexes[s.index]
        keys = [t.column(k) for k in s.key]
        found = sum(bool(ix.matches(ix.key_of([c[r] for c in keys]))) for r in range(t.rows))
        payload = dict(ix.payload)
        names = t.names + [s.prefix + n for n in s.select] + [s.found_column or f"{ix.name}.found"]
        types = t.types + [payload[n] for n in s.select] + [pb.COLUMN_TYPE_BOOL]
        kind = s.kind or pb.JOIN_KIND_INNER
        out = []
        for r in range(t.rows):
            m = ix.matches(ix.key_of([c[r] for c in keys]))
            if kind == pb.JOIN_KIND_INNER:
                out += [(r, p) for p in m]
            elif kind == pb.JOIN_KIND_LEFT_OUTER:
                out += [(r, p) for p in m] if m else [(r, None)]
            elif kind == pb.JOIN_KIND_LEFT_SEMI:
                out += [(r, m[0])] if m else []
            else:
                out += [] if m else [(r, None)]
        cols = [[c[r] for r, _ in out] for c in t.columns]
        cols += [[None if p is None else p[n] for _, p in out] for n in s.select]
        cols.append([p is not None for _, p in out])
        st = StepStats(i, "lookup", t.rows, len(out), ix.name, ix.version,
                       ix.mutation_sequence, found, t.rows - found)
        return Table(names, types, cols), st

    def _row_step(self, i, t, groups_answer=False):
        s = self.steps[i]
        kind = s.WhichOneof("step")
        if kind == "lookup":
            return self._lookup(i, s.lookup, t)
        if kind == "filter":
            types = dict(zip(t.names, t.types))
            keep = [r for r in range(t.rows) if evaluate(self.filters[i], t.row(r), types) is True]
            out = t.take(keep)
        elif kind == "project":
            cols = s.project.columns
            out = Table([c.name or c.column for c in cols], [t.type(c.column) for c in cols],
                        [t.column(c.column) for c in cols])
        elif kind == "limit":
            if groups_answer:  # after the aggregate: the first rows of this answer
                n = min(t.rows, s.limit.rows)
            else:
                n = min(t.rows, self.limit_left[i])
                self.limit_left[i] -= n
            out = t.take(range(n))
        else:
            raise AssertionError(kind)
        return out, StepStats(i, kind, t.rows, out.rows)

    def _run(self, first, last, t, groups_answer=False):
        stats = []
        for i in range(first, last):
            t, st = self._row_step(i, t, groups_answer)
            stats.append(st)
        return t, stats

    # Aggregate -----------------------------------------------------------

    def _accumulate(self, t):
        a = self.steps[self.agg].aggregate
        self.agg_input = (t.names, t.types)
        self.agg_rows += t.rows
        for r in range(t.rows):
            key = tuple(t.column(g)[r] for g in a.group_by)
            g = self.groups.get(key)
            if g is None:
                g = self.groups[key] = [0, [[] for _ in a.measures], [False] * len(a.measures)]
            g[0] += 1
            for j, m in enumerate(a.measures):
                if not m.column:
                    continue
                v = t.column(m.column)[r]
                if v is None:
                    continue
                ct = t.type(m.column)
                if m.op != pb.AGGREGATE_OP_COUNT and ct in FLOAT_TYPES and not math.isfinite(v):
                    continue
                g[1][j].append(v)
                if m.op in (pb.AGGREGATE_OP_SUM, pb.AGGREGATE_OP_MEAN) and ct in INT_TYPES:
                    lo, hi = (-2**63, 2**63 - 1) if ct in SIGNED else (0, 2**64 - 1)
                    if not lo <= sum(g[1][j]) <= hi:
                        g[2][j] = True

    def batch(self, t):
        """Runs one input batch; returns (rows or None for aggregate plans, stats)."""
        if self.agg is None:
            return self._run(0, len(self.steps), t)
        t, stats = self._run(0, self.agg, t)
        stats.append(StepStats(self.agg, "aggregate", t.rows, None))
        self._accumulate(t)
        return None, stats

    def groups_answer(self, input_names, input_types, lenient=False):
        """The groups so far with the steps after the aggregate applied:
        (table, stats); raises Overflow for an integer sum out of range (with
        `lenient`, only where the final exact sum is)."""
        a = self.steps[self.agg].aggregate
        if self.agg_input is None:  # no batch reached the aggregate: type it from the plan
            names, types = self._schema_before_agg(input_names, input_types)
        else:
            names, types = self.agg_input
        typ = dict(zip(names, types))
        keys = list(self.groups.items())
        if not a.group_by and not keys:
            keys = [((), [0, [[] for _ in a.measures], [False] * len(a.measures)])]
        out_names = list(a.group_by) + [measure_name(m) for m in a.measures]
        out_types = [typ[g] for g in a.group_by] + \
            [measure_type(m, typ.get(m.column)) for m in a.measures]
        cols = [[k[j] for k, _ in keys] for j in range(len(a.group_by))]
        for j, m in enumerate(a.measures):
            col = []
            for _, (count, acc, running_overflow) in keys:
                col.append(self._measure(m, typ.get(m.column), count, acc[j],
                                         running_overflow[j], lenient))
            cols.append(col)
        t = Table(out_names, out_types, cols)
        stats = [StepStats(self.agg, "aggregate", self.agg_rows, t.rows)]
        t, more = self._run(self.agg + 1, len(self.steps), t, groups_answer=True)
        return t, stats + more

    def _schema_before_agg(self, names, types):
        t = empty_like(names, types)
        saved = dict(self.limit_left)
        t, _ = self._run(0, self.agg, t)
        self.limit_left = saved
        return t.names, t.types

    @staticmethod
    def _measure(m, ct, count, values, running_overflow, lenient):
        name = measure_name(m)
        if m.op == pb.AGGREGATE_OP_COUNT:
            return count if not m.column else len(values)
        if not values:
            return None
        if m.op == pb.AGGREGATE_OP_SUM and ct in INT_TYPES:
            total = sum(values)
            lo, hi = (-2**63, 2**63 - 1) if ct in SIGNED else (0, 2**64 - 1)
            if not lo <= total <= hi:
                raise Overflow(name, True)
            if running_overflow and not lenient:
                raise Overflow(name, False)
            return total
        if m.op == pb.AGGREGATE_OP_MEAN and ct in INT_TYPES and not lenient:
            # The contract fails an integer *sum* that leaves 64 bits; whether a
            # mean (always representable) may fail alike it leaves open.
            lo, hi = (-2**63, 2**63 - 1) if ct in SIGNED else (0, 2**64 - 1)
            if not lo <= sum(values) <= hi or running_overflow:
                raise Overflow(name, False)
        if m.op in (pb.AGGREGATE_OP_MIN, pb.AGGREGATE_OP_MAX):
            return min(values) if m.op == pb.AGGREGATE_OP_MIN else max(values)
        scale = math.fsum(abs(v) for v in values)
        rel = 1e-4 if ct == pb.COLUMN_TYPE_FLOAT32 else 1e-9
        if m.op == pb.AGGREGATE_OP_SUM:
            return Approx(math.fsum(values), rel * scale + 1e-30)
        exact = (sum(values) / len(values)) if ct in INT_TYPES else math.fsum(values) / len(values)
        return Approx(exact, rel * scale / len(values) + abs(exact) * rel + 1e-30)


def matches_value(want, got):
    """Whether a result value is the reference's (Approx for float measures)."""
    if isinstance(want, Approx):
        return want.matches(got)
    if want is None or got is None:
        return want is None and got is None
    if isinstance(want, float):
        return isinstance(got, float) and (want == got or (math.isnan(want) and math.isnan(got)))
    return want == got and type(want) is type(got)

