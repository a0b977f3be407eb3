"""Typed exceptions of the gpujoin client.

Every failure the server reports (a call's status, or a batch's in-band
``BatchError``) is raised as a subclass of :class:`Error` named after its gRPC
code, carrying the code and the server's message unchanged::

    try:
        client.lookup("missing", keys)
    except gpujoin.NotFound as e:
        print(e.code, e.message)   # StatusCode.NOT_FOUND  index "missing" is not ...

Mistakes caught before anything is sent (a key array of the wrong dtype, a
negative key, mismatched lengths) are :class:`InvalidArgument` too, and also
``TypeError`` or ``ValueError`` (:class:`KeyDtypeError`, :class:`KeyValueError`)
so that either style of ``except`` works.
"""
from typing import Dict, Optional, Type

import grpc


class Error(Exception):
    """A gpujoin call failed.

    Attributes:
        code: the ``grpc.StatusCode`` (the server's, or INVALID_ARGUMENT for a
            request refused before it was sent).
        message: the server's message (or the client's, for local checks).
        batch: for an in-band error of one stream batch, the 0-based position of
            the batch within the call; else None.
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None,
                 batch: Optional[int] = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.batch = batch

    def __str__(self) -> str:
        where = f" (batch {self.batch})" if self.batch is not None else ""
        return f"{self.code.name}{where}: {self.message}"


class Cancelled(Error):
    code = grpc.StatusCode.CANCELLED


class Unknown(Error):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(Error):
    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(Error):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(Error):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(Error):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(Error):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(Error):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(Error):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(Error):
    code = grpc.StatusCode.ABORTED


class OutOfRange(Error):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(Error):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(Error):
    code = grpc.StatusCode.INTERNAL


class Unavailable(Error):
    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(Error):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(Error):
    code = grpc.StatusCode.UNAUTHENTICATED


class KeyDtypeError(InvalidArgument, TypeError):
    """Keys (or another uint32 column) whose dtype holds no integers, e.g. a
    float, bool or str array for a uint32 index, or a null key in a lookup."""


class KeyValueError(InvalidArgument, ValueError):
    """Values that do not fit the column they go to, e.g. a negative key, or a
    key above 2^32 - 1 for a uint32 index."""


_BY_CODE: Dict[grpc.StatusCode, Type[Error]] = {
    cls.code: cls
    for cls in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
                PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange,
                Unimplemented, Internal, Unavailable, DataLoss, Unauthenticated)
}
# google.rpc.Code numbers (BatchError.code) to grpc.StatusCode.
_BY_NUMBER: Dict[int, grpc.StatusCode] = {c.value[0]: c for c in grpc.StatusCode}


def error_for_code(code: grpc.StatusCode, message: str, batch: Optional[int] = None) -> Error:
    """The Error subclass of `code`, carrying `message`."""
    return _BY_CODE.get(code, Error)(message, code, batch)


def from_rpc_error(e: grpc.RpcError) -> Error:
    """Converts a grpc.RpcError (a failed call) to its Error subclass."""
    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details = e.details() if hasattr(e, "details") else str(e)
    return error_for_code(code or grpc.StatusCode.UNKNOWN, details or "")


def from_batch_error(error, batch: Optional[int] = None) -> Error:
    """Converts an in-band BatchError message (google.rpc.Code number and message)."""
    code = _BY_NUMBER.get(error.code, grpc.StatusCode.UNKNOWN)
    return error_for_code(code, error.message, batch)
