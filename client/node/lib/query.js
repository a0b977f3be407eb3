'use strict';
// Client#query and Query#run: a plan over input rows run by the server in one
// Query stream. The input columns are prepared as payload columns (./columns)
// and cut into batches that fit a message, the plan sent with the first; the
// answers the server continued over several messages (`more`, `first_row`)
// are reassembled, and an aggregate plan's groups are read from the `final`
// message that answers the half-close. Installed on Client.prototype by ./client.
const {pipeline} = require('./stream');
const cols = require('./columns');
const plan = require('./plan');
const {InvalidArgumentError, InternalError, ResourceExhaustedError} = require('./errors');
const {checkBatch, statistics, mergeStatistics, messageRoom, batchBounds} = require('./messages');

/** The input of a query: prepared columns of one length, in order. */
function prepareInput(input) {
  let entries;
  if (Array.isArray(input)) {
    entries = input.map((c, i) => {
      if (!c || typeof c.name !== 'string') throw new InvalidArgumentError(`query columns[${i}]: {name, values, type?, valid?} is needed`);
      return [c.name, c];
    });
  } else if (input !== null && typeof input === 'object' && !ArrayBuffer.isView(input)) {
    entries = Object.entries(input);
  } else {
    throw new InvalidArgumentError(`query input: an object of columns by name or an array of {name, values} is needed, got ${cols.describeValue(input)}`);
  }
  if (!entries.length) throw new InvalidArgumentError('query input: no columns');
  const seen = new Set();
  const columns = entries.map(([name, spec]) => {
    if (name === '') throw new InvalidArgumentError('query input: a column name is empty');
    if (seen.has(name)) throw new InvalidArgumentError(`query input: column "${name}" is given twice`);
    seen.add(name);
    return cols.preparePayload(name, spec, 'query column');
  });
  const rows = columns[0].rows;
  for (const c of columns) {
    if (c.rows !== rows) throw new InvalidArgumentError(`query column "${c.name}": ${c.rows} rows, but "${columns[0].name}" has ${rows}`);
  }
  return {columns, rows};
}

function stepStatistics(s) {
  return {step: s.step, kind: s.kind, rowsIn: s.rows_in, rowsOut: s.rows_out, index: s.index || '',
          indexVersion: s.index_version || 0, mutationSequence: s.mutation_sequence || 0,
          statistics: statistics(s.statistics)};
}

/** Per plan step, summed over the batches and the final answer (see index.d.ts PlanStatistics). */
function stepTotals(batches, final) {
  const totals = new Map();
  // The steps the final answer reports (an aggregate and those after it)
  // take its rows, which count the whole stream; the others sum the batches'.
  const finalSteps = new Set(final.map((s) => s.step));
  for (const s of [...batches.flat(), ...final]) {
    if (!totals.has(s.step)) {
      totals.set(s.step, {step: s.step, kind: s.kind, rowsIn: 0, rowsOut: 0, index: s.index, indexVersion: 0,
                          mutationSequence: 0, statistics: statistics(null)});
    }
    const t = totals.get(s.step);
    if (finalSteps.has(s.step)) {
      t.rowsIn = s.rowsIn;
      t.rowsOut = s.rowsOut;
    } else {
      t.rowsIn += s.rowsIn;
      t.rowsOut += s.rowsOut;
    }
    mergeStatistics(t.statistics, s.statistics);
    if (s.index) {
      t.indexVersion = s.indexVersion;
      t.mutationSequence = s.mutationSequence;
    }
  }
  return [...totals.keys()].sort((a, b) => a - b).map((k) => totals.get(k));
}

/**
 * A plan over input rows. Made by Client#query; every step method returns a new
 * Query with the step appended (the original is unchanged), so a prefix can be
 * run with different tails.
 */
class Query {
  constructor(client, input, steps = []) {
    this._client = client;
    this._input = input;
    this._steps = steps;
  }

  _with(step) {
    if (this._steps.length >= plan.MAX_STEPS) throw new InvalidArgumentError(`a plan has at most ${plan.MAX_STEPS} steps`);
    return new Query(this._client, this._input, [...this._steps, step]);
  }

  /** Looks opts.key up in `index`; see index.d.ts QueryLookupOptions. */
  lookup(index, opts = {}) {
    return this._with(plan.lookupStep(index, opts));
  }

  /** Keeps the rows for which `where` is true (SQL: false and null drop the row). */
  filter(where) {
    return this._with(plan.filterStep(where));
  }

  /** Groups the stream's rows by opts.by and computes opts.measures (default count()). */
  aggregate(opts = {}) {
    return this._with(plan.aggregateStep(opts));
  }

  /** Keeps these columns in order: names, [column, name] pairs or objects {column: name}. */
  project(...columns) {
    return this._with(plan.projectStep(columns));
  }

  /** Keeps the first `rows` rows (over the whole stream). */
  limit(rows) {
    return this._with(plan.limitStep(rows));
  }

  /** The plan as the proto's Plan object. */
  get plan() {
    return {steps: this._steps.map((s) => ({...s}))};
  }

  /** Runs the plan; resolves to {columns, names, rows, statistics}. See index.d.ts QueryResult. */
  run(opts = {}) {
    if (!this._steps.length) {
      return Promise.reject(new InvalidArgumentError('a plan needs at least one step (lookup, filter, aggregate, project or limit)'));
    }
    return this._client._runQuery(this.plan, this._input, opts);
  }
}

