"""gpujoin.query's plan builder and the Query input's conversion, before
anything is sent (no server): measures from text, tuples and dicts, the
steps' protos and checks, input columns and their nulls, batch cutting.
The served Query is tested in test_query.py.
"""
import numpy as np
import pytest

import gpujoin
from gpujoin import query as Q
from gpujoin._proto import pb
from gpujoin._query import QueryInput, batch_ranges

pd = pytest.importorskip("pandas")


def test_measures_from_text_tuples_and_dicts():
    ms = Q.measures(["count()", "count(*)", "count(latency_ms)", "mean(latency_ms)",
                     "sum(bytes) as total", "MAX( a.b )  AS  \"top x\"", ("min", "x"),
                     ("sum", "y", "sy"), {"op": "mean", "column": "z", "name": "mz"}, "count"])
    got = [(pb.AggregateOp.Name(m.op), m.column, m.name) for m in ms]
    assert got == [("AGGREGATE_OP_COUNT", "", ""), ("AGGREGATE_OP_COUNT", "", ""),
                   ("AGGREGATE_OP_COUNT", "latency_ms", ""),
                   ("AGGREGATE_OP_MEAN", "latency_ms", ""),
                   ("AGGREGATE_OP_SUM", "bytes", "total"), ("AGGREGATE_OP_MAX", "a.b", "top x"),
                   ("AGGREGATE_OP_MIN", "x", ""), ("AGGREGATE_OP_SUM", "y", "sy"),
                   ("AGGREGATE_OP_MEAN", "z", "mz"), ("AGGREGATE_OP_COUNT", "", "")]
    # One spec alone, a tuple of one op, and a mapping name -> spec.
    assert [m.name for m in Q.measures({"n": "count()", "total": ("sum", "b")})] == ["n", "total"]
    assert len(Q.measures("sum(b)")) == 1 and Q.measures(("sum", "b"))[0].column == "b"
    assert len(Q.measures(("count()", "sum(b)"))) == 2


@pytest.mark.parametrize("spec, match", [
    ("median(x)", "op must be one of"), ("sum()", "needs a column"), ("sum x", "is not 'op"),
    ({"column": "x"}, "has 'op'"), (("sum", 5), "must be str"), (42, "is not a measure"),
    ({"op": "sum", "column": "x", "extra": 1}, "has 'op'")])
def test_bad_measures_are_refused_before_sending(spec, match):
    with pytest.raises(gpujoin.InvalidArgument, match=match):
        Q.measures([spec])


def test_plan_steps_and_immutability():
    c = gpujoin.Client("127.0.0.1:1")  # never connected: nothing here is sent
    base = c.query({"k": np.arange(4, dtype=np.uint32)})
    q = (base.lookup("i", key="k", select="p", prefix="i_", how="left", found_column="hit")
         .filter("p > 2").aggregate(by="p", measures=["count()"])
         .project("p", ("count", "n"), {"x": "y"}).limit(3))
    assert len(base.plan.steps) == 0  # a step returns a new Query
    steps = q.plan.steps
    assert [s.WhichOneof("step") for s in steps] == ["lookup", "filter", "aggregate", "project",
                                                     "limit"]
    lk = steps[0].lookup
    assert (lk.index, list(lk.key), list(lk.select), lk.prefix, lk.found_column) == (
        "i", ["k"], ["p"], "i_", "hit")
    assert lk.kind == pb.JOIN_KIND_LEFT_OUTER
    assert [(p.column, p.name) for p in steps[3].project.columns] == [("p", ""), ("count", "n"),
                                                                      ("x", "y")]
    assert steps[4].limit.rows == 3
    kinds = {h: base.lookup("i", key="k", how=h).plan.steps[0].lookup.kind
             for h in ("inner", "left", "semi", "anti", "left_outer", "left_semi", "left_anti")}
    assert kinds == {"inner": 1, "left": 2, "semi": 3, "anti": 4, "left_outer": 2,
                     "left_semi": 3, "left_anti": 4}
    assert list(base.lookup("o", key=["t", "id"]).plan.steps[0].lookup.key) == ["t", "id"]
    with pytest.raises(gpujoin.InvalidArgument, match="how must be one of"):
        base.lookup("i", key="k", how="outer")
    with pytest.raises(gpujoin.InvalidArgument, match="key names no column"):
        base.lookup("i", key=[])
    with pytest.raises(gpujoin.InvalidArgument, match="where must be"):
        base.filter("  ")
    with pytest.raises(gpujoin.InvalidArgument, match="non-negative"):
        base.limit(-1)
    with pytest.raises(gpujoin.InvalidArgument, match="no columns"):
        base.project()
    with pytest.raises(gpujoin.InvalidArgument, match="at least one step"):
        base.run()
    with pytest.raises(gpujoin.InvalidArgument, match="at most 64 steps"):
        q = base
        for _ in range(65):
            q = q.limit(1)


def test_input_columns_and_their_nulls():
    frame = pd.DataFrame({"a": pd.array([1, None, 3], dtype="Int64"), "s": ["x", None, "z"],
                          "f": [1.0, np.nan, 2.0],
                          "b": pd.array([True, None, False], dtype="boolean")})
    qi = QueryInput(frame)
    assert qi.was_frame and qi.rows == 3
    assert [(c.name, c.type_name) for c in qi.columns] == [
        ("a", "int64"), ("s", "string"), ("f", "float64"), ("b", "bool")]
    for c in qi.columns:
        assert c.chunk(pb, 0, 3).validity == bytes([0b101]), c.name
    masked = np.ma.MaskedArray(np.array([5, 6], np.uint16), mask=[False, True])
    qi = QueryInput({"m": masked, "l": [None, b"\x00"], "n": np.array([1, 2], np.int8)},
                    types={"n": "uint64"})
    assert not qi.was_frame
    assert [(c.name, c.type_name) for c in qi.columns] == [
        ("m", "uint32"), ("l", "binary"), ("n", "uint64")]
    assert qi.columns[0].chunk(pb, 0, 2).validity == b"\x01"
    with pytest.raises(gpujoin.InvalidArgument, match="'b': 1 rows, but 'a' has 2"):
        QueryInput({"a": [1, 2], "b": [1]})
    with pytest.raises(gpujoin.InvalidArgument, match="no columns"):
        QueryInput({})
    with pytest.raises(gpujoin.InvalidArgument, match="'a' is given twice"):
        QueryInput(pd.DataFrame([[1, 2]], columns=["a", "a"]))
    with pytest.raises(gpujoin.InvalidArgument, match="non-empty str"):
        QueryInput(pd.DataFrame([[1, 2]]))
    with pytest.raises(gpujoin.InvalidArgument, match="DataFrame or a mapping"):
        QueryInput([1, 2, 3])
    with pytest.raises(gpujoin.InvalidArgument, match="not in the input"):
        QueryInput({"a": [1]}, types={"b": "int32"})
    with pytest.raises(gpujoin.KeyValueError):
        QueryInput({"a": [-1]}, types={"a": "uint32"})


def test_batch_ranges_fit_rows_and_bytes():
    cum = np.array([0, 10, 20, 30, 40, 50], float)
    assert batch_ranges(cum, 2, 1000) == [(0, 2), (2, 4), (4, 5)]
    assert batch_ranges(cum, 10, 25) == [(0, 2), (2, 4), (4, 5)]
    assert batch_ranges(np.zeros(1), 10, 25) == [(0, 0)]
    with pytest.raises(gpujoin.InvalidArgument, match="row 0 takes 10 bytes"):
        batch_ranges(cum, 10, 5)


