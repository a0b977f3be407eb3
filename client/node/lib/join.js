'use strict';
// Client#join and Client#joinBatches: pipelined Join requests, their answers
// reassembled from the messages the server continued them over (JoinAnswer).
// Installed on Client.prototype by ./client.
const {pipeline} = require('./stream');
const {duplex} = require('./batches');
const cols = require('./columns');
const {toKeys, setKeys} = require('./keys');
const {InvalidArgumentError, AbortedError, InternalError} = require('./errors');
const {MAX_CAPACITY, JOIN_KINDS, statistics, mergeStatistics, checkBatch, rebuilt} = require('./messages');

/** Reassembles the messages answering one Join request (JoinResponse.more). */
class JoinAnswer {
  constructor(batches) {
    this.batches = batches;
    this.results = [];
    this.indexVersion = null;
    this.mutationSequence = 0;
  }

  /** Adds one message; true when it was the last one (`more` unset). */
  add(r) {
    if (this.indexVersion !== null && r.index_version !== this.indexVersion) {
      throw new InternalError(`join answer parts ran on index versions ${this.indexVersion} and ${r.index_version}`);
    }
    this.indexVersion = r.index_version;
    this.mutationSequence = r.mutation_sequence || 0;
    for (const [i, part] of r.results.entries()) {
      const started = this.results.length;
      const continues = started > 0 && part.batch === started - 1;
      if (!continues) {
        if (part.batch !== started || part.first_pair !== 0) {
          throw new InternalError(`join answer holds batch ${part.batch} at pair ${part.first_pair} ` +
                                  `where batch ${started} at pair 0 was expected`);
        }
        if (started > 0) this._checkComplete(started - 1);
        this.results.push({
          left: [], right: [], pairs: 0, count: part.count, capacity: part.capacity,
          overflow: part.overflow, statistics: statistics(part.statistics),
          found: part.found.length ? cols.u8(part.found) : null,
          probes: part.probes.length ? cols.viewAs(Uint32Array, part.probes, 'probes') : null,
          columns: part.columns.map(() => []),
        });
      }
      const b = this.results[this.results.length - 1];
      if (part.first_pair !== b.pairs) {
        throw new InternalError(`join answer continues batch ${part.batch} at pair ${part.first_pair} after ${b.pairs} pairs`);
      }
      const left = cols.viewAs(Uint32Array, part.left_rows, 'left_rows');
      const right = cols.viewAs(Uint32Array, part.right_rows, 'right_rows');
      if (left.length !== right.length) {
        throw new InternalError(`server sent ${left.length} left rows but ${right.length} right rows`);
      }
      if (part.columns.length !== b.columns.length) {
        throw new InternalError(`join answer part of batch ${part.batch} carries ${part.columns.length} columns, its first part ${b.columns.length}`);
      }
      for (const [c, m] of part.columns.entries()) {
        const col = cols.decodeColumn(m, `results[${i}].columns[${c}]`);
        if (col.length !== left.length) {
          throw new InternalError(`server sent column "${col.name}" of ${col.length} rows for ${left.length} pairs`);
        }
        b.columns[c].push(col);
      }
      b.left.push(left);
      b.right.push(right);
      b.pairs += left.length;
    }
    if (r.more) return false;
    if (this.results.length !== this.batches) {
      throw new InternalError(`join answer holds ${this.results.length} batches of ${this.batches}`);
    }
    this._checkComplete(this.results.length - 1);
    return true;
  }

  _checkComplete(batch) {
    const b = this.results[batch];
    const want = Math.min(b.count, b.capacity);
    if (b.pairs !== want) {
      throw new InternalError(`join answer holds ${b.pairs} pairs of batch ${batch}, not min(count ${b.count}, capacity ${b.capacity}) = ${want}`);
    }
  }
}

