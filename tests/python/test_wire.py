"""gpujoin.wire: the hand-framed LookupRequest parses as protobuf writes it, and
LookupResponse is read back field by field (unknown fields skipped)."""
import numpy as np
import pytest

from gpujoin import wire
from gpujoin._proto import pb


@pytest.mark.parametrize("dtype,field", [("<u4", "keys"), ("<u8", "keys64")])
@pytest.mark.parametrize("rows", [1, 3, 200, 70000])  # length varints of 1, 2 and 3 bytes
def test_lookup_request_matches_protobuf(dtype, field, rows):
    keys = (np.arange(rows) * 7919).astype(dtype)
    header = pb.LookupRequest(index="ix", batch_id=1 << 35, want_probes=True, select=["a", "b"],
                              want_match_counts=True, max_probe_count=9).SerializeToString()
    m = pb.LookupRequest.FromString(wire.lookup_request(header, keys))
    want = pb.LookupRequest(index="ix", batch_id=1 << 35, want_probes=True, select=["a", "b"],
                            want_match_counts=True, max_probe_count=9)
    getattr(want, field).packed = keys.tobytes()
    assert m == want


def test_lookup_response_fields():
    values = np.arange(1000, dtype="<u4")
    r = pb.LookupResponse(batch_id=1 << 40, index_version=7, values=values.tobytes(),
                          found=bytes([1, 0] * 500), probes=b"\x02\0\0\0",
                          statistics=pb.QueryStatistics(found=5, max_probes=2),
                          columns=[pb.Column(name="x", length=1), pb.Column(name="y")],
                          match_counts=b"\x01\0\0\0", error=pb.BatchError(code=3, message="m"))
    data = r.SerializeToString() + b"\xa0\x06\x05" + b"\xad\x06abcd"  # fields 100 (varint), 101 (fixed32)
    a = wire.parse_lookup_response(data)
    assert (a.batch_id, a.index_version) == (1 << 40, 7)
    np.testing.assert_array_equal(np.frombuffer(a.values, "<u4"), values)
    assert bytes(a.found) == bytes([1, 0] * 500) and bytes(a.probes) == b"\x02\0\0\0"
    assert bytes(a.match_counts) == b"\x01\0\0\0"
    assert a.statistics == pb.QueryStatistics(found=5, max_probes=2)
    assert a.error == pb.BatchError(code=3, message="m")
    assert [c.name for c in a.columns] == ["x", "y"]
    empty = wire.parse_lookup_response(b"")
    assert empty.error is None and empty.statistics is None and len(empty.values) == 0


@pytest.mark.parametrize("dtype,field", [("<u4", "keys"), ("<u8", "keys64")])
def test_zero_row_request_sends_an_empty_typed_list(dtype, field):
    header = pb.LookupRequest(index="ix").SerializeToString()
    m = pb.LookupRequest.FromString(wire.lookup_request(header, np.zeros(0, dtype)))
    assert m.HasField(field) and getattr(m, field).HasField("values")
    assert len(getattr(m, field).values.v) == 0 and not getattr(m, field).packed


@pytest.mark.parametrize("dtype,field", [("<u4", "keys"), ("<u8", "keys64")])
@pytest.mark.parametrize("rows", [0, 1, 70000])
def test_join_request_matches_protobuf(dtype, field, rows):
    keys = (np.arange(rows) * 31).astype(dtype)
    header = pb.JoinRequest(index="ix", batch_id=5, select=["s"], kind=pb.JOIN_KIND_LEFT_SEMI,
                            max_probe_count=3).SerializeToString()
    left = pb.LeftBatch(capacity=1 << 33, want_found=True, first_left_row=7, count_only=True)
    m = pb.JoinRequest.FromString(wire.join_request(header, left.SerializeToString(), keys))
    want = pb.JoinRequest(index="ix", batch_id=5, select=["s"], kind=pb.JOIN_KIND_LEFT_SEMI,
                          max_probe_count=3, batches=[left])
    if rows:
        getattr(want.batches[0], field).packed = keys.tobytes()
    else:
        getattr(want.batches[0], field).values.SetInParent()
    assert m == want


def test_join_response_fields():
    pairs = np.arange(5000, dtype="<u4")
    r = pb.JoinResponse(batch_id=1 << 36, index_version=3, more=True, results=[
        pb.JoinBatchResult(left_rows=pairs.tobytes(), right_rows=pairs[::-1].tobytes(), count=9,
                           capacity=1 << 33, overflow=True, found=b"\1\0", probes=b"\3\0\0\0",
                           statistics=pb.QueryStatistics(missing=4),
                           columns=[pb.Column(name="c", length=2)], batch=2, first_pair=70),
        pb.JoinBatchResult(batch=3)])
    a = wire.parse_join_response(r.SerializeToString())
    assert (a.batch_id, a.index_version, a.more, a.error) == (1 << 36, 3, True, None)
    p, q = a.results
    np.testing.assert_array_equal(np.frombuffer(p.left_rows, "<u4"), pairs)
    np.testing.assert_array_equal(np.frombuffer(p.right_rows, "<u4"), pairs[::-1])
    assert (p.count, p.capacity, p.overflow, p.batch, p.first_pair) == (9, 1 << 33, True, 2, 70)
    assert bytes(p.found) == b"\1\0" and bytes(p.probes) == b"\3\0\0\0"
    assert p.statistics.missing == 4 and p.columns[0].name == "c"
    assert (q.batch, q.count, len(q.left_rows), q.statistics) == (3, 0, 0, None)
    e = wire.parse_join_response(pb.JoinResponse(error=pb.BatchError(code=5, message="x"))
                                 .SerializeToString())
    assert e.error.code == 5 and not e.results and not e.more


def test_key_columns_are_framed_as_protobuf_writes_them():
    from gpujoin import keys as K
    _, cols = K.build_key_columns({"s": ["a", None, "é" * 100], "n": [1, -2, 3]})
    view = cols[1:3]  # a row range: offsets rebased, validity of those rows
    header = pb.LookupRequest(index="ix", batch_id=3).SerializeToString()
    m = pb.LookupRequest.FromString(wire.lookup_request(header, view))
    assert m == pb.LookupRequest(index="ix", batch_id=3, key_columns=view.messages(pb))
    assert [c.length for c in m.key_columns] == [2, 2] and m.key_columns[0].validity == b"\x02"
    assert m.key_columns[0].offsets == np.array([0, 0, 200], "<i4").tobytes()
    left = pb.LeftBatch(capacity=9, first_left_row=1).SerializeToString()
    j = pb.JoinRequest.FromString(wire.join_request(pb.JoinRequest(index="ix").SerializeToString(),
                                                    left, view))
    assert j == pb.JoinRequest(index="ix", batches=[pb.LeftBatch(
        capacity=9, first_left_row=1, key_columns=view.messages(pb))])
