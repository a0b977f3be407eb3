"""Client.query (the Query stream, docs/api.md "Query: plans in one round trip")
against a real gpujoind: lookups on uint32, uint64 and key-schema indexes in
every join kind, keep_all expansion, filters with nulls, aggregates with every
measure, projection, limits, answers continued over several messages, step
statistics and errors (the plan builder alone: test_query_plan.py).

Each test uses index names of its own (prefix q_), so the tests share one server.
"""
import math
import os
import re
import subprocess
import sys
import threading

import grpc
import numpy as np
import pytest

import gpujoin

pd = pytest.importorskip("pandas")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def values(col):
    """A result column as a list, None where a row is null."""
    if isinstance(col, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(col).tolist()
        return [None if m else v for v, m in zip(np.ma.getdata(col).tolist(), mask)]
    return list(col.tolist()) if hasattr(col, "tolist") else list(col)


def record_answers(client, monkeypatch):
    """(batch_id, first_row, rows, more, final) of every QueryResponse the
    client reads from now on."""
    seen = []
    stream = client._stream

    def recording(name, *args, **kwargs):
        for r in stream(name, *args, **kwargs):
            seen.append((r.batch_id, r.first_row, r.rows, r.more, r.final))
            yield r

    monkeypatch.setattr(client, "_stream", recording)
    return seen


def rows_of(out, names):
    """The rows of a dict result as tuples of the named columns."""
    return list(zip(*(values(out[n]) for n in names)))


# ---------------------------------------------------------------- lookups


@pytest.fixture(scope="module")
def indexes(server):
    """The indexes the lookup tests share."""
    with gpujoin.Client(server.address) as c:
        c.build_index("q_u32", np.array([10, 20, 30, 40], np.uint32),
                      payload={"name": ["ten", "twenty", None, "forty"],
                               "weight": [1.5, 2.5, 3.5, None],
                               "region": np.array([7, 8, 7, 9], np.uint32)}, replace=True)
        c.build_index("q_u64", np.array([1 << 40, (1 << 63) + 5, 7], np.uint64),
                      payload={"label": ["big", "huge", "small"]}, replace=True)
        c.build_index("q_sku", {"sku": ["A-1", "B-2", "C-3"]}, key_columns=[("sku", "string")],
                      payload={"price": [9.5, 3.0, 1.25]}, replace=True)
        c.build_index("q_orders", {"tenant": ["acme", "acme", "zeta"], "order_id": [1, 2, 1]},
                      key_columns=[("tenant", "string"), ("order_id", "int64")],
                      payload={"total": np.array([100, 200, 300], np.int64)}, replace=True)
        c.build_index("q_multi", np.array([1, 2, 1, 3, 1], np.uint32), duplicates="keep_all",
                      payload={"tag": ["a", "b", "c", "d", "e"]}, replace=True)
        c.build_index("q_region", np.array([7, 8], np.uint32),
                      payload={"region": ["north", "south"]}, replace=True)
    yield


def test_lookup_select_on_a_uint32_index(client, indexes):
    out = (client.query({"k": np.array([20, 5, 10, 30, 20], np.uint32), "v": [1, 2, 3, 4, 5]})
           .lookup("q_u32", key="k", select=["name", "weight"]).run())
    assert set(out) == {"k", "v", "name", "weight", "q_u32.found"}
    assert rows_of(out, ["k", "v", "name", "weight", "q_u32.found"]) == [
        (20, 1, "twenty", 2.5, True), (10, 3, "ten", 1.5, True), (30, 4, None, 3.5, True),
        (20, 5, "twenty", 2.5, True)]
    assert out["weight"].dtype == np.float64 and out["v"].dtype == np.int64


def test_lookup_left_semi_anti_on_a_uint32_index(client, indexes):
    data = {"k": np.array([20, 5, 10, 40], np.uint32)}
    left = client.query(data).lookup("q_u32", key="k", select=["name", "weight"], how="left").run()
    assert rows_of(left, ["k", "name", "weight", "q_u32.found"]) == [
        (20, "twenty", 2.5, True), (5, None, None, False), (10, "ten", 1.5, True),
        (40, "forty", None, True)]
    semi = client.query(data).lookup("q_u32", key="k", select=["name"], how="semi").run()
    assert rows_of(semi, ["k", "name"]) == [(20, "twenty"), (10, "ten"), (40, "forty")]
    anti = client.query(data).lookup("q_u32", key="k", select=["name"], how="anti").run()
    assert rows_of(anti, ["k", "name"]) == [(5, None)]


def test_lookup_keys_of_any_integer_type_and_nulls_are_missing(client, indexes):
    """A null, a negative value or one the key type cannot hold is missing."""
    keys = np.ma.MaskedArray(np.array([10, -1, 1 << 33, 20, 30], np.int64),
                             mask=[False, False, False, True, False])
    out = (client.query({"k": keys}).lookup("q_u32", key="k", select=["name"], how="left",
                                            found_column="hit").run())
    assert "q_u32.found" not in out
    assert values(out["hit"]) == [True, False, False, False, True]
    assert values(out["name"]) == ["ten", None, None, None, None]
    assert values(out["k"]) == [10, -1, 1 << 33, None, 30]


def test_lookup_select_on_a_uint64_index(client, indexes):
    ids = np.array([(1 << 63) + 5, 3, 7, 1 << 40], np.uint64)
    out = client.query({"id": ids}).lookup("q_u64", key="id", select=["label"], how="left").run()
    assert values(out["label"]) == ["huge", None, "small", "big"]
    assert values(out["q_u64.found"]) == [True, False, True, True]
    assert out["id"].dtype == np.uint64
    # int64 keys: a negative one is missing (never its bit pattern).
    out = client.query({"id": [-5, 7]}).lookup("q_u64", key="id", select=["label"],
                                               how="left").run()
    assert values(out["label"]) == [None, "small"]


def test_lookup_on_key_schema_indexes(client, indexes):
    skus = ["C-3", None, "b-2", "A-1"]
    out = client.query({"sku": skus}).lookup("q_sku", key="sku", select=["price"],
                                             how="left").run()
    assert values(out["price"]) == [1.25, None, None, 9.5]
    assert values(out["sku"]) == skus
    out = (client.query({"t": ["zeta", "acme", "acme", None], "id": [1, 2, 3, 1]})
           .lookup("q_orders", key=["t", "id"], select=["total"], prefix="o_").run())
    assert rows_of(out, ["t", "id", "o_total"]) == [("zeta", 1, 300), ("acme", 2, 200)]
    assert values(out["q_orders.found"]) == [True, True]


def test_keep_all_lookup_expands_rows(client, indexes):
    data = {"k": np.array([1, 4, 3], np.uint32), "row": [0, 1, 2]}
    want = {"inner": [(1, "a"), (1, "c"), (1, "e"), (3, "d")],
            "left": [(1, "a"), (1, "c"), (1, "e"), (4, None), (3, "d")],
            "semi": [(1, "a"), (3, "d")],
            "anti": [(4, None)]}
    for how, rows in want.items():
        out = client.query(data).lookup("q_multi", key="k", select=["tag"], how=how).run()
        assert rows_of(out, ["k", "tag"]) == rows, how


def test_chained_lookups_and_project(client, indexes):
    """A lookup keyed by a payload column an earlier lookup added."""
    out = (client.query({"k": np.array([10, 40, 20, 99], np.uint32)})
           .lookup("q_u32", key="k", select=["region"], how="left")
           .lookup("q_region", key="region", select=["region"], prefix="r_", how="left")
           .project("k", ("r_region", "region_name"), "q_region.found").run())
    assert list(out) == ["k", "region_name", "q_region.found"]
    assert rows_of(out, list(out)) == [(10, "north", True), (40, None, False),
                                       (20, "south", True), (99, None, False)]


def test_dataframe_in_dataframe_out(client, indexes):
    frame = pd.DataFrame({"k": pd.array([20, None, 10], dtype="UInt32"),
                          "note": ["x", "y", None]}, index=[5, 6, 7])
    out = client.query(frame).lookup("q_u32", key="k", select=["weight", "name"],
                                     how="left").run()
    assert isinstance(out, pd.DataFrame)
    assert list(out.index) == [0, 1, 2]
    assert out["k"].dtype == "UInt32" and out["k"].isna().tolist() == [False, True, False]
    assert out["weight"].tolist()[0] == 2.5
    assert out["weight"].isna().tolist() == [False, True, False]
    assert out["name"].tolist() == ["twenty", None, "ten"]
    assert out["note"].tolist() == ["x", "y", None]
    assert isinstance(client.query(frame).limit(1).run(as_frame=False), dict)
    assert isinstance(client.query({"a": [1]}).limit(5).run(as_frame=True), pd.DataFrame)


def test_lookup_statistics_per_batch(client, indexes):
    keys = np.array([10, 11, 20, 21, 30, 31, 40], np.uint32)
    out, stats = (client.query({"k": keys}).lookup("q_u32", key="k", select=["name"])
                  .filter("name is not null").run(return_statistics=True, batch_rows=3))
    assert values(out["k"]) == [10, 20, 40]
    assert len(stats.batches) == 3 and stats.final == []
    version = client.describe("q_u32").version
    for b, want_in in zip(stats.batches, [3, 3, 1]):
        assert [s.kind for s in b] == ["lookup", "filter"]
        assert [s.step for s in b] == [0, 1]
        assert b[0].rows_in == want_in and b[0].index == "q_u32"
        assert b[0].index_version == version
        assert b[0].statistics.found + b[0].statistics.missing == want_in
        assert b[1].rows_in == b[0].rows_out
    totals = stats.steps()
    assert [(s.kind, s.rows_in, s.rows_out) for s in totals] == [("lookup", 7, 4), ("filter", 4, 3)]
    assert totals[0].statistics.found == 4 and totals[0].statistics.missing == 3
    assert stats.index_versions("q_u32") == [version]


def test_an_index_rebuilt_mid_stream_is_named_by_the_batches_statistics(server, monkeypatch):
    """Each batch runs on the index's live version: batches after a rebuild
    see the new one, and their statistics say which."""
    with gpujoin.Client(server.address) as c:
        first = c.build_index("q_reb", np.array([1, 2], np.uint32), payload={"v": ["old", "old"]},
                              replace=True)
        stream = c._stream
        answered = threading.Event()

        def rebuild_after_the_first_answer(name, requests, *args, **kwargs):
            def held():
                for i, r in enumerate(requests):
                    if i == 1:  # batch 0 was answered on the old version: rebuild, then go on
                        assert answered.wait(30)
                        c.build_index("q_reb", np.array([1, 2], np.uint32),
                                      payload={"v": ["new", "new"]}, replace=True)
                    yield r
            for r in stream(name, held(), *args, **kwargs):
                answered.set()
                yield r

        monkeypatch.setattr(c, "_stream", rebuild_after_the_first_answer)
        out, stats = (c.query({"k": np.array([1, 2, 1, 2], np.uint32)})
                      .lookup("q_reb", key="k", select=["v"]).run(batch_rows=2,
                                                                  return_statistics=True))
        assert values(out["v"]) == ["old", "old", "new", "new"]
        assert stats.index_versions("q_reb") == [first.version, first.version + 1]
        assert [b[0].index_version for b in stats.batches] == [first.version, first.version + 1]


# ---------------------------------------------------------------- filters


FILTER_INPUT = {"x": [1, None, 3, None, 5], "s": ["a", None, "c", "d", None],
                "f": np.array([0.5, np.nan, 2.0, 1.0, np.inf]),
                "b": [True, False, None, True, False]}


@pytest.mark.parametrize("where, rows", [
    ("x > 2", [2, 4]),
    ("x is null", [1, 3]),
    ("x is not null", [0, 2, 4]),
    ("not (x > 2)", [0]),                      # not null is null: the null rows drop
    ("x > 2 or s = 'd'", [2, 3, 4]),           # true or null is true
    ("x > 2 and s = 'c'", [2]),                # false and null is false, null drops
    ("not (x > 2 and s is null)", [0, 2, 3]),  # row 3: null and false is false
    ("x in (1, 5)", [0, 4]),
    ("x not in (1, 5)", [2]),
    ("s not in ('a')", [2, 3]),
    ("x != 3", [0, 4]),
    ("x <> 3 OR s == 'a'", [0, 4]),            # keywords are case-insensitive
    ("f != 1.0", [0, 1, 2, 4]),                # NaN compares false except !=
    ("f > 1", [2, 4]),
    ("x >= 3.5", [4]),                         # integers against a float literal: as float64
    ("b = true", [0, 3]),
    ("b = false or b is null", [1, 2, 4]),
    ("\"s\" = 'it''s' or s >= 'c'", [2, 3]),
])
def test_filter_with_nulls(client, where, rows):
    out = client.query(FILTER_INPUT).filter(where).run()
    assert values(out["x"]) == [FILTER_INPUT["x"][r] for r in rows], where


def test_filter_compares_integers_exactly(client):
    big = np.array([0, (1 << 63) - 1, -(1 << 63)], np.int64)
    out = client.query({"v": big}).filter("v < 18446744073709551615").run()
    assert values(out["v"]) == big.tolist()  # an int64 column against 2^64 - 1 is simply less
    out = client.query({"v": big}).filter("v = 9223372036854775807").run()
    assert values(out["v"]) == [(1 << 63) - 1]


@pytest.mark.parametrize("where", ["x >", "s = 5", "x = 'a'", "(x > 1", "x > 1 and", "x ~ 3",
                                   "no_such_column = 1", "x in ()"])
def test_bad_filter_text_is_invalid_argument(client, where):
    with pytest.raises(gpujoin.InvalidArgument) as e:
        client.query(FILTER_INPUT).filter(where).run()
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and e.value.message


# ---------------------------------------------------------------- aggregates


@pytest.fixture(scope="module")
def sensors(server):
    with gpujoin.Client(server.address) as c:
        c.build_index("q_sensors", np.array([1, 2, 3, 4, 6], np.uint32),
                      payload={"type": ["temp", "door", "temp", None, "hum"]}, replace=True)
    yield


SENSOR_INPUT = {
    "sensor_id": np.array([1, 2, 3, 4, 5, 1, 2, 6, 1], np.uint32),
    "latency": [3.0, 7.5, None, 1.0, 2.0, 5.0, 9.0, None, math.inf],
    "bytes": np.array([10, 20, 30, 40, 50, 60, 70, 80, -5], np.int64),
    "small": np.array([1, 2, 3, 4, 5, 6, 7, 8, 9], np.int32),
    "u": np.array([4, 3, 2, 1, 0, 1, 2, 3, 4], np.uint32),
    "f32": np.array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5], np.float32),
}