const queryMethods = {
  /**
   * A Query over `input`: an object of columns by name (typed arrays, arrays
   * with null for nulls, or {type, values, valid}; types as payload columns
   * take them) or an array of {name, ...column}. The columns are checked here.
   */
  query(input) {
    return new Query(this, prepareInput(input));
  },

  async _runQuery(thePlan, input, opts) {
    await this._connect();
    const {columns, rows} = input;
    // JSON is longer than the plan's protobuf form: an upper bound of its bytes.
    const planBytes = JSON.stringify(thePlan).length;
    const limit = messageRoom(this.limits.maxMessageBytes) - planBytes;
    if (limit <= 0) throw new InvalidArgumentError(`the plan takes about ${planBytes} bytes; the server's messages hold ${this.limits.maxMessageBytes}`);
    // Request bytes of rows [pos, pos + n): each column's message, about.
    const size = (pos) => (n) => columns.reduce((s, c) => s + cols.payloadBytes(c, pos, n), 0);
    // A batch's result (its rows, and the payload lookups add) must stay within
    // the server's --max-result-bytes: guess twice the input's row.
    const inputRow = rows ? size(0)(rows) / rows : 1;
    let batchRows = this._batchRows(opts, 2 * inputRow + 16);
    if (opts.batchRows === undefined && this.limits.maxResultBytes) {
      batchRows = Math.max(1, Math.min(batchRows, Math.floor(this.limits.maxResultBytes / 2 / (2 * inputRow + 16))));
    }
    for (;;) {
      const bounds = batchBounds(rows, batchRows, size, limit,
                                 (pos) => `query input: row ${pos} takes ${size(pos)(1)} bytes, more than a request holds (${limit})`);
      try {
        return await this._queryStream(thePlan, columns, bounds, opts);
      } catch (e) {
        // A batch the server refused for --max-result-bytes (a keep_all lookup
        // expanded it): without opts.batchRows the whole query runs again in
        // batches of half its rows (a limit or an aggregate spans the stream, so
        // the batches after it cannot simply go on).
        const cut = e instanceof ResourceExhaustedError && e.batchId !== undefined && e.batchId < bounds.length &&
          e.message.includes('--max-result-bytes');
        if (!cut || opts.batchRows !== undefined || bounds[e.batchId][1] <= 1) throw e;
        batchRows = Math.floor(bounds[e.batchId][1] / 2);
      }
    }
  },

  // One Query stream of the input's batches `bounds` ([start, rows] pairs), the plan on the first.
  async _queryStream(thePlan, columns, bounds, opts) {
    const batches = bounds.length;
    const hasAggregate = thePlan.steps.some((s) => s.aggregate);

    let names = null;
    let parts = null;
    let total = 0;
    let firstRow = 0;
    let steps = null;
    let finalDone = false;
    let messages = 0;
    const stats = {batches: [], final: []};
    let next = 0;
    const take = (r) => {
      if (r.columns.length === 0) {
        if (Number(r.rows) !== 0) throw new InternalError(`query answer ${r.batch_id} has ${r.rows} rows but no columns`);
        return;
      }
      const got = r.columns.map((c) => c.name);
      if (names === null) {
        names = got;
        parts = got.map(() => []);
      } else if (got.join('\u0000') !== names.join('\u0000')) {
        throw new InternalError(`query answer ${r.batch_id} has columns ${got.join(', ')}, earlier answers ${names.join(', ')}`);
      }
      r.columns.forEach((m, i) => {
        const c = cols.decodeColumn(m, `columns[${i}]`);
        if (c.length !== Number(r.rows)) throw new InternalError(`query answer ${r.batch_id}: column "${c.name}" has ${c.length} rows, the answer ${r.rows}`);
        parts[i].push(c);
      });
      total += Number(r.rows);
    };
    await pipeline(this._stream('Query', opts), {
      maxInflight: this._inflight(opts),
      trailing: true,
      progress: opts.onProgress && ((sent, answered) => opts.onProgress({batches, sent, answered})),
      next: () => {
        if (next >= batches) return null;
        const [pos, n] = bounds[next];
        const req = {batch_id: next, columns: columns.map((c) => cols.payloadMessage(c, pos, n))};
        if (next === 0) req.plan = thePlan;
        ++next;
        return req;
      },
      onResponse: (r, b) => {
        ++messages;
        const final = !!r.final || b >= batches;
        if (finalDone) throw new InternalError(`query answer ${r.batch_id} arrived after the final answer`);
        if (final && b < batches) throw new InternalError(`query: the final answer arrived after ${b} of ${batches} batches were answered`);
        checkBatch(r, final ? batches : b);
        if (Number(r.first_row) !== firstRow) {
          throw new InternalError(`query answer ${r.batch_id} continues at row ${r.first_row} after ${firstRow} rows`);
        }
        take(r);
        firstRow += Number(r.rows);
        // Continued answers carry the steps once; take the first part that has them.
        if (steps === null && r.steps.length) steps = r.steps.map(stepStatistics);
        if (r.more) return false;
        if (final) {
          stats.final = steps || [];
          finalDone = true;
        } else {
          stats.batches.push(steps || []);
        }
        firstRow = 0;
        steps = null;
        return true;
      },
    });
    if (hasAggregate && !finalDone) throw new InternalError('query stream of an aggregate plan ended without its final answer');
    const out = {};
    (names || []).forEach((name, i) => {
      out[name] = cols.concatColumns(parts[i]);
    });
    return {columns: out, names: names || [], rows: total, messages,
            statistics: {batches: stats.batches, final: stats.final, steps: stepTotals(stats.batches, stats.final)}};
  },
};

module.exports = {Query, queryMethods, prepareInput};
