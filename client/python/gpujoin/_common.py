"""What the Client's calls share: the batch defaults, the wire enums' tables,
and small argument and answer checks. Internal to gpujoin.client."""
import os
from typing import Any, Mapping, Union

import numpy as np

from . import keys as _keys
from ._proto import pb
from .errors import Internal, InvalidArgument

#: Rows per Lookup/Join batch unless a call or the Client says otherwise
#: (the size gpujoin-loadtest uses by default).
DEFAULT_BATCH_ROWS = 1 << 16
#: Rows per BuildIndex chunk and Aggregate/Hash batch.
DEFAULT_CHUNK_ROWS = 1 << 20
#: The largest pair capacity the server takes for one left batch.
MAX_CAPACITY = 1 << 31

_JOIN_KINDS = {"inner": 1, "left": 2, "left_outer": 2, "semi": 3, "left_semi": 3, "anti": 4,
               "left_anti": 4}
_AGGREGATE_OPS = {"count": 1, "sum": 2, "min": 3, "max": 4, "mean": 5}
_DUPLICATES = {"lowest_row": 1, "keep_all": 2}
_PLACEMENTS = {"partitioned": 0, "replicated": 1}
_KEY_TYPE_ENUM = {"uint32": 1, "uint64": 2, "columns": 3}

# Typed aggregate values (AggregateRequest.typed_values), where the API has them:
# numpy (kind, width) -> the column type sent; float32 keeps the `values` path.
_HAS_TYPED_AGGREGATE = "typed_values" in pb.AggregateRequest.DESCRIPTOR.fields_by_name
_AGGREGATE_TYPES = {("i", 1): "int32", ("i", 2): "int32", ("i", 4): "int32", ("i", 8): "int64",
                    ("u", 1): "uint32", ("u", 2): "uint32", ("u", 4): "uint32",
                    ("u", 8): "uint64", ("f", 8): "float64"}

PathOrBytes = Union[str, bytes, os.PathLike]


def _key_type_name(key_type: Any) -> str:
    if key_type in _keys.KEY_TYPES or key_type == _keys.COLUMNS:
        return key_type
    try:
        name = np.dtype(key_type).name
    except TypeError:
        name = str(key_type)
    if name not in _keys.KEY_TYPES:
        raise InvalidArgument(f"key_type must be 'uint32', 'uint64' or 'columns', got {key_type!r}")
    return name


def _choice(table: Mapping[str, int], value: str, what: str) -> int:
    try:
        return table[value]
    except KeyError:
        raise InvalidArgument(f"{what} must be one of {sorted(table)}, got {value!r}") from None


def _set_keys(target, wire: _keys.WireKeys) -> None:
    """Sets `keys` or `keys64` of a LookupRequest/LeftBatch/BuildChunk to packed
    bytes, or its `key_columns` to the key columns."""
    if isinstance(wire, _keys.KeyColumns):
        target.key_columns.extend(wire.messages(pb))
    elif wire.dtype.itemsize == 8:
        target.keys64.packed = wire.tobytes()
    else:
        target.keys.packed = wire.tobytes()


def _u32(data: bytes, rows: int, field: str) -> np.ndarray:
    a = np.frombuffer(data, "<u4")
    if len(a) != rows:
        raise Internal(f"server sent {len(a)} rows of {field} for {rows}")
    return a