def test_aggregate_by_a_string_payload_column_with_every_measure(client, sensors):
    out = (client.query(SENSOR_INPUT).lookup("q_sensors", key="sensor_id", select=["type"],
                                             how="left")
           .aggregate(by=["type"], measures=[
               "count()", "count(latency)", "sum(bytes)", "sum(u)", "sum(latency)", "sum(f32)",
               "min(latency)", "max(latency)", "min(small)", "max(u)", "mean(latency)",
               "mean(bytes)", "mean(f32)", ("max", "bytes", "top"), {"op": "min", "column": "f32",
                                                                    "name": "low"}])
           .run())
    # Groups in the order of their first row: temp (rows 0, 2, 5, 8), door (1, 6),
    # null (3: a stored null, 4: no match), hum (7, whose latency is null).
    assert values(out["type"]) == ["temp", "door", None, "hum"]
    assert list(out) == ["type", "count", "count_latency", "sum_bytes", "sum_u", "sum_latency",
                         "sum_f32", "min_latency", "max_latency", "min_small", "max_u",
                         "mean_latency", "mean_bytes", "mean_f32", "top", "low"]
    assert values(out["count"]) == [4, 2, 2, 1] and out["count"].dtype == np.uint64
    assert values(out["count_latency"]) == [3, 2, 2, 0]   # inf is a value; nulls are not
    assert values(out["sum_bytes"]) == [95, 90, 90, 80] and out["sum_bytes"].dtype == np.int64
    assert values(out["sum_u"]) == [11, 5, 1, 3] and out["sum_u"].dtype == np.uint64
    # Nulls and non-finite floats are skipped; a group with no value left is null.
    assert values(out["sum_latency"]) == [8.0, 16.5, 3.0, None]
    assert out["sum_f32"].dtype == np.float32 and values(out["sum_f32"]) == [17.0, 8.0, 8.0, 7.5]
    assert values(out["min_latency"]) == [3.0, 7.5, 1.0, None]
    assert values(out["max_latency"]) == [5.0, 9.0, 2.0, None]
    assert values(out["min_small"]) == [1, 2, 4, 8] and out["min_small"].dtype == np.int32
    assert values(out["max_u"]) == [4, 3, 1, 3] and out["max_u"].dtype == np.uint32
    assert values(out["mean_latency"]) == [4.0, 8.25, 1.5, None]
    assert out["mean_latency"].dtype == np.float64
    assert values(out["mean_bytes"]) == [23.75, 45.0, 45.0, 80.0]
    assert out["mean_f32"].dtype == np.float32
    assert values(out["mean_f32"]) == pytest.approx([4.25, 4.0, 4.0, 7.5])
    assert values(out["top"]) == [60, 70, 50, 80] and values(out["low"]) == [0.5, 1.5, 3.5, 7.5]


