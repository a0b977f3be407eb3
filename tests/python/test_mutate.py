"""Mutations through gpujoin.Client (upsert, delete, mutate) against a real
gpujoind, and the request planning and checks before anything is sent.

The answers are compared with a dict model of a lowest_row row-ID index: a
delete removes the key, an upsert gives the key the next row ID and its
payload (the last occurrence in a call wins), deletes before upserts.
"""
import random

import numpy as np
import pytest

import gpujoin
from gpujoin import NO_MATCH
from gpujoin._mutate import plan_requests


class Model:
    """key -> (row ID, qty, note) of a lowest_row row-ID index."""

    def __init__(self, keys, qty, note):
        self.rows = {}
        self.next = 0
        self.upsert(keys, qty, note)

    def upsert(self, keys, qty, note):
        for k, q, n in zip(keys, qty, note):
            self.rows[int(k)] = (self.next, q, n)
            self.next += 1

    def delete(self, keys):
        found = {int(k) for k in keys if int(k) in self.rows}
        for k in found:
            del self.rows[k]
        return len(found), len({int(k) for k in keys}) - len(found)


def check(client, name, model, keys):
    r = client.lookup(name, np.asarray(keys, np.uint32), select=["qty", "note"])
    for i, k in enumerate(keys):
        want = model.rows.get(int(k))
        if want is None:
            assert not r.found[i] and r.values[i] == NO_MATCH, k
            assert r.columns["note"][i] is None
        else:
            assert r.found[i] and r.values[i] == want[0], (k, r.values[i], want)
            assert int(r.columns["qty"][i]) == want[1], k
            assert r.columns["note"][i] == want[2], k
    return r


def test_random_upserts_and_deletes_match_a_model(client):
    rng = random.Random(5)
    keys = list(range(0, 300, 3))
    qty = [k * 10 for k in keys]
    note = [f"n{k}" for k in keys]
    info = client.build_index("m_model", np.array(keys, np.uint32),
                              payload={"qty": np.array(qty, np.int64), "note": note},
                              replace=True)
    assert info.mutation_sequence == 0
    model = Model(keys, qty, note)
    sequence = 0
    for step in range(12):
        if step % 3 == 2:
            dels = [rng.randrange(400) for _ in range(rng.randrange(1, 40))]
            got = client.delete("m_model", dels, batch_rows=rng.choice([None, 7]))
            deleted, absent = model.delete(dels)
            assert (got.deleted_keys, got.not_found_keys) == (deleted, absent)
            assert got.deleted_rows == deleted
        else:
            ups = [rng.randrange(400) for _ in range(rng.randrange(1, 60))]
            q = [rng.randrange(-5, 5) for _ in ups]
            n = [rng.choice(["a", "", "Grüße", None]) for _ in ups]
            before = set(model.rows)
            got = client.upsert("m_model", np.array(ups, np.uint32),
                                payload={"qty": q, "note": n}, batch_rows=rng.choice([None, 9]))
            model.upsert(ups, q, n)
            assert got.upsert_rows == len(ups)
            if got.requests == 1:
                assert got.inserted_keys == len(set(ups) - before)
                assert got.updated_keys == len(set(ups) & before)
        sequence += got.requests
        assert got.mutation_sequence == sequence
        r = check(client, "m_model", model, list(range(400)))
        assert r.mutation_sequence == sequence
    info = client.describe("m_model")
    assert info.mutation_sequence == sequence
    assert info.next_row_id == model.next
    assert info.statistics.unique_keys == len(model.rows)
    j = client.join("m_model", np.array([3, 4], np.uint32), kind="left")
    assert j.mutation_sequence == sequence


