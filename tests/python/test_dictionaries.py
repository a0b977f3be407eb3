"""Resident dictionaries of string and binary payload columns (docs/api.md
"Dictionaries") through gpujoin.Client against real gpujoind processes: a
build keeps one for every such column with few enough distinct values
(IndexInfo.payload[].dictionary_values), Mutate adds new values or retires the
dictionary past --dictionary-max-values, snapshots keep it across a restart,
and a Query grouping by the column (which then reads its codes) answers
exactly what grouping the strings answers."""
import collections

import numpy as np
import pytest

import gpujoin

pd = pytest.importorskip("pandas")


def values(col):
    if isinstance(col, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(col).tolist()
        return [None if m else v for v, m in zip(np.ma.getdata(col).tolist(), mask)]
    return [None if (isinstance(v, float) and v != v) else v
            for v in (col.tolist() if hasattr(col, "tolist") else list(col))]


def info_of(client, index, column):
    (p,) = [p for p in client.describe(index).payload if p.name == column]
    return p


def reference(stored, events):
    """Counts and sums of w by the stored label of each event's key (a left
    lookup: a missing key or a null label is the None group), in first-arrival order."""
    groups = collections.OrderedDict()
    for k, w in events:
        label = stored.get(k)
        n, s = groups.get(label, (0, 0))
        groups[label] = (n + 1, s + w)
    return groups


def grouped(client, index, events, column="type", **lookup):
    data = {"k": np.array([k for k, _ in events], np.int64),
            "w": np.array([w for _, w in events], np.int64)}
    out = (client.query(data).lookup(index, key="k", select=[column], how="left", **lookup)
           .aggregate(by=[column], measures=["count()", "sum(w)"]).run())
    return collections.OrderedDict(
        (label, (n, s)) for label, n, s in zip(values(out[column]), values(out["count"]),
                                               values(out["sum_w"])))


def test_a_build_keeps_a_dictionary_and_a_query_groups_by_it(client):
    rng = np.random.default_rng(7)
    keys = np.arange(1, 2001, dtype=np.uint32)
    # Labels equal but for one byte, an empty string and nulls.
    choices = ["temp", "temq", "", "hum", None, "Temp"]
    labels = [choices[i] for i in rng.integers(0, len(choices), keys.size)]
    client.build_index("d_sensors", keys, payload={"type": labels, "n": keys.astype(np.int64)},
                       replace=True)
    t = info_of(client, "d_sensors", "type")
    assert t.dictionary_values == 5 and t.dictionary_bytes > 0 and t.bytes > t.dictionary_bytes
    assert info_of(client, "d_sensors", "n").dictionary_values == 0
    stored = dict(zip(keys.tolist(), labels))
    events = [(int(k), int(w)) for k, w in zip(rng.integers(0, 2200, 5000), rng.integers(-9, 9, 5000))]
    assert grouped(client, "d_sensors", events) == reference(stored, events)


def test_mutations_add_values_and_groups_follow_them(client):
    keys = np.arange(1, 101, dtype=np.uint32)
    labels = ["a" if k % 2 else "b" for k in keys.tolist()]
    client.build_index("d_mut", keys, payload={"type": labels}, replace=True)
    stored = dict(zip(keys.tolist(), labels))
    client.upsert("d_mut", np.array([1, 2, 500], np.uint32),
                  payload={"type": ["c", None, "a\x00"]})
    stored.update({1: "c", 2: None, 500: "a\x00"})
    client.delete("d_mut", np.array([3, 4], np.uint32))
    del stored[3], stored[4]
    assert info_of(client, "d_mut", "type").dictionary_values == 4  # a, b, c, "a\0"
    events = [(k, k % 7) for k in [1, 2, 3, 4, 5, 6, 500, 501, 1, 500]]
    assert grouped(client, "d_mut", events) == reference(stored, events)


def test_a_keep_all_index_groups_every_expanded_row(client):
    keys = np.array([1, 1, 2, 2, 2, 3], np.uint32)
    client.build_index("d_multi", keys, payload={"type": ["x", "y", "y", None, "x", "z"]},
                       duplicates="keep_all", replace=True)
    assert info_of(client, "d_multi", "type").dictionary_values == 3
    out = grouped(client, "d_multi", [(1, 1), (2, 10), (4, 100)])
    assert out == {"x": (2, 11), "y": (2, 11), None: (2, 110)}


def test_a_filter_on_the_column_reads_its_strings(client):
    keys = np.arange(10, dtype=np.uint32)
    client.build_index("d_filter", keys, payload={"type": [f"t{k % 3}" for k in range(10)]},
                       replace=True)
    data = {"k": np.arange(12, dtype=np.int64)}
    out = (client.query(data).lookup("d_filter", key="k", select=["type"])
           .filter("type != 't1'").aggregate(by=["type"], measures=["count()"]).run())
    assert dict(zip(values(out["type"]), values(out["count"]))) == {"t0": 4, "t2": 3}


def test_binary_columns_have_dictionaries_too(client):
    keys = np.arange(6, dtype=np.uint32)
    blobs = [b"\x00\x01", b"\x00\x02", b"\x00\x01", b"\xff", b"", b"\xff"]
    client.build_index("d_blob", keys, payload={"b": blobs}, payload_types={"b": "binary"},
                       replace=True)
    assert info_of(client, "d_blob", "b").dictionary_values == 4
    out = grouped(client, "d_blob", [(k, 1) for k in range(7)], column="b")
    assert out == {b"\x00\x01": (2, 2), b"\x00\x02": (1, 1), b"\xff": (2, 2), b"": (1, 1),
                   None: (1, 1)}


def test_past_the_limit_no_dictionary_or_a_retired_one(start_gpujoind):
    server = start_gpujoind("--dictionary-max-values=3")
    with gpujoin.Client(server.address) as c:
        keys = np.arange(8, dtype=np.uint32)
        # Four distinct values: the build keeps no dictionary; queries still group.
        four = ["a", "b", "c", "d", "a", "b", "c", "d"]
        c.build_index("many", keys, payload={"type": four})
        assert info_of(c, "many", "type").dictionary_values == 0
        events = [(k, k) for k in range(10)]
        assert grouped(c, "many", events) == reference(dict(enumerate(four)), events)
        # Three: kept; a fourth value upserted retires it, and the groups stay exact.
        three = ["a", "b", "c", "a", "b", "c", "a", "b"]
        c.build_index("few", keys, payload={"type": three})
        assert info_of(c, "few", "type").dictionary_values == 3
        stored = dict(enumerate(three))
        c.upsert("few", np.array([0], np.uint32), payload={"type": ["c"]})
        stored[0] = "c"
        assert info_of(c, "few", "type").dictionary_values == 3
        assert grouped(c, "few", events) == reference(stored, events)
        c.upsert("few", np.array([1, 9], np.uint32), payload={"type": ["z", "y"]})
        stored.update({1: "z", 9: "y"})
        assert info_of(c, "few", "type").dictionary_values == 0
        assert grouped(c, "few", events) == reference(stored, events)
    assert server.stop() == 0, "".join(server.log)


def test_a_snapshot_keeps_the_dictionary_across_a_restart(start_gpujoind, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    keys = np.arange(1, 51, dtype=np.uint32)
    labels = [["red", "green", "blue"][k % 3] for k in range(50)]
    stored = dict(zip(keys.tolist(), labels))
    events = [(k, k) for k in range(0, 60, 3)]
    first = start_gpujoind(f"--data-dir={data}")
    with gpujoin.Client(first.address) as c:
        c.build_index("d_snap", keys, payload={"type": labels}, wait_durable=True)
        c.upsert("d_snap", np.array([1, 60], np.uint32), payload={"type": ["cyan", "blue"]})
        stored.update({1: "cyan", 60: "blue"})
        assert info_of(c, "d_snap", "type").dictionary_values == 4
        before = grouped(c, "d_snap", events)
        c.save_index("d_snap")
    assert first.stop() == 0, "".join(first.log)

    second = start_gpujoind(f"--data-dir={data}")
    with gpujoin.Client(second.address) as c:
        assert info_of(c, "d_snap", "type").dictionary_values == 4
        assert grouped(c, "d_snap", events) == before == reference(stored, events)
        # New codes continue after the loaded ones.
        c.upsert("d_snap", np.array([3, 6], np.uint32), payload={"type": ["pink", "red"]})
        stored.update({3: "pink", 6: "red"})
        assert info_of(c, "d_snap", "type").dictionary_values == 5
        assert grouped(c, "d_snap", events) == reference(stored, events)
    assert second.stop() == 0, "".join(second.log)