def test_aggregate_over_several_batches_with_a_final_answer(client, sensors):
    out, stats = (client.query(SENSOR_INPUT)
                  .lookup("q_sensors", key="sensor_id", select=["type"])
                  .aggregate(by="type", measures={"n": "count()", "total": "sum(bytes)"})
                  .run(return_statistics=True, batch_rows=2))
    # Inner: sensor 5 has no match; sensor 4's stored type is null, a group of its own.
    assert rows_of(out, ["type", "n", "total"]) == [("temp", 4, 95), ("door", 2, 90),
                                                    (None, 1, 40), ("hum", 1, 80)]
    assert len(stats.batches) == 5   # each input message: its step statistics, no rows
    for b in stats.batches:
        assert b and b[0].kind == "lookup"
    assert stats.final and any(s.kind == "aggregate" for s in stats.final)
    agg = [s for s in stats.final if s.kind == "aggregate"][0]
    assert agg.rows_out == 4
    # The batches' aggregate steps took the 8 rows with a match.
    assert sum(s.rows_in for b in stats.batches for s in b if s.kind == "aggregate") == 8


def test_aggregate_group_by_several_columns_and_steps_after_it(client, sensors):
    data = {"g": ["a", "b", "a", "a", None, "b"], "h": [1, 1, 1, 2, 1, 1],
            "v": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}
    out = (client.query(data).aggregate(by=["g", "h"], measures=["count()", "sum(v) as sv"])
           .filter("sv > 3").project(("sv", "total"), "g", "h").limit(2).run())
    assert list(out) == ["total", "g", "h"]
    # Groups (a,1) 4.0, (b,1) 8.0, (a,2) 4.0, (null,1) 5.0; sv > 3 keeps them all; limit 2.
    assert rows_of(out, ["g", "h", "total"]) == [("a", 1, 4.0), ("b", 1, 8.0)]


