"""gpujoin: Python client of gpujoind, the GPU hash-join service.

    import numpy as np, gpujoin
    c = gpujoin.Client("127.0.0.1:50051")
    c.build_index("ids", np.array([17, 4242, 99], np.uint32), replace=True)
    r = c.lookup("ids", np.array([4242, 8], np.uint32))   # r.values, r.found
    j = c.join("ids", np.array([99, 1, 17], np.uint32))    # j.left_rows, j.right_rows

String and composite keys (an index with a key schema)::

    c.build_index("orders", {"tenant": ["acme", "acme", "zeta"], "order_id": [1, 2, 1]},
                  key_columns=[("tenant", "string"), ("order_id", "int64")], replace=True)
    r = c.lookup("orders", {"tenant": ["zeta", "acme"], "order_id": [1, 1]})  # r.values [2 0]

Changes to a live index (Mutate)::

    m = c.upsert("ids", np.array([5, 99], np.uint32))   # m.inserted_keys 1, m.updated_keys 1
    m = c.delete("ids", [17, 8])                         # m.deleted_keys 1, m.not_found_keys 1
    m.mutation_sequence                                  # 2; lookups report the one they saw

Plans run by the server in one round trip (Query)::

    out = (c.query({"sensor_id": [1, 2, 2, 9], "latency_ms": [3.0, 7.5, 9.0, 1.0]})
           .lookup("sensors", key="sensor_id", select=["type"])
           .filter("latency_ms > 2")
           .aggregate(by=["type"], measures=["count()", "mean(latency_ms)"])
           .run())                                   # a dict of columns (a DataFrame in, one out)

See gpujoin.Client for every call, gpujoin.query for plans, gpujoin.keys for the key dtype rules,
gpujoin.columns for payload columns and gpujoin.errors for the exceptions.
"""
# The generated stubs (gpujoin.v1) may live in another directory named gpujoin
# on sys.path (a build tree: build_stubs.py DIR), so the package spans them all.
import pkgutil as _pkgutil

__path__ = _pkgutil.extend_path(__path__, __name__)  # noqa: F821

from .client import DEFAULT_BATCH_ROWS, DEFAULT_CHUNK_ROWS, Client  # noqa: E402
from .errors import (Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded,  # noqa: E402
                     Error, FailedPrecondition, Internal, InvalidArgument, KeyDtypeError,
                     KeyValueError, NotFound, OutOfRange, PermissionDenied, ResourceExhausted,
                     Unauthenticated, Unavailable, Unimplemented, Unknown)
from .keys import KeyColumnSpec  # noqa: E402
from .query import Query  # noqa: E402
from .results import (NO_MATCH, AggregateResult, BuildStatistics, DataFile,  # noqa: E402
                      DropResult, IndexInfo, JoinResult, LookupResult, MutateResult,
                      PayloadColumnInfo, PlanStatistics, QueryResult,
                      QueryStatistics, SaveResult, ServerInfo, StepStatistics)

__version__ = "0.1.0"

__all__ = [
    "Client", "DEFAULT_BATCH_ROWS", "DEFAULT_CHUNK_ROWS", "KeyColumnSpec", "NO_MATCH",
    "AggregateResult", "BuildStatistics", "DataFile", "DropResult", "IndexInfo", "JoinResult",
    "LookupResult", "MutateResult", "PayloadColumnInfo", "PlanStatistics", "Query",
    "QueryResult", "QueryStatistics", "SaveResult", "ServerInfo", "StepStatistics",
    "Error", "Aborted", "AlreadyExists", "Cancelled", "DataLoss", "DeadlineExceeded",
    "FailedPrecondition", "Internal", "InvalidArgument", "KeyDtypeError", "KeyValueError",
    "NotFound", "OutOfRange", "PermissionDenied", "ResourceExhausted", "Unauthenticated",
    "Unavailable", "Unimplemented", "Unknown",
]
