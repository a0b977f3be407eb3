'use strict';
// Client#lookup and Client#lookupBatches: pipelined Lookup batches. Installed on
// Client.prototype by ./client.
const {pipeline} = require('./stream');
const {duplex} = require('./batches');
const cols = require('./columns');
const {toKeys, setKeys} = require('./keys');
const {statistics, mergeStatistics, rebuilt, decodeLookup} = require('./messages');

const lookupMethods = {
  /**
   * Looks up every key of `keys` against `index` in pipelined batches and
   * returns the aligned result. See index.d.ts LookupOptions/LookupResult.
   */
  async lookup(index, keys, opts = {}) {
    await this._connect();
    const info = await this._keyInfo(index, opts);
    const k = toKeys(keys, info, 'keys');
    const rows = k.rows;
    const select = opts.select || [];
    const selectBytes = select.reduce((s, c) => s + this._columnRowBytes(info, c), 0);
    const answerBytes = 5 + (opts.probes ? 4 : 0) + (opts.matchCounts ? 4 : 0) + selectBytes;
    const bounds = this._keyBatches(opts, k, answerBytes);
    const batches = bounds.length;
    const one = batches === 1;

    // With one batch the answer's arrays are the result (views); with several
    // they are copied into place as they arrive, so the messages can be freed.
    let values = one ? null : new Uint32Array(rows);
    let found = one ? null : new Uint8Array(rows);
    let probes = opts.probes && !one ? new Uint32Array(rows) : null;
    let matchCounts = opts.matchCounts && !one ? new Uint32Array(rows) : null;
    const columnParts = select.map(() => []);
    const stats = statistics(null);
    let indexVersion = 0;
    let mutationSequence = 0;
    let next = 0;
    const call = this._stream('Lookup', opts);
    await pipeline(call, {
      maxInflight: this._inflight(opts),
      progress: opts.onProgress && ((sent, answered) => opts.onProgress({batches, sent, answered})),
      next: () => {
        if (next >= batches) return null;
        const [pos, n] = bounds[next];
        const req = {index, batch_id: next, want_probes: !!opts.probes, want_match_counts: !!opts.matchCounts,
                     max_probe_count: opts.maxProbeCount || 0, select};
        setKeys(req, k, pos, n);
        ++next;
        return req;
      },
      onResponse: (r, b) => {
        const [pos, n] = bounds[b];
        const d = decodeLookup(r, b, n, select, opts);
        if (one) {
          ({values, found, probes, matchCounts} = d);
        } else {
          values.set(d.values, pos);
          found.set(d.found, pos);
          if (d.probes) probes.set(d.probes, pos);
          if (d.matchCounts) matchCounts.set(d.matchCounts, pos);
        }
        d.columns.forEach((c, i) => columnParts[i].push(c));
        mergeStatistics(stats, d.statistics);
        if (b > 0 && d.indexVersion !== indexVersion) throw rebuilt(index, 'lookup', indexVersion, d.indexVersion);
        indexVersion = d.indexVersion;
        mutationSequence = d.mutationSequence;
        return true;
      },
    });
    const result = {values, found, statistics: stats, indexVersion, mutationSequence,
                    columns: Object.fromEntries(columnParts.map((parts, i) => [select[i], cols.concatColumns(parts)]))};
    if (opts.probes) result.probes = probes;
    if (opts.matchCounts) result.matchCounts = matchCounts;
    return result;
  },

  /**
   * Streams batches of keys from `batches` (an iterable or async iterable of
   * Keys, e.g. a generator parsing a file) through one Lookup stream and yields
   * one result per batch, in order: {batch, values, found, probes?,
   * matchCounts?, columns, statistics, indexVersion, mutationSequence}. At most opts.maxInflight
   * batches are pulled and not yet taken by the loop, so memory stays bounded
   * by that many batches whatever the input's length. Each batch must fit one
   * message (split larger ones). Leaving the loop early cancels the stream.
   */
  async *lookupBatches(index, batches, opts = {}) {
    await this._connect();
    const info = await this._keyInfo(index, opts);
    const select = opts.select || [];
    async function* items() {
      let b = 0;
      for await (const keys of batches) {
        const k = toKeys(keys, info, `batches[${b}]`);
        const n = k.rows;
        const request = {index, batch_id: b, want_probes: !!opts.probes, want_match_counts: !!opts.matchCounts,
                         max_probe_count: opts.maxProbeCount || 0, select};
        setKeys(request, k, 0, n);
        const batch = b++;
        yield {request, add: (r) => {
          const d = decodeLookup(r, batch, n, select, opts);
          const result = {batch, values: d.values, found: d.found, statistics: d.statistics, indexVersion: d.indexVersion,
                          mutationSequence: d.mutationSequence,
                          columns: Object.fromEntries(d.columns.map((c, i) => [select[i], c]))};
          if (opts.probes) result.probes = d.probes;
          if (opts.matchCounts) result.matchCounts = d.matchCounts;
          return result;
        }};
      }
    }
    yield* duplex(this._stream('Lookup', opts), items(), this._inflight(opts));
  },
};

module.exports = {lookupMethods};