def test_aggregate_without_group_by_answers_one_row_even_for_no_rows(client):
    out = (client.query({"v": np.array([1, 2, 3], np.int64)}).filter("v > 10")
           .aggregate(measures=["count()", "sum(v)", "min(v)", "mean(v)"]).run())
    assert values(out["count"]) == [0]
    assert values(out["sum_v"]) == [None] and values(out["min_v"]) == [None]
    assert values(out["mean_v"]) == [None]
    out = client.query({"v": np.array([1, 2, 3], np.int64)}).aggregate().run()
    assert values(out["count"]) == [3]


def test_aggregate_group_by_bool_and_binary(client):
    data = {"flag": [True, False, True, None], "raw": [b"\x00", b"\x00", b"\x01", b"\x00"]}
    out = client.query(data).aggregate(by=["flag"], measures="count()").run()
    assert rows_of(out, ["flag", "count"]) == [(True, 2), (False, 1), (None, 1)]
    out = client.query(data).aggregate(by="raw").run()
    assert rows_of(out, ["raw", "count"]) == [(b"\x00", 3), (b"\x01", 1)]


def test_integer_sum_overflow_is_out_of_range(client):
    data = {"g": [1, 1, 2], "v": np.array([1 << 62, 1 << 62, 5], np.int64)}
    with pytest.raises(gpujoin.OutOfRange) as e:
        client.query(data).aggregate(by="g", measures=["sum(v)"]).run()
    assert "sum" in e.value.message


