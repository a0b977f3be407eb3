"""The Lookup hot path's own protobuf framing: requests are written and
responses read without a protobuf message object for the bulk columns.

A LookupRequest is its small fields, serialised by protobuf, followed by the
key column, framed by hand (protobuf merges concatenated fields), so the keys
are copied once, from the caller's array into the message. A LookupResponse's
bulk fields (values, found, probes, match_counts) are read as zero-copy views
of the received message; its small sub-messages are parsed by protobuf. This
halves the client's CPU per batch (measured in docs/PERFORMANCE.md).
"""
from typing import List, Optional, Tuple

import numpy as np

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


def lookup_request(header: bytes, keys: np.ndarray) -> bytes:
    """A serialised LookupRequest: `header` (the request's other fields, serialised)
    and `keys` (a contiguous little-endian '<u4' or '<u8' array) as packed keys
    (field 2, U32Column) or keys64 (field 6, U64Column)."""
    n = keys.nbytes
    if n == 0:  # a zero-row column is an empty typed list (`values {}`): packed empty is unset
        return header + (b"\x32" if keys.dtype.itemsize == 8 else b"\x12") + b"\x02\x12\x00"
    inner_prefix = b"\x0a" + _varint(n)  # U32Column/U64Column.packed: field 1, length-delimited
    tag = b"\x32" if keys.dtype.itemsize == 8 else b"\x12"
    return b"".join((header, tag, _varint(len(inner_prefix) + n), inner_prefix,
                     memoryview(keys).cast("B")))


class LookupAnswer:
    """A LookupResponse with its bulk fields as memoryviews of the message."""

    __slots__ = ("batch_id", "index_version", "values", "found", "probes", "match_counts",
                 "statistics", "error", "columns")

    def __init__(self):
        self.batch_id = 0
        self.index_version = 0
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
