'use strict';
// The gpujoin client: one channel to a gpujoind, async methods for every call.
//
// Sizing: the first call asks GetServerInfo for the server's message limit and
// per-stream window, then opens the channel that carries every call with a
// receive limit of the server's message size (gRPC's default is 4 MiB, which a
// 1M-row lookup answer exceeds) and sizes build chunks and batches to fit it.
// Large inputs are split into batches streamed with at most `maxInflight`
// unanswered (builds: unflushed) at a time.
//
// This module holds the connection and the unary calls; the data calls come
// from one module each (build, lookup, join, mutate, aggregate, hash, query),
// installed on the class below.
const fs = require('node:fs');
const grpc = require('@grpc/grpc-js');
const {load} = require('./proto');
const errors = require('./errors');
const cols = require('./columns');
const {fromGrpcError} = require('./errors');
const {DEFAULT_BATCH_ROWS, messageRoom, indexInfo, serverInfo, cancelOn, positiveInteger,
  batchBounds} = require('./messages');
const {checkSchema, keyBytes} = require('./keys');
const {buildMethods} = require('./build');
const {lookupMethods} = require('./lookup');
const {joinMethods} = require('./join');
const {aggregateMethods} = require('./aggregate');
const {hashMethods} = require('./hash');
const {mutateMethods} = require('./mutate');
const {queryMethods} = require('./query');

function readPem(value, file, what) {
  if (value !== undefined && value !== null) return Buffer.from(value);
  if (file === undefined || file === null) return null;
  try {
    return fs.readFileSync(file);
  } catch (e) {
    throw new errors.NotFoundError(`tls.${what}: cannot read ${file}: ${e.message}`);
  }
}

class Client {
  /**
   * `target`: host:port of a gpujoind (default 127.0.0.1:50051). Options:
   * tls (false, true = system roots, or {ca, cert, key, caFile, certFile,
   * keyFile, serverName}), token (bearer token sent on every call),
   * maxInflight (batches of a stream sent and not yet answered; default the
   * server's --max-inflight-per-stream), batchRows (rows per batch and build
   * chunk; default 262144, less where a message would not fit), deadlineMs
   * (default per-call deadline; 0 = none), maxMessageBytes (caps the server's
   * limit for what this client sends), channelOptions (passed to grpc-js).
   */
  constructor(target = '127.0.0.1:50051', options = {}) {
    this.target = target;
    this.options = {...options};
    if (options.maxInflight !== undefined) positiveInteger(options.maxInflight, 'maxInflight');
    if (options.batchRows !== undefined) positiveInteger(options.batchRows, 'batchRows');
    const tls = options.tls;
    if (tls) {
      const t = tls === true ? {} : tls;
      this._credentials = grpc.credentials.createSsl(readPem(t.ca, t.caFile, 'ca'), readPem(t.key, t.keyFile, 'key'),
                                                     readPem(t.cert, t.certFile, 'cert'));
    } else {
      this._credentials = grpc.credentials.createInsecure();
    }
    this._channelOptions = {...(options.channelOptions || {})};
    if (tls && tls.serverName) {
      this._channelOptions['grpc.ssl_target_name_override'] = tls.serverName;
      this._channelOptions['grpc.default_authority'] = tls.serverName;
    }
    this._stub = null;
    this._ready = null;
    this.limits = null;
  }

  /** Closes the channel; calls in flight fail with CancelledError or UnavailableError. */
  close() {
    if (this._stub) this._stub.close();
    this._stub = null;
    this._ready = null;
  }

  _metadata() {
    const m = new grpc.Metadata();
    if (this.options.token) m.set('authorization', `Bearer ${this.options.token}`);
    return m;
  }

  _callOptions(opts) {
    const ms = opts.deadlineMs !== undefined ? opts.deadlineMs : this.options.deadlineMs;
    return ms ? {deadline: Date.now() + ms} : {};
  }

  // Opens the data channel sized by GetServerInfo (once; retried after a failure).
  _connect() {
    if (!this._ready) {
      this._ready = (async () => {
        const {GpuJoin} = load();
        const boot = new GpuJoin(this.target, this._credentials, this._channelOptions);
        let info;
        try {
          info = await new Promise((resolve, reject) => {
            boot.GetServerInfo({}, this._metadata(), this._callOptions({}),
                               (e, r) => (e ? reject(fromGrpcError(e)) : resolve(r)));
          });
        } finally {
          boot.close();
        }
        const serverMax = Math.min(Number(info.max_message_bytes) || 256 * 2 ** 20, 2 ** 31 - 1);
        const send = Math.min(serverMax, this.options.maxMessageBytes || Infinity);
        this._stub = new GpuJoin(this.target, this._credentials, {
          ...this._channelOptions,
          'grpc.max_receive_message_length': serverMax,
          'grpc.max_send_message_length': send,
        });
        this.limits = {
          maxMessageBytes: send,
          receiveMessageBytes: serverMax,
          maxInflight: this.options.maxInflight || info.max_inflight_batches_per_stream || 8,
          maxMutationRows: Number(info.max_mutation_rows) || 0,
          maxResultBytes: Number(info.max_result_bytes) || 0,
        };
      })();
      this._ready.catch(() => {
        this._ready = null;
      });
    }
    return this._ready;
  }