def test_aggregate_of_an_unknown_or_non_numeric_column_is_invalid(client):
    with pytest.raises(gpujoin.InvalidArgument):
        client.query({"g": [1], "s": ["x"]}).aggregate(by="g", measures=["sum(s)"]).run()
    with pytest.raises(gpujoin.InvalidArgument):
        client.query({"g": [1]}).aggregate(by="g", measures=["sum(nope)"]).run()
    with pytest.raises(gpujoin.InvalidArgument):
        client.query({"g": [1.5]}).aggregate(by="g").run()  # floats cannot be grouped


# ---------------------------------------------------------------- limits, batches, continuation


def test_limit_over_a_stream_of_batches(client):
    n = 1000
    data = {"i": np.arange(n, dtype=np.int64), "s": [f"r{i}" for i in range(n)]}
    out, stats = client.query(data).filter("i >= 100").limit(250).run(batch_rows=64,
                                                                      return_statistics=True)
    assert values(out["i"]) == list(range(100, 350))
    assert values(out["s"]) == [f"r{i}" for i in range(100, 350)]
    assert len(stats.batches) == math.ceil(n / 64)
    assert sum(s.rows_out for b in stats.batches for s in b if s.kind == "limit") == 250
    assert values(client.query(data).limit(0).run()["i"]) == []


