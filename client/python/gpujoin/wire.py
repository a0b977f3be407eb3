"""The Lookup and Join hot paths' own protobuf framing: requests are written
and responses read without a protobuf message object for the bulk columns.

A LookupRequest (a JoinRequest's LeftBatch) is its small fields, serialised by
protobuf, followed by the key column, framed by hand (protobuf merges
concatenated fields), so the keys are copied once, from the caller's array
into the message. The key columns of an index with a key schema are Column
messages (`key_columns`, field 9 of both), serialised by protobuf. A
response's bulk fields (values, found, probes, match_counts; a join's left and
right rows) are read as zero-copy views of the received message; its small
sub-messages are parsed by protobuf. This halves
the client's CPU per batch (measured in docs/PERFORMANCE.md).
"""
from typing import Any, Iterator, List, Optional, Tuple

import numpy as np

from . import keys as _keys
from ._proto import pb


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _len_field(tag: bytes, size: int) -> bytes:
    return tag + _varint(size)


def _keys_field(tag: bytes, keys: np.ndarray) -> Tuple[bytes, Any]:
    """(prefix, body) of a U32Column/U64Column field `tag` holding `keys` as packed bytes."""
    n = keys.nbytes
    if n == 0:  # a zero-row column is an empty typed list (`values {}`): packed empty is unset
        return tag + b"\x02\x12\x00", b""
    inner = b"\x0a" + _varint(n)  # .packed: field 1, length-delimited
    return tag + _varint(len(inner) + n) + inner, memoryview(keys).cast("B")


def _key_columns_field(keys: "_keys.KeyColumns") -> Tuple[bytes, bytes]:
    """(prefix, body) of the `key_columns` fields (9 in LookupRequest and LeftBatch)."""
    return b"", b"".join(b"\x4a" + _varint(len(c)) + c
                         for c in (m.SerializeToString() for m in keys.messages(pb)))


def lookup_request(header: bytes, keys: "_keys.WireKeys") -> bytes:
    """A serialised LookupRequest: `header` (the request's other fields, serialised)
    and `keys`: a contiguous little-endian '<u4' or '<u8' array as packed keys
    (field 2, U32Column) or keys64 (field 6, U64Column), or KeyColumns as
    key_columns."""
    if isinstance(keys, _keys.KeyColumns):
        prefix, body = _key_columns_field(keys)
    else:
        prefix, body = _keys_field(b"\x32" if keys.dtype.itemsize == 8 else b"\x12", keys)
    return b"".join((header, prefix, body))


def join_request(header: bytes, left_header: bytes, keys: "_keys.WireKeys") -> bytes:
    """A serialised JoinRequest of one left batch: `header` (the request's small
    fields, serialised), the LeftBatch's small fields `left_header` and its keys
    (field 1 `keys`, field 7 `keys64` for 8-byte keys, or field 9 `key_columns`
    for KeyColumns)."""
    if isinstance(keys, _keys.KeyColumns):
        prefix, body = _key_columns_field(keys)
    else:
        prefix, body = _keys_field(b"\x3a" if keys.dtype.itemsize == 8 else b"\x0a", keys)
    size = len(left_header) + len(prefix) + len(body)
    return b"".join((header, _len_field(b"\x12", size), left_header, prefix, body))


class LookupAnswer:
    """A LookupResponse with its bulk fields as memoryviews of the message."""

    __slots__ = ("batch_id", "index_version", "values", "found", "probes", "match_counts",
                 "statistics", "error", "columns", "mutation_sequence")

    def __init__(self):
        self.batch_id = 0
        self.index_version = 0
        self.mutation_sequence = 0
        empty = memoryview(b"")
        self.values = self.found = self.probes = self.match_counts = empty
        self.statistics: Optional[pb.QueryStatistics] = None
        self.error: Optional[pb.BatchError] = None
        self.columns: List[pb.Column] = []


# LookupResponse field numbers.
_BULK = {3: "values", 4: "found", 5: "probes", 9: "match_counts"}


def parse_lookup_response(data: bytes) -> LookupAnswer:
    """Reads a serialised LookupResponse (unknown fields are skipped)."""
    a = LookupAnswer()
    view = memoryview(data)
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _read_varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            if field == 1:
                a.batch_id = value
            elif field == 2:
                a.index_version = value
            elif field == 10:
                a.mutation_sequence = value
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            chunk = view[pos:pos + size]
            pos += size
            if field in _BULK:
                setattr(a, _BULK[field], chunk)
            elif field == 6:
                a.statistics = pb.QueryStatistics.FromString(chunk.tobytes())
            elif field == 7:
                a.error = pb.BatchError.FromString(chunk.tobytes())
            elif field == 8:
                a.columns.append(pb.Column.FromString(chunk.tobytes()))
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"LookupResponse: wire type {wire} of field {field} is not supported")
    return a


def _fields(data: bytes, pos: int, end: int) -> Iterator[Tuple[int, int, int, int]]:
    """(field, wire type, value or start, end) of each field in data[pos:end]:
    varints give their value, length-delimited fields their byte range."""
    while pos < end:
        key, pos = _read_varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            yield field, 0, value, pos
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            yield field, 2, pos, pos + size
            pos += size
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wire} of field {field} is not supported")


class JoinPart:
    """A JoinBatchResult with its left and right rows, found and probes as
    memoryviews of the message."""

    __slots__ = ("left_rows", "right_rows", "count", "capacity", "overflow", "statistics",
                 "found", "probes", "columns", "batch", "first_pair")

    def __init__(self):
        empty = memoryview(b"")
        self.left_rows = self.right_rows = self.found = self.probes = empty
        self.count = self.capacity = self.batch = self.first_pair = 0
        self.overflow = False
        self.statistics: Optional[pb.QueryStatistics] = None
        self.columns: List[pb.Column] = []


class JoinAnswer:
    """A JoinResponse: batch_id, index_version, results (JoinParts), error, more,
    mutation_sequence."""

    __slots__ = ("batch_id", "index_version", "results", "error", "more", "mutation_sequence")

    def __init__(self):
        self.batch_id = self.index_version = self.mutation_sequence = 0
        self.results: List[JoinPart] = []
        self.error: Optional[pb.BatchError] = None
        self.more = False


_JOIN_BULK = {1: "left_rows", 2: "right_rows", 7: "found", 8: "probes"}
_JOIN_INTS = {3: "count", 4: "capacity", 10: "batch", 11: "first_pair"}


def parse_join_response(data: bytes) -> JoinAnswer:
    """Reads a serialised JoinResponse (unknown fields are skipped)."""
    a = JoinAnswer()
    view = memoryview(data)
    for field, wire, x, y in _fields(data, 0, len(data)):
        if wire == 0:
            if field == 1:
                a.batch_id = x
            elif field == 2:
                a.index_version = x
            elif field == 5:
                a.more = bool(x)
            elif field == 6:
                a.mutation_sequence = x
        elif field == 3:
            part = JoinPart()
            for f, w, u, v in _fields(data, x, y):
                if w == 0:
                    if f in _JOIN_INTS:
                        setattr(part, _JOIN_INTS[f], u)
                    elif f == 5:
                        part.overflow = bool(u)
                elif f in _JOIN_BULK:
                    setattr(part, _JOIN_BULK[f], view[u:v])
                elif f == 6:
                    part.statistics = pb.QueryStatistics.FromString(data[u:v])
                elif f == 9:
                    part.columns.append(pb.Column.FromString(data[u:v]))
            a.results.append(part)
        elif field == 4:
            a.error = pb.BatchError.FromString(data[x:y])
    return a
