'use strict';
// A pipelined bidirectional stream: requests are made one at a time by `next()`
// and written while at most `maxInflight` of them are unanswered; responses are
// handed to `onResponse` in order as they arrive. The server answers every
// request of a stream in order (a join possibly in several messages, `more` set
// on all but the last), so the count of answered requests is exact.
const {fromGrpcError, InternalError} = require('./errors');

/**
 * Runs `call` (a grpc-js ClientDuplexStream). `next()` returns the next request
 * or null at the end; `onResponse(response, index)` consumes the answer to
 * request `index` (0-based) and returns true when it completes that request
 * (false: more messages of the same answer follow). A throw from either, a
 * non-OK status or an answer count that does not match cancels the call and
 * rejects with a GpujoinError. Resolves when every request was answered and the
 * call ended OK. With `trailing`, messages after every request was answered and
 * the write side closed (Query's answer to the half-close) go to `onResponse`
 * with index = the requests sent (its return value is ignored). `progress(sent, answered)` (optional) runs after each answer;
 * when it returns a promise, no further request is sent until it resolves (a
 * rejection fails the call).
 */
function pipeline(call, {next, onResponse, maxInflight, progress, trailing = false}) {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let answered = 0;
    let ended = false;       // next() returned null and the write side was closed
    let draining = false;    // a write returned false: wait for 'drain'
    let paused = 0;          // promises progress() returned that have not settled
    let settled = false;

    const fail = (e) => {
      if (settled) return;
      settled = true;
      call.cancel();
      reject(fromGrpcError(e));
    };

    const pump = () => {
      try {
        while (!settled && !ended && !draining && paused === 0 && sent - answered < maxInflight) {
          const request = next();
          if (request === null) {
            ended = true;
            call.end();
            break;
          }
          ++sent;
          if (!call.write(request)) {
            draining = true;
            call.once('drain', () => {
              draining = false;
              pump();
            });
          }
        }
      } catch (e) {
        fail(e);
      }
    };

    call.on('data', (response) => {
      if (settled) return;
      try {
        if (answered >= sent && trailing && ended) {
          onResponse(response, sent);
          return;
        }
        if (answered >= sent) throw new InternalError(`server answered request ${answered + 1} of ${sent} sent`);
        if (onResponse(response, answered)) {
          ++answered;
          const waiting = progress ? progress(sent, answered) : undefined;
          if (waiting && typeof waiting.then === 'function') {
            // The caller throttles: no further request until its promise settles.
            ++paused;
            waiting.then(() => {
              --paused;
              pump();
              finish();
            }, fail);
          } else {
            pump();
          }
        }
      } catch (e) {
        fail(e);
      }
    });
    // Resolve once the status is OK and every message was read ('end'): grpc-js
    // may report the status before the last messages reach 'data'.
    let statusOk = false;
    let readEnded = false;
    const finish = () => {
      if (settled || paused > 0 || !statusOk || !readEnded) return;
      if (!ended || answered !== sent) {
        return fail(new InternalError(`stream ended after ${answered} answers to ${sent} requests`));
      }
      settled = true;
      resolve();
    };
    call.on('error', fail);
    call.on('status', (status) => {
      if (status.code !== 0) return fail(status);
      statusOk = true;
      finish();
    });
    call.on('end', () => {
      readEnded = true;
      finish();
    });
    pump();
  });
}

module.exports = {pipeline};