def test_empty_input_runs_the_plan(client, indexes):
    out = (client.query({"k": np.zeros(0, np.uint32)})
           .lookup("q_u32", key="k", select=["name"]).run())
    assert all(len(c) == 0 for c in out.values())
    out = client.query({"k": np.zeros(0, np.uint32)}).aggregate(measures=["count()"]).run()
    assert values(out["count"]) == [0]


def test_many_batches_keep_their_order(client, indexes):
    rng = np.random.default_rng(7)
    keys = rng.choice(np.array([10, 20, 30, 40, 50, 60], np.uint32), size=20_000)
    names = {10: "ten", 20: "twenty", 30: None, 40: "forty"}
    out = (client.query({"k": keys, "pos": np.arange(len(keys), dtype=np.int64)})
           .lookup("q_u32", key="k", select=["name"], how="left").run(batch_rows=997))
    assert values(out["pos"]) == list(range(len(keys)))
    assert values(out["name"]) == [names.get(k) for k in keys.tolist()]


def test_result_continued_over_messages(small_message_server, monkeypatch):
    """One batch whose result (4000 rows of 1000-byte strings, 4 MB) does not
    fit the server's 1 MiB messages comes in parts (`more`, `first_row`),
    which the client reassembles in order."""
    with gpujoin.Client(small_message_server.address) as c:
        n = 4000
        texts = [f"{i:06d}" + "x" * 994 for i in range(n)]
        c.build_index("q_wide", np.arange(n, dtype=np.uint32), payload={"text": texts},
                      replace=True)
        seen = record_answers(c, monkeypatch)
        keys = np.arange(n, dtype=np.uint32)[::-1].copy()
        out = c.query({"k": keys}).lookup("q_wide", key="k", select=["text"]).run(batch_rows=n)
        assert len(seen) > 3 and all(m[3] for m in seen[:-1]) and not seen[-1][3]
        assert {m[0] for m in seen} == {0}
        assert [m[1] for m in seen] == [sum(m[2] for m in seen[:i]) for i in range(len(seen))]
        assert values(out["k"]) == keys.tolist()
        assert values(out["text"]) == [texts[k] for k in keys.tolist()]


def test_final_answer_continued_over_messages(small_message_server, monkeypatch):
    """An aggregate's groups larger than a message (3000 groups keyed by
    1000-byte strings) come in several messages after the half-close, all
    with the batch_id after the last batch's, each with `final` set."""
    with gpujoin.Client(small_message_server.address) as c:
        n = 3000
        keys = [f"{i:06d}" + "y" * 994 for i in range(n)]
        seen = record_answers(c, monkeypatch)
        data = {"g": keys + keys[::-1], "v": np.arange(2 * n, dtype=np.int64)}
        out, stats = (c.query(data).aggregate(by="g", measures=["count()", "sum(v)"])
                      .run(batch_rows=1000, return_statistics=True))
        assert len(stats.batches) == 6
        final = [m for m in seen if m[0] == 6]
        assert len(final) > 2 and all(m[4] for m in final)
        assert values(out["g"]) == keys
        assert values(out["count"]) == [2] * n
        assert values(out["sum_v"]) == [2 * n - 1] * n


