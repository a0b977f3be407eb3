'use strict';
// Typed errors. Every failure of a call is a GpujoinError whose `code` is the
// gRPC status code (google.rpc.Code, the numbering gpujoind and BatchError use)
// and whose `message` is the server's message as sent; one subclass per code, so
// callers can `catch (e) { if (e instanceof NotFoundError) ... }`. Misuse caught
// before anything is sent (a Float64Array as keys, a negative key, columns of
// different lengths) is an InvalidArgumentError too, or its DtypeError subclass
// for a wrong element type or a value out of the type's range.

const CODE_NAMES = [
  'OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND',
  'ALREADY_EXISTS', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED',
  'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED',
];

/** The base class: `code` (number), `codeName` ('NOT_FOUND', ...), `message` (the server's). */
class GpujoinError extends Error {
  constructor(code, message, extra = {}) {
    super(message);
    this.name = this.constructor.name;
    this.code = code;
    this.codeName = CODE_NAMES[code] || `CODE_${code}`;
    // In-band (BatchError) failures name the batch of the stream they belong to.
    if (extra.batchId !== undefined) this.batchId = extra.batchId;
    if (extra.metadata !== undefined) this.metadata = extra.metadata;
  }
}

const SUBCLASSES = {};
function defineError(className, code) {
  const cls = {
    [className]: class extends GpujoinError {
      constructor(message, extra) {
        super(code, message, extra);
      }
    },
  }[className];
  SUBCLASSES[code] = cls;
  return cls;
}

const CancelledError = defineError('CancelledError', 1);
const UnknownError = defineError('UnknownError', 2);
const InvalidArgumentError = defineError('InvalidArgumentError', 3);
const DeadlineExceededError = defineError('DeadlineExceededError', 4);
const NotFoundError = defineError('NotFoundError', 5);
const AlreadyExistsError = defineError('AlreadyExistsError', 6);
const PermissionDeniedError = defineError('PermissionDeniedError', 7);
const ResourceExhaustedError = defineError('ResourceExhaustedError', 8);
const FailedPreconditionError = defineError('FailedPreconditionError', 9);
const AbortedError = defineError('AbortedError', 10);
const OutOfRangeError = defineError('OutOfRangeError', 11);
const UnimplementedError = defineError('UnimplementedError', 12);
const InternalError = defineError('InternalError', 13);
const UnavailableError = defineError('UnavailableError', 14);
const DataLossError = defineError('DataLossError', 15);
const UnauthenticatedError = defineError('UnauthenticatedError', 16);

/** A wrong element type or a value outside the column's type, found before sending. */
class DtypeError extends InvalidArgumentError {}

/** The GpujoinError subclass for `code` with `message`. */
function makeError(code, message, extra) {
  const cls = SUBCLASSES[code];
  return cls ? new cls(message, extra) : new GpujoinError(code, message, extra);
}

/** A grpc-js ServiceError (status code, `details` = the server's message) as a GpujoinError. */
function fromGrpcError(e) {
  if (e instanceof GpujoinError) return e;
  if (e && typeof e.code === 'number') {
    return makeError(e.code, e.details !== undefined ? e.details : e.message,
                     {metadata: e.metadata});
  }
  return makeError(2, e && e.message ? e.message : String(e));
}

module.exports = {
  CODE_NAMES, GpujoinError, DtypeError, makeError, fromGrpcError,
  CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError, NotFoundError,
  AlreadyExistsError, PermissionDeniedError, ResourceExhaustedError, FailedPreconditionError,
  AbortedError, OutOfRangeError, UnimplementedError, InternalError, UnavailableError,
  DataLossError, UnauthenticatedError,
};
