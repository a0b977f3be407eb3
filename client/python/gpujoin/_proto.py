"""The generated gpujoin.v1 stubs (built from proto/ by build_stubs.py, never committed)."""
try:
    from .v1 import gpujoin_pb2 as pb
    from .v1 import gpujoin_pb2_grpc as pb_grpc
except ImportError as e:  # a source checkout without generated stubs
    raise ImportError(
        f"gpujoin: the generated stubs gpujoin.v1 are missing ({e}). Install the package "
        "(pip install client/python) or generate them into a directory on PYTHONPATH: "
        "python3 client/python/build_stubs.py DIR; PYTHONPATH=client/python:DIR") from e

__all__ = ["pb", "pb_grpc"]