def test_a_batch_cut_by_the_result_limit_runs_again_in_smaller_batches(small_message_server,
                                                                       monkeypatch):
    """--max-result-bytes=8M: 4096 keys matching 400 rows each of a keep_all
    index expand to 1.4M rows, more than one batch may hold; the query runs
    again in halves and the rows are complete and in order. With batch_rows
    given, the server's ResourceExhausted is raised as it is."""
    with gpujoin.Client(small_message_server.address) as c:
        build = np.repeat(np.arange(10, dtype=np.uint32), 400)
        c.build_index("q_cut", build, duplicates="keep_all", replace=True)
        streams = []
        stream = c._stream
        monkeypatch.setattr(c, "_stream", lambda name, *a, **k: streams.append(name) or
                            stream(name, *a, **k))
        left = np.tile(np.arange(12, dtype=np.uint32), 342)[:4096]
        out = c.query({"k": left, "row": np.arange(4096, dtype=np.int64)}).lookup(
            "q_cut", key="k").run()
        want_rows = [r for r, k in enumerate(left.tolist()) if k < 10 for _ in range(400)]
        assert values(out["row"]) == want_rows
        assert len(streams) >= 2  # the refused run, then smaller batches
        with pytest.raises(gpujoin.ResourceExhausted, match="--max-result-bytes"):
            c.query({"k": left}).lookup("q_cut", key="k").run(batch_rows=4096)


# ---------------------------------------------------------------- errors


def test_unknown_index_is_refused(client):
    with pytest.raises((gpujoin.NotFound, gpujoin.InvalidArgument)) as e:
        client.query({"k": [1, 2]}).lookup("q_no_such_index", key="k").run()
    assert "q_no_such_index" in e.value.message


def test_plan_errors_name_what_is_wrong(client, indexes):
    with pytest.raises(gpujoin.InvalidArgument):  # a key column the input does not have
        client.query({"k": [1]}).lookup("q_u32", key="nope").run()
    with pytest.raises(gpujoin.InvalidArgument):  # a payload column the index does not have
        client.query({"k": [1]}).lookup("q_u32", key="k", select=["nope"]).run()
    with pytest.raises(gpujoin.InvalidArgument):  # a string column as a uint32 key
        client.query({"k": ["a"]}).lookup("q_u32", key="k").run()
    with pytest.raises(gpujoin.InvalidArgument):  # an int column for a string key column
        client.query({"sku": [1]}).lookup("q_sku", key="sku").run()
    with pytest.raises(gpujoin.InvalidArgument):  # one column for a two-column key schema
        client.query({"t": ["acme"]}).lookup("q_orders", key="t").run()
    with pytest.raises(gpujoin.InvalidArgument):  # projecting a column that does not exist
        client.query({"k": [1]}).project("nope").run()


def test_a_plan_error_fails_every_batch(client):
    """The error answers the first message (and every later one): the call
    raises the first, naming batch 0."""
    with pytest.raises(gpujoin.InvalidArgument) as e:
        client.query({"x": np.arange(100, dtype=np.int64)}).filter("x >").run(batch_rows=10)
    assert e.value.batch == 0


# ---------------------------------------------------------------- docs


def test_the_docs_api_md_query_example_runs(server):
    """The Python example at the end of docs/api.md's Query section runs as
    written (the address pointed at a test server) and prints what its
    comment says."""
    doc = open(os.path.join(ROOT, "docs", "api.md")).read()
    section = doc[doc.index("## Query: plans in one round trip"):]
    section = section[:section.index("\n## ", 1)]
    block = re.findall(r"```python\n(.*?)```", section, re.S)[-1]
    assert "gpujoin.Client(" in block
    script = block.replace('"127.0.0.1:50051"', repr(server.address))
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    printed = [line for line in block.splitlines() if line.startswith("print(")]
    comments = [line.split("# ", 1)[1] for line in printed]
    assert r.stdout.splitlines() == comments