const joinMethods = {
  /**
   * Joins `keys` (left rows numbered from opts.firstLeftRow, default 0) against
   * `index` in pipelined batches, reassembling answers the server continued
   * over several messages, and returns the pairs of all batches in left order.
   * Inner and left joins on a keep_all index without a capacity run a
   * count-only pass first and then ask each batch for exactly its count. See
   * index.d.ts JoinOptions/JoinResult.
   */
  async join(index, keys, opts = {}) {
    await this._connect();
    const kindName = opts.kind === undefined ? 'inner' : opts.kind;
    const kind = JOIN_KINDS[kindName];
    if (!kind) throw new InvalidArgumentError(`kind: "${kindName}" (expected inner, left, semi or anti)`);
    const info = await this.describe(index, opts);
    const k = toKeys(keys, info, 'keys');
    const rows = k.rows;
    const firstLeftRow = opts.firstLeftRow || 0;
    if (!Number.isInteger(firstLeftRow) || firstLeftRow < 0 || firstLeftRow + rows > 2 ** 32) {
      throw new InvalidArgumentError(`left rows ${firstLeftRow} .. ${firstLeftRow} + ${rows} do not fit in uint32`);
    }
    const select = opts.select || [];
    const capacity = opts.capacity || 0;
    const countOnly = !!opts.countOnly;
    const sized = capacity === 0 && !countOnly && info.duplicates === 'keep_all' &&
                  (kind === 'JOIN_KIND_INNER' || kind === 'JOIN_KIND_LEFT_OUTER');
    // The request carries the keys; found and probes must fit in the answer's first message.
    const bounds = this._keyBatches(opts, k, (opts.found ? 1 : 0) + (opts.probes ? 4 : 0));
    const batches = rows === 0 ? (select.length ? 1 : 0) : bounds.length;

    let messages = 0;
    let version = null;
    const pass = async (configure, take) => {
      let next = 0;
      let answer = new JoinAnswer(1);
      await pipeline(this._stream('Join', opts), {
        maxInflight: this._inflight(opts),
        progress: opts.onProgress && ((sent, answered) => opts.onProgress({batches, sent, answered})),
        next: () => {
          if (next >= batches) return null;
          const [pos, n] = bounds[next];
          const left = {first_left_row: firstLeftRow + pos, want_found: !!opts.found, want_probes: !!opts.probes};
          setKeys(left, k, pos, n);
          configure(next, left);
          const req = {index, batch_id: next, batches: [left], select, kind, max_probe_count: opts.maxProbeCount || 0};
          ++next;
          return req;
        },
        onResponse: (r, b) => {
          checkBatch(r, b);
          ++messages;
          // Every batch of both passes must run on one version of the index.
          if (version !== null && r.index_version !== version) throw rebuilt(index, 'join', version, r.index_version);
          version = r.index_version;
          if (!answer.add(r)) return false;
          take(b, answer.results[0], answer.indexVersion, answer.mutationSequence);
          answer = new JoinAnswer(1);
          return true;
        },
      });
    };

    const counts = [];
    if (sized) {
      await pass((b, left) => { left.count_only = true; }, (b, res) => { counts[b] = res.count; });
    }
    const out = {left: [], right: [], count: 0, capacity: 0, overflow: false, statistics: statistics(null),
                 found: [], probes: [], columns: select.map(() => []), indexVersion: 0,
                 mutationSequence: 0};
    await pass((b, left) => {
      if (countOnly) left.count_only = true;
      // Capacity 0 would mean "the batch's rows": a batch counted empty asks for one pair.
      else if (sized) left.capacity = Math.max(1, Math.min(counts[b], MAX_CAPACITY));
      else left.capacity = capacity;
    }, (b, res, version, sequence) => {
      if (sized && res.count > counts[b]) {
        throw new AbortedError(`join of index "${index}": batch ${b} yields ${res.count} pairs, its count pass ` +
                               `${counts[b]}: the index changed (a rebuild or a mutation) between the passes; ` +
                               'run the join again');
      }
      out.left.push(...res.left);
      out.right.push(...res.right);
      out.count += res.count;
      out.capacity += res.capacity;
      out.overflow = out.overflow || res.overflow;
      mergeStatistics(out.statistics, res.statistics);
      if (res.found) out.found.push(res.found);
      if (res.probes) out.probes.push(res.probes);
      res.columns.forEach((parts, i) => out.columns[i].push(...parts));
      out.indexVersion = version;
      out.mutationSequence = sequence;
    });
    const result = {
      leftRows: out.left.length ? cols.concatTyped(Uint32Array, out.left) : new Uint32Array(0),
      rightRows: out.right.length ? cols.concatTyped(Uint32Array, out.right) : new Uint32Array(0),
      count: out.count, capacity: out.capacity, overflow: out.overflow, statistics: out.statistics,
      indexVersion: out.indexVersion, mutationSequence: out.mutationSequence, messages,
      columns: Object.fromEntries(select.map((name, i) => [name, cols.concatColumns(out.columns[i])])),
    };
    if (opts.found) result.found = out.found.length ? cols.concatTyped(Uint8Array, out.found) : new Uint8Array(0);
    if (opts.probes) result.probes = out.probes.length ? cols.concatTyped(Uint32Array, out.probes) : new Uint32Array(0);
    return result;
  },

  /**
   * Streams batches of left keys from `batches` (an iterable or async iterable)
   * through one Join stream and yields one result per batch, in order, with
   * answers the server continued over several messages reassembled: {batch,
   * firstLeftRow, leftRows, rightRows, count, capacity, overflow, statistics,
   * found?, probes?, columns, indexVersion, mutationSequence, messages}. Left rows are numbered
   * on across batches from opts.firstLeftRow. Each batch asks for opts.capacity
   * pairs (0: its rows); an inner or left join on a keep_all index may yield
   * more, reported as `overflow` with the exact `count` (join() sizes them by a
   * count-only pass instead). Memory and cancellation as lookupBatches.
   */
  async *joinBatches(index, batches, opts = {}) {
    await this._connect();
    const kindName = opts.kind === undefined ? 'inner' : opts.kind;
    const kind = JOIN_KINDS[kindName];
    if (!kind) throw new InvalidArgumentError(`kind: "${kindName}" (expected inner, left, semi or anti)`);
    const info = await this._keyInfo(index, opts);
    const select = opts.select || [];
    let leftRow = opts.firstLeftRow || 0;
    async function* items() {
      let b = 0;
      for await (const keys of batches) {
        const k = toKeys(keys, info, `batches[${b}]`);
        const n = k.rows;
        if (leftRow + n > 2 ** 32) throw new InvalidArgumentError(`batch ${b}: left rows ${leftRow} + ${n} do not fit in uint32`);
        const left = {first_left_row: leftRow, capacity: opts.capacity || 0, count_only: !!opts.countOnly,
                      want_found: !!opts.found, want_probes: !!opts.probes};
        setKeys(left, k, 0, n);
        const request = {index, batch_id: b, batches: [left], select, kind, max_probe_count: opts.maxProbeCount || 0};
        const batch = b++;
        const firstLeftRow = leftRow;
        leftRow += n;
        const answer = new JoinAnswer(1);
        let messages = 0;
        yield {request, add: (r) => {
          checkBatch(r, batch);
          ++messages;
          if (!answer.add(r)) return undefined;
          const res = answer.results[0];
          const result = {
            batch, firstLeftRow, leftRows: cols.concatTyped(Uint32Array, res.left),
            rightRows: cols.concatTyped(Uint32Array, res.right), count: res.count, capacity: res.capacity,
            overflow: res.overflow, statistics: res.statistics, indexVersion: answer.indexVersion,
            mutationSequence: answer.mutationSequence, messages,
            columns: Object.fromEntries(select.map((name, i) => [name, cols.concatColumns(res.columns[i])])),
          };
          if (opts.found) result.found = res.found || new Uint8Array(0);
          if (opts.probes) result.probes = res.probes || new Uint32Array(0);
          return result;
        }};
      }
    }
    yield* duplex(this._stream('Join', opts), items(), this._inflight(opts));
  },
};

module.exports = {JoinAnswer, joinMethods};