  async _unary(method, request, opts = {}) {
    await this._connect();
    return new Promise((resolve, reject) => {
      const call = this._stub[method](request, this._metadata(), this._callOptions(opts),
                                      (e, r) => (e ? reject(fromGrpcError(e)) : resolve(r)));
      cancelOn(opts.signal, call);
    });
  }

  _stream(method, opts) {
    const call = this._stub[method](this._metadata(), this._callOptions(opts));
    cancelOn(opts.signal, call);
    return call;
  }

  _inflight(opts) {
    return opts.maxInflight !== undefined ? positiveInteger(opts.maxInflight, 'maxInflight') : this.limits.maxInflight;
  }

  // Rows per batch: the caller's choice, else the default, within what the
  // message limit leaves at `bytesPerRow` (request or answer, whichever is larger).
  _batchRows(opts, bytesPerRow) {
    const asked = opts.batchRows !== undefined ? positiveInteger(opts.batchRows, 'batchRows') : this.options.batchRows;
    if (asked) return asked;
    const room = messageRoom(Math.min(this.limits.maxMessageBytes, this.limits.receiveMessageBytes));
    return Math.max(1, Math.min(DEFAULT_BATCH_ROWS, Math.floor(room / bytesPerRow)));
  }

  // ------------------------------------------------------------ unary calls

  /** GetServerInfo: version, backend, device, memory and limits. */
  async serverInfo(opts = {}) {
    return serverInfo(await this._unary('GetServerInfo', {}, opts));
  }

  /** Every live index, ordered by name. */
  async list(opts = {}) {
    return (await this._unary('ListIndexes', {}, opts)).indexes.map(indexInfo);
  }

  /** One index's description; NotFoundError when it is not live. */
  async describe(name, opts = {}) {
    return indexInfo((await this._unary('DescribeIndex', {name}, opts)).index);
  }

  /** Drops an index: {droppedVersion, freedBytes}; NotFoundError when it is not live. */
  async drop(name, opts = {}) {
    const r = await this._unary('DropIndex', {name}, opts);
    return {droppedVersion: r.dropped_version, freedBytes: r.freed_bytes};
  }

  // ------------------------------------------------------------ snapshots

  /** Writes index `name` to `file` under the server's --data-dir ('' = "<name>.gjsnap"). */
  async saveIndex(name, file = '', opts = {}) {
    const r = await this._unary('SaveIndex', {name, file}, opts);
    return {file: r.file, bytes: r.bytes, version: r.version, seconds: r.seconds};
  }

  /** Loads `file` under the server's --data-dir ('' = "<name>.gjsnap") as index `name`. */
  async loadIndex(name, file = '', opts = {}) {
    return indexInfo((await this._unary('LoadIndex', {name, file, replace: !!opts.replace}, opts)).index);
  }

  /** The snapshots and copies under the server's --data-dir, by name. */
  async listFiles(opts = {}) {
    const r = await this._unary('ListFiles', {}, opts);
    return (r.files || []).map((f) => ({file: f.file, bytes: f.bytes,
                                        modifiedUnixMillis: f.modified_unix_millis,
                                        index: f.index, live: !!f.live}));
  }

  /** Deletes a copy (or the snapshot of an index that is not live); returns its bytes. */
  async deleteFile(file, opts = {}) {
    return (await this._unary('DeleteFile', {file}, opts)).bytes;
  }

  // ------------------------------------------------------------ shared by the data calls

  // The index's key (type and schema) for the dtype check: opts.keyType (an
  // integer type) or opts.keyColumns skips the DescribeIndex round trip.
  async _keyInfo(index, opts) {
    if (opts.keyColumns) return {keyType: 'columns', keyColumns: checkSchema(opts.keyColumns), payload: []};
    if (opts.keyType && opts.keyType !== 'columns') return {keyType: opts.keyType, payload: []};
    return this.describe(index, opts);
  }

  // The batches of a lookup or join of keys `k` ([start, rows] pairs): at most
  // the rows whose answer fits at `answerBytes` per row (_batchRows), and whose
  // keys fit the request (key columns of strings make batches differ).
  _keyBatches(opts, k, answerBytes) {
    const batchRows = this._batchRows(opts, Math.max(k.columns ? 1 : (k.wide ? 8 : 4), answerBytes));
    const limit = messageRoom(this.limits.maxMessageBytes);
    // messageRoom keeps the room of the request's other fields.
    return batchBounds(k.rows, batchRows, (pos) => (n) => keyBytes(k, pos, n), limit,
                       (pos) => `keys: row ${pos} needs ${keyBytes(k, pos, 1)} bytes, more than a request holds (${limit})`);
  }

  // About the bytes one row of a selected column takes in an answer.
  _columnRowBytes(info, name) {
    const p = (info.payload || []).find((c) => c.name === name);
    if (!p) return 8;
    const t = cols.TYPES[p.type];
    if (t && t.width) return t.width + 0.125;
    if (p.type === 'bool') return 0.25;
    return 4.125 + 32;  // offsets, validity and a guess at the value bytes
  }
}

// The data calls live in one module each; their methods join the class's own,
// non-enumerable as class methods are.
for (const methods of [buildMethods, lookupMethods, joinMethods, mutateMethods, aggregateMethods, hashMethods,
                       queryMethods]) {
  for (const [name, descriptor] of Object.entries(Object.getOwnPropertyDescriptors(methods))) {
    Object.defineProperty(Client.prototype, name, {...descriptor, enumerable: false});
  }
}

module.exports = {Client, NO_MATCH: cols.NO_MATCH, Column: cols.Column};
