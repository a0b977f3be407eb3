"""Probe bounds through gpujoin.Client: a request's max_probe_count on lookup,
lookup_stream, join and join_stream, and a build whose bound leaves keys
without a slot, which every join of the index reports as overflow.

The keys fill a table completely (64 keys, capacity 64), so many sit past
their home slot; an unbounded lookup with probes=True tells each key's slot
distance (its probe count), which is the oracle: under a request bound b a
key is found exactly when its probe count is at most b. A client that dropped
the bound would find every key.
"""
import numpy as np
import pytest

import gpujoin
from gpujoin import NO_MATCH

CAPACITY = 64
KEYS = np.arange(1, CAPACITY + 1, dtype=np.uint32)[::-1].copy()


@pytest.fixture()
def full_table(client):
    """A full table (64 keys, capacity 64, the index's bound the capacity) and
    its unbounded lookup of KEYS with per-key probe counts."""
    info = client.build_index("t_bound", KEYS, capacity=CAPACITY, replace=True)
    assert info.statistics.unique_keys == CAPACITY and info.statistics.overflow_rows == 0
    assert info.max_probe_count == CAPACITY
    free = client.lookup("t_bound", KEYS, probes=True)
    assert free.found.all()
    assert (free.probes > 2).any(), "no key sits two slots past its home: the test shows nothing"
    assert (free.probes == 1).any()
    return free


@pytest.mark.parametrize("bound", [1, 2])
def test_lookup_honours_the_requests_probe_bound(client, full_table, bound):
    within = full_table.probes <= bound
    r = client.lookup("t_bound", KEYS, probes=True, max_probe_count=bound, batch_rows=10)
    np.testing.assert_array_equal(r.found, within)
    np.testing.assert_array_equal(r.values, np.where(within, full_table.values, NO_MATCH))
    # A key beyond the bound stops after `bound` slots.
    np.testing.assert_array_equal(r.probes, np.minimum(full_table.probes, bound))
    assert (r.statistics.found, r.statistics.missing) == (within.sum(), (~within).sum())
    assert r.statistics.max_probes == bound

    streamed = list(client.lookup_stream("t_bound", np.array_split(KEYS, 3),
                                         max_probe_count=bound))
    np.testing.assert_array_equal(np.concatenate([s.found for s in streamed]), within)


@pytest.mark.parametrize("bound", [1, 2])
def test_join_honours_the_requests_probe_bound(client, full_table, bound):
    within = full_table.probes <= bound
    rows = np.flatnonzero(within).astype(np.uint32)
    j = client.join("t_bound", KEYS, max_probe_count=bound, found=True, batch_rows=10)
    np.testing.assert_array_equal(j.left_rows, rows)
    np.testing.assert_array_equal(j.right_rows, full_table.values[rows])
    np.testing.assert_array_equal(j.found, within)
    assert j.count == len(rows) and not j.overflow

    anti = client.join("t_bound", KEYS, kind="anti", max_probe_count=bound)
    np.testing.assert_array_equal(anti.left_rows, np.flatnonzero(~within))

    parts = list(client.join_stream("t_bound", np.array_split(KEYS, 3), max_probe_count=bound))
    np.testing.assert_array_equal(np.concatenate([p.left_rows for p in parts]), rows)


def test_a_bound_above_the_capacity_is_refused(client, full_table):
    with pytest.raises(gpujoin.InvalidArgument, match="max_probe_count"):
        client.lookup("t_bound", KEYS[:3], max_probe_count=CAPACITY + 1)
    with pytest.raises(gpujoin.InvalidArgument, match="max_probe_count"):
        client.join("t_bound", KEYS[:3], max_probe_count=CAPACITY + 1)


def test_build_overflow_is_reported_by_every_join(client):
    """Eight keys into four slots with a bound of one: at least four rows find
    no slot (overflow_rows). Every join of that index says overflow, whatever
    its own pairs, so a caller knows the answer may miss keys."""
    keys = np.arange(1, 9, dtype=np.uint32)
    info = client.build_index("t_overflow", keys, capacity=4, max_probe_count=1, replace=True)
    stored = info.statistics.unique_keys
    assert info.statistics.overflow_rows == len(keys) - stored and stored <= 4
    assert info.statistics.overflow_rows >= 4

    found = client.lookup("t_overflow", keys).found
    assert found.sum() == stored
    j = client.join("t_overflow", keys)
    assert j.overflow and j.count == stored == len(j.left_rows)
    np.testing.assert_array_equal(j.left_rows, np.flatnonzero(found))
    for kind in ("left", "semi", "anti"):
        assert client.join("t_overflow", keys, kind=kind).overflow, kind
    counted = client.join("t_overflow", keys, count_only=True)
    assert counted.overflow and counted.count == stored
    # No pair at all, still overflow: a missing key may be one that was dropped.
    assert client.join("t_overflow", [100]).overflow
    assert all(p.overflow for p in client.join_stream("t_overflow", [keys[:4], keys[4:]]))

    # A build without overflow joins without it.
    client.build_index("t_overflow", keys, capacity=16, replace=True)
    assert not client.join("t_overflow", keys).overflow
