'use strict';
// The steps of a Query plan (docs/api.md "Query: plans in one round trip") as
// the proto's PlanStep objects: lookups, filters, an aggregation, projection and
// a limit, checked here as far as they can be without the server (names,
// kinds, measure syntax); the server checks the whole plan against the first
// batch and the live indexes.
const {InvalidArgumentError} = require('./errors');
const {JOIN_KINDS, AGGREGATE_OPS} = require('./messages');

/** The most steps a plan may have (the server's limit). */
const MAX_STEPS = 64;

const MEASURE = /^\s*([A-Za-z_]+)\s*\(\s*(.*?)\s*\)\s*(?:[Aa][Ss]\s+(.+?))?\s*$/s;
const OP_NAME = /^\s*[A-Za-z_]+\s*$/;

function unquote(name) {
  if (name.length >= 2 && name[0] === '"' && name[name.length - 1] === '"') return name.slice(1, -1).replace(/""/g, '"');
  return name;
}

function show(x) {
  try {
    return JSON.stringify(x);
  } catch (e) {
    return String(x);
  }
}

/**
 * The Measure of one spec: text ('count()', 'count(col)', 'sum(bytes) as
 * total'), an array [op, column?, name?] or an object {op, column?, name?};
 * `name` (a key of an object of measures) names its output column.
 */
function measure(spec, name, what = 'measure') {
  let op;
  let column;
  let alias;
  if (typeof spec === 'string' && spec.trim().toLowerCase() === 'count') spec = 'count()';
  if (typeof spec === 'string') {
    const m = MEASURE.exec(spec);
    if (!m) throw new InvalidArgumentError(`${what}: ${show(spec)} is not 'op(column)', 'op()' or 'op(column) as name'`);
    op = m[1];
    column = m[2] === '' || m[2] === '*' ? '' : unquote(m[2]);
    alias = m[3] ? unquote(m[3]) : '';
  } else if (Array.isArray(spec) && spec.length >= 1 && spec.length <= 3) {
    [op, column = '', alias = ''] = spec;
  } else if (spec !== null && typeof spec === 'object') {
    const unknown = Object.keys(spec).filter((k) => !['op', 'column', 'name'].includes(k));
    if (unknown.length || spec.op === undefined) {
      throw new InvalidArgumentError(`${what}: an object measure has op and optional column and name, got keys ${Object.keys(spec).join(', ')}`);
    }
    ({op, column = '', name: alias = ''} = spec);
  } else {
    throw new InvalidArgumentError(`${what}: ${show(spec)} is not a measure (text such as 'sum(bytes)', [op, column, name] or {op, column, name})`);
  }
  column = column || '';
  alias = alias || '';
  if (typeof op !== 'string' || typeof column !== 'string' || typeof alias !== 'string') {
    throw new InvalidArgumentError(`${what}: op, column and name must be strings, got ${show([op, column, alias])}`);
  }
  const wire = AGGREGATE_OPS[op.trim().toLowerCase()];
  if (!wire) throw new InvalidArgumentError(`${what}: op "${op}" (expected count, sum, min, max or mean)`);
  if (name !== undefined) {
    if (alias && alias !== name) throw new InvalidArgumentError(`${what}: named "${name}" and "${alias}"`);
    alias = name;
  }
  if (!column && wire !== AGGREGATE_OPS.count) throw new InvalidArgumentError(`${what}: ${op}() needs a column`);
  return {op: wire, column, name: alias};
}

/** The Measures of an array of specs, one spec, or an object output name -> spec. */
function measures(specs) {
  const one = typeof specs === 'string' || (Array.isArray(specs) && typeof specs[0] === 'string' && OP_NAME.test(specs[0])) ||
    (specs !== null && typeof specs === 'object' && !Array.isArray(specs) && 'op' in specs);
  if (one) specs = [specs];
  if (Array.isArray(specs)) return specs.map((s, i) => measure(s, undefined, `measures[${i}]`));
  if (specs !== null && typeof specs === 'object') return Object.entries(specs).map(([n, s]) => measure(s, n, `measures.${n}`));
  throw new InvalidArgumentError(`measures: expected an array, a measure or an object of measures, got ${show(specs)}`);
}

/** One name or an array of names, as an array of non-empty strings. */
function names(value, what) {
  if (value === undefined || value === null) return [];
  const items = typeof value === 'string' ? [value] : Array.from(value);
  items.forEach((v, i) => {
    if (typeof v !== 'string' || v === '') throw new InvalidArgumentError(`${what}[${i}]: a column name (non-empty string) is needed, got ${show(v)}`);
  });
  return items;
}

function lookupStep(index, opts = {}) {
  if (typeof index !== 'string' || index === '') throw new InvalidArgumentError(`lookup: index must be a non-empty string, got ${show(index)}`);
  const key = names(opts.key, 'lookup key');
  if (!key.length) throw new InvalidArgumentError('lookup: key names no column; give {key: column} or {key: [columns]}');
  const how = opts.how === undefined ? 'inner' : opts.how;
  const kind = JOIN_KINDS[how];
  if (!kind) throw new InvalidArgumentError(`lookup how: "${how}" (expected inner, left, semi or anti)`);
  return {lookup: {index, key, select: names(opts.select, 'lookup select'), prefix: opts.prefix || '', kind,
                   found_column: opts.foundColumn || ''}};
}

function filterStep(where) {
  if (typeof where !== 'string' || where.trim() === '') throw new InvalidArgumentError(`filter: where must be a non-empty expression, got ${show(where)}`);
  return {filter: {where}};
}

function aggregateStep(opts = {}) {
  const ms = measures(opts.measures === undefined ? ['count()'] : opts.measures);
  if (!ms.length) throw new InvalidArgumentError("aggregate: no measures; give at least one, e.g. 'count()'");
  return {aggregate: {group_by: names(opts.by, 'aggregate by'), measures: ms}};
}

function projectStep(columns) {
  // One array alone is the list of columns (a rename alone: [['b', 'bee']] or {b: 'bee'}).
  if (columns.length === 1 && Array.isArray(columns[0])) columns = columns[0];
  const out = [];
  columns.forEach((c, i) => {
    if (typeof c === 'string') out.push({column: c, name: ''});
    else if (Array.isArray(c) && c.length === 2) out.push({column: c[0], name: c[1] || ''});
    else if (c !== null && typeof c === 'object') for (const [k, v] of Object.entries(c)) out.push({column: k, name: v || ''});
    else throw new InvalidArgumentError(`project columns[${i}]: a name, a [column, name] pair or an object {column: name} is needed, got ${show(c)}`);
  });
  if (!out.length) throw new InvalidArgumentError('project: no columns; name the columns to keep');
  for (const p of out) {
    if (typeof p.column !== 'string' || p.column === '' || typeof p.name !== 'string') {
      throw new InvalidArgumentError(`project: ${show(p)} is not a column and a name`);
    }
  }
  return {project: {columns: out}};
}

function limitStep(rows) {
  if (!Number.isSafeInteger(rows) || rows < 0) throw new InvalidArgumentError(`limit: rows must be a non-negative integer, got ${show(rows)}`);
  return {limit: {rows}};
}

module.exports = {MAX_STEPS, measure, measures, lookupStep, filterStep, aggregateStep, projectStep, limitStep};