def test_explicit_values_uint64_and_mutate_deletes_first(client):
    client.build_index("m_acct", np.array([5, 5_000_000_000, 7], np.uint64),
                       values=np.array([100, 200, 300], np.uint32), replace=True)
    m = client.mutate("m_acct", upsert_keys=np.array([5, 8], np.uint64),
                      values=[111, 888], delete_keys=[5, 7])
    assert m.requests == 1
    assert (m.deleted_keys, m.inserted_keys, m.updated_keys) == (2, 2, 0)
    r = client.lookup("m_acct", np.array([5, 5_000_000_000, 7, 8], np.uint64))
    assert r.values.tolist() == [111, 200, NO_MATCH, 888]
    with pytest.raises(gpujoin.InvalidArgument, match="explicit values"):
        client.upsert("m_acct", np.array([9], np.uint64))
    with pytest.raises(gpujoin.KeyValueError, match="negative"):
        client.delete("m_acct", np.array([-1], np.int64))  # never reinterpreted


def test_key_schema_upsert_and_delete_from_pandas(client):
    pd = pytest.importorskip("pandas")
    schema = [("tenant", "string"), ("order_id", "int64")]
    client.build_index("m_orders", {"tenant": ["acme", "acme", "zeta"], "order_id": [1, 2, 1]},
                       key_columns=schema, payload={"total": [1.5, 2.5, 3.5]}, replace=True)
    frame = pd.DataFrame({"tenant": ["zeta", "beta"], "order_id": [1, 9]})
    m = client.upsert("m_orders", frame, payload={"total": pd.Series([9.0, None])})
    assert (m.inserted_keys, m.updated_keys) == (1, 1)
    d = client.delete("m_orders", {"tenant": ["acme", None], "order_id": [2, 1]})
    assert (d.deleted_keys, d.not_found_keys) == (1, 1)
    r = client.lookup("m_orders", {"tenant": ["acme", "acme", "zeta", "beta"],
                                   "order_id": [1, 2, 1, 9]}, select=["total"])
    assert r.values.tolist() == [0, NO_MATCH, 3, 4]
    total = r.columns["total"]
    assert total[2] == 9.0 and np.ma.is_masked(total[3])
    assert r.mutation_sequence == 2


def test_keep_all_appends_and_deletes_whole_groups(client):
    client.build_index("m_groups", np.array([1, 1, 2], np.uint32), duplicates="keep_all",
                       replace=True)
    m = client.upsert("m_groups", [1, 3, 3])
    assert m.upsert_rows == 3
    r = client.lookup("m_groups", [1, 2, 3], match_counts=True)
    assert r.match_counts.tolist() == [3, 1, 2]
    j = client.join("m_groups", [1])
    assert j.right_rows.tolist() == [0, 1, 3]
    d = client.delete("m_groups", [1])
    assert (d.deleted_keys, d.deleted_rows) == (1, 3)


def test_split_requests_sum_counts(start_gpujoind):
    s = start_gpujoind("--max-mutation-rows=5")
    with gpujoin.Client(s.address) as c:
        assert c.server_info().max_mutation_rows == 5
        c.build_index("m_split", np.arange(20, dtype=np.uint32), replace=True)
        m = c.mutate("m_split", delete_keys=np.arange(0, 20, 2, dtype=np.uint32),
                     upsert_keys=np.arange(15, 30, dtype=np.uint32))
        assert m.requests == 5  # 25 rows, 5 per request
        assert m.mutation_sequence == 5
        assert m.deleted_keys == 10
        assert m.upsert_rows == 15
        assert m.inserted_keys + m.updated_keys == 15
        r = c.lookup("m_split", np.arange(32, dtype=np.uint32))
        want = [k < 30 and (k % 2 == 1 or k >= 15) for k in range(32)]
        assert r.found.tolist() == want


