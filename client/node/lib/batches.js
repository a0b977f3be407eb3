'use strict';
// A bidirectional stream driven by an (async) iterable of requests and read as
// an async iterator of results, for pipelines whose input does not fit in
// memory: requests are pulled from the source only while fewer than
// `maxInflight` batches are sent and not yet taken by the consumer, so at most
// that many batches (requests and answers) are held at any time, however slow
// either side is.
const {fromGrpcError, InternalError} = require('./errors');

/**
 * Runs `call` (a grpc-js ClientDuplexStream). `items` is an async iterable of
 * {request, add}: `request` is written, and `add(response)` consumes each
 * message answering it (in order), returning the batch's result once its last
 * message arrived, else undefined. Yields the results in request order.
 * Leaving the loop early (break, throw) cancels the call and closes `items`;
 * a non-OK status or an in-band error thrown by `add` cancels the call and is
 * thrown as a GpujoinError. A throw of the source ends the requests: the
 * batches already sent are answered and yielded, then its error is thrown
 * as it is (a DtypeError for a batch of the wrong type).
 */
async function* duplex(call, items, maxInflight) {
  const pending = [];  // items sent, awaiting their answers, in order
  const ready = [];    // results not yet taken by the consumer
  let error = null;
  let sourceError = null;
  let statusOk = false;
  let readEnded = false;
  let writerDone = false;
  let stopped = false;  // the consumer left: the writer stops pulling
  let sent = 0;
  let taken = 0;
  let wakeReader = null;
  let wakeWriter = null;
  const wake = () => {
    for (const w of [wakeReader, wakeWriter]) if (w) w();
    wakeReader = null;
    wakeWriter = null;
  };
  const fail = (e) => {
    if (!error) error = fromGrpcError(e);
    call.cancel();
    wake();
  };

  call.on('data', (r) => {
    if (error) return;
    try {
      if (pending.length === 0) throw new InternalError(`server sent an answer to none of the ${sent} requests`);
      const result = pending[0].add(r);
      if (result !== undefined) {
        pending.shift();
        ready.push(result);
      }
    } catch (e) {
      return fail(e);
    }
    wake();
  });
  call.on('error', fail);
  call.on('status', (s) => {
    if (s.code !== 0) return fail(s);
    statusOk = true;
    wake();
  });
  call.on('end', () => {
    readEnded = true;
    wake();
  });

  (async () => {
    try {
      for await (const item of items) {
        while (!error && !stopped && sent - taken >= maxInflight) await new Promise((r) => { wakeWriter = r; });
        if (error || stopped) return;
        pending.push(item);
        ++sent;
        if (!call.write(item.request)) {
          await new Promise((r) => {
            call.once('drain', r);
            wakeWriter = r;  // an error or the consumer leaving ends the wait too
          });
        }
        if (error || stopped) return;
      }
      call.end();
    } catch (e) {
      // The source failed: the batches already sent are still answered and
      // yielded, then its error is thrown.
      sourceError = e;
      if (!error) call.end();
    } finally {
      writerDone = true;
      wake();
    }
  })();

  let finished = false;
  try {
    for (;;) {
      if (ready.length) {
        const result = ready.shift();
        ++taken;
        wake();
        yield result;
        continue;
      }
      if (error) throw error;
      if (statusOk && readEnded && writerDone) {
        if (pending.length) throw new InternalError(`stream ended with ${pending.length} of ${sent} requests unanswered`);
        finished = true;
        if (sourceError) throw sourceError;
        return;
      }
      await new Promise((r) => { wakeReader = r; });
    }
  } finally {
    if (!finished) {
      stopped = true;
      call.cancel();
      wake();
    }
  }
}

module.exports = {duplex};
