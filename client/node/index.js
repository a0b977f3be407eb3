'use strict';
// @gpujoin/client: a Node client for gpujoind (docs/api.md in the repository).
// Every name is exported on its own line so that ESM `import {Client} from
// '@gpujoin/client'` sees it (Node's CommonJS export detection).
const client = require('./lib/client');
const errors = require('./lib/errors');
const proto = require('./lib/proto');

exports.Client = client.Client;
exports.Column = client.Column;
exports.NO_MATCH = client.NO_MATCH;
exports.Query = require('./lib/query').Query;
exports.protoRoot = proto.protoRoot;
exports.GpujoinError = errors.GpujoinError;
exports.DtypeError = errors.DtypeError;
exports.CancelledError = errors.CancelledError;
exports.UnknownError = errors.UnknownError;
exports.InvalidArgumentError = errors.InvalidArgumentError;
exports.DeadlineExceededError = errors.DeadlineExceededError;
exports.NotFoundError = errors.NotFoundError;
exports.AlreadyExistsError = errors.AlreadyExistsError;
exports.PermissionDeniedError = errors.PermissionDeniedError;
exports.ResourceExhaustedError = errors.ResourceExhaustedError;
exports.FailedPreconditionError = errors.FailedPreconditionError;
exports.AbortedError = errors.AbortedError;
exports.OutOfRangeError = errors.OutOfRangeError;
exports.UnimplementedError = errors.UnimplementedError;
exports.InternalError = errors.InternalError;
exports.UnavailableError = errors.UnavailableError;
exports.DataLossError = errors.DataLossError;
exports.UnauthenticatedError = errors.UnauthenticatedError;