def test_refused_request_reports_what_was_applied(client):
    client.build_index("m_bad", np.array([1, 2, 3], np.uint32), replace=True)
    keys = np.array([10, 11, 12, 13, 0xFFFFFFFF, 14], np.uint32)  # the reserved key in request 2
    with pytest.raises(gpujoin.InvalidArgument) as e:
        client.upsert("m_bad", keys, batch_rows=2)
    assert e.value.batch == 2
    assert e.value.result.requests == 2
    assert e.value.result.mutation_sequence == 2
    r = client.lookup("m_bad", [10, 11, 12, 13, 14])
    assert r.found.tolist() == [True, True, True, True, False]


def test_checks_before_sending(client):
    client.build_index("m_checked", np.array([1, 2], np.uint32),
                       payload={"qty": np.array([1, 2], np.int64)}, replace=True)
    with pytest.raises(gpujoin.InvalidArgument, match="'qty' .* is missing"):
        client.upsert("m_checked", [5])
    with pytest.raises(gpujoin.InvalidArgument, match="no payload column 'other'"):
        client.upsert("m_checked", [5], payload={"qty": [1], "other": [2]})
    with pytest.raises(gpujoin.InvalidArgument, match="row-ID values"):
        client.upsert("m_checked", [5], values=[7], payload={"qty": [1]})
    with pytest.raises(gpujoin.InvalidArgument, match="1 rows, but upsert_keys has 2"):
        client.upsert("m_checked", [5, 6], payload={"qty": [1]})
    with pytest.raises(gpujoin.KeyDtypeError):
        client.upsert("m_checked", ["a"], payload={"qty": [1]})
    with pytest.raises(gpujoin.NotFound):
        client.delete("m_no_such_index", [1])
    assert client.describe("m_checked").mutation_sequence == 0
    empty = client.delete("m_checked", np.zeros(0, np.uint32))
    assert empty.requests == 0 and empty.mutation_sequence == 0


def test_max_load_factor_grows_the_table(client):
    info = client.build_index("m_grows", [1, 2, 3], capacity=16, max_load_factor=0.5,
                              replace=True)
    assert info.max_load_factor == 0.5
    m = client.upsert("m_grows", np.arange(100, 140, dtype=np.uint32))
    assert m.rehashes >= 1 and m.capacity >= 128 and m.load_factor <= 0.5
    assert client.describe("m_grows").rehashes == m.rehashes


def test_durable_with_a_data_dir(start_gpujoind, tmp_path):
    s = start_gpujoind(f"--data-dir={tmp_path}")
    with gpujoin.Client(s.address) as c:
        assert c.server_info().wal_sync == "always"
        c.build_index("m_durable", [1, 2, 3], replace=True)
        m = c.upsert("m_durable", [4, 5])
        assert m.durable and m.mutation_sequence == 1
    s.stop()
    again = start_gpujoind(f"--data-dir={tmp_path}")
    with gpujoin.Client(again.address) as c:
        info = c.describe("m_durable")
        assert (info.mutation_sequence, info.next_row_id) == (1, 5)
        assert c.lookup("m_durable", [4, 5]).values.tolist() == [3, 4]


# ------------------------------------------------------------------ planning


def test_plan_requests_bounds_and_order():
    dels = 4.0 * np.arange(11)
    ups = 8.0 * np.arange(6)
    assert plan_requests(dels, ups, 4, 1 << 20) == [(0, 4, 0, 0), (4, 8, 0, 0), (8, 10, 0, 2),
                                                     (10, 10, 2, 5)]
    assert plan_requests(None, ups, 100, 64 + 16) == [(0, 0, 0, 2), (0, 0, 2, 4), (0, 0, 4, 5)]
    assert plan_requests(dels, None, 100, 1 << 20) == [(0, 10, 0, 0)]
    assert plan_requests(None, None, 10, 100) == []
    with pytest.raises(gpujoin.InvalidArgument, match="upsert row 0"):
        plan_requests(None, np.array([0.0, 500.0]), 10, 100)
    with pytest.raises(gpujoin.InvalidArgument, match="delete_keys: row 1"):
        plan_requests(np.array([0.0, 1.0, 900.0]), None, 10, 100)
