'use strict';
// Payload columns through @gpujoin/client: every column type with nulls built
// from typed arrays and plain arrays, gathered by lookups (the key's duplicate
// winner; null where missing or stored null) and by joins on a keep_all index
// (each pair's own row), compared with a model row by row.
const assert = require('node:assert/strict');
const {test, useServer, rng, CLIENT} = require('./server');
const gj = require(CLIENT);

const {NO_MATCH} = gj;
let client;

useServer(test, async (_server, c) => {
  client = c;
});

// Rows of a model table: key, and one value per column (null = null).
function table(n, seed) {
  const next = rng(seed);
  const rows = [];
  for (let i = 0; i < n; ++i) {
    const nul = () => next() % 5 === 0;
    rows.push({
      key: next() % Math.max(1, Math.floor(n * 0.7)),
      u32: nul() ? null : next(),
      i32: nul() ? null : (next() | 0),
      u64: nul() ? null : (BigInt(next()) << 32n) | BigInt(next()),
      i64: nul() ? null : BigInt.asIntN(64, (BigInt(next()) << 32n) | BigInt(next())),
      f32: nul() ? null : Math.fround((next() % 10000) / 7),
      f64: nul() ? null : next() / 3,
      flag: nul() ? null : next() % 2 === 0,
      label: nul() ? null : ['', 'tea', 'jam', 'Grüße', '日本', 'x'.repeat(next() % 40)][next() % 6],
      blob: nul() ? null : Uint8Array.from({length: next() % 5}, () => next() & 255),
    });
  }
  return rows;
}

const COLUMNS = ['u32', 'i32', 'u64', 'i64', 'f32', 'f64', 'flag', 'label', 'blob'];
const TYPES = {u32: 'uint32', i32: 'int32', u64: 'uint64', i64: 'int64', f32: 'float32', f64: 'float64',
               flag: 'bool', label: 'string', blob: 'binary'};

function payloadOf(rows) {
  return Object.fromEntries(COLUMNS.map((c) => [c, {type: TYPES[c], values: rows.map((r) => r[c])}]));
}

function same(actual, expected, what) {
  if (expected instanceof Uint8Array) assert.deepEqual(Array.from(actual), Array.from(expected), what);
  else assert.equal(actual, expected, what);
}

test('lookup gathers every column type with nulls, in batches and whole', async () => {
  const rows = table(3000, 7);
  const info = await client.buildIndex('dim', Uint32Array.from(rows, (r) => r.key),
                                       {payload: payloadOf(rows), chunkRows: 700});
  assert.deepEqual(info.payload.map((p) => [p.name, p.type]), COLUMNS.map((c) => [c, TYPES[c]]));
  const winner = new Map();
  rows.forEach((r) => { if (!winner.has(r.key)) winner.set(r.key, r); });
  for (const c of COLUMNS) {
    const nulls = [...winner.values()].filter((r) => r[c] === null).length;
    assert.equal(info.payload.find((p) => p.name === c).nullCount, nulls, c);
  }
  // Every string and binary column has a resident dictionary of its distinct
  // values (the build's rows, losers included); the others have none.
  for (const p of info.payload) {
    const distinct = new Set(rows.filter((r) => r[p.name] !== null)
      .map((r) => (r[p.name] instanceof Uint8Array ? Array.from(r[p.name]).join(',') : String(r[p.name]))));
    const dictionary = p.type === 'string' || p.type === 'binary';
    assert.equal(p.dictionaryValues, dictionary ? distinct.size : 0, p.name);
    assert.equal(p.dictionaryBytes > 0, dictionary, p.name);
  }
  const next = rng(9);
  const keys = Uint32Array.from({length: 4000}, () => next() % 2500);
  for (const batchRows of [undefined, 333]) {
    const r = await client.lookup('dim', keys, {select: COLUMNS, batchRows});
    assert.deepEqual(Object.keys(r.columns), COLUMNS);
    for (const c of COLUMNS) {
      const col = r.columns[c];
      assert.equal(col.type, TYPES[c]);
      assert.equal(col.length, keys.length);
      for (let i = 0; i < keys.length; ++i) {
        const w = winner.get(keys[i]);
        const want = w ? w[c] : null;
        assert.equal(col.isNull(i), want === null, `${c} row ${i}`);
        if (want !== null) same(col.get(i), want, `${c} row ${i}`);
      }
      // The whole column in one go, as JS values.
      assert.equal(col.toArray().length, keys.length);
    }
    // Typed values come out as typed arrays.
    assert.ok(r.columns.u64.values instanceof BigUint64Array);
    assert.ok(r.columns.f32.values instanceof Float32Array);
    assert.ok(r.columns.label.offsets instanceof Int32Array);
    assert.equal(r.columns.label.nullCount, keys.reduce((s, k) => s + ((winner.get(k) || {label: null}).label === null ? 1 : 0), 0));
  }
  await client.drop('dim');
});

test('a keep_all join gathers each pair its own row, every kind', async () => {
  const rows = table(1500, 11);
  await client.buildIndex('facts', Uint32Array.from(rows, (r) => r.key),
                          {payload: payloadOf(rows), duplicates: 'keep_all'});
  const groups = new Map();
  rows.forEach((r, i) => {
    if (!groups.has(r.key)) groups.set(r.key, []);
    groups.get(r.key).push(i);
  });
  const next = rng(12);
  const left = Uint32Array.from({length: 1200}, () => next() % 1400);
  for (const kind of ['inner', 'left', 'semi', 'anti']) {
    const j = await client.join('facts', left, {kind, select: ['label', 'i64', 'flag'], batchRows: 250});
    const want = [];
    left.forEach((k, l) => {
      const g = groups.get(k) || [];
      if (kind === 'inner' || kind === 'left') g.forEach((row) => want.push([l, row]));
      if ((kind === 'left' || kind === 'anti') && g.length === 0) want.push([l, null]);
      if (kind === 'semi' && g.length) want.push([l, g[0]]);
    });
    assert.equal(j.leftRows.length, want.length, kind);
    want.forEach(([l, row], p) => {
      assert.equal(j.leftRows[p], l);
      assert.equal(j.rightRows[p], row === null ? NO_MATCH : row);
      for (const c of ['label', 'i64', 'flag']) {
        const v = row === null ? null : rows[row][c];
        assert.equal(j.columns[c].get(p), v, `${kind} pair ${p} ${c}`);
      }
    });
  }
  await client.drop('facts');
});

test('payload given as typed arrays with a valid mask, and as an array of specs', async () => {
  const keys = new Uint32Array([7, 8, 9]);
  await client.buildIndex('products', keys, {payload: [
    {name: 'price', type: 'float64', values: new Float64Array([2.5, 0, 4]), valid: [true, false, true]},
    {name: 'label', values: ['tea', '', 'jam']},
    {name: 'stock', values: new Int32Array([-1, 5, 0])},
  ]});
  const info = await client.describe('products');
  assert.deepEqual(info.payload.map((p) => [p.name, p.type, p.nullCount]),
                   [['price', 'float64', 1], ['label', 'string', 0], ['stock', 'int32', 0]]);
  const r = await client.lookup('products', [9, 5, 8], {select: ['label', 'price', 'stock']});
  assert.deepEqual(r.columns.label.toArray(), ['jam', null, '']);
  assert.deepEqual(r.columns.price.toArray(), [4, null, null]);
  assert.deepEqual(r.columns.stock.toArray(), [0, null, 5]);
  assert.equal(r.columns.price.nullCount, 2);
  // An empty lookup still returns typed, empty columns.
  const empty = await client.lookup('products', [], {select: ['label', 'stock']});
  assert.equal(empty.values.length, 0);
  assert.equal(empty.columns.stock.type, 'int32');
  assert.equal(empty.columns.label.length, 0);
  // Selecting a column the index lacks is the server's in-band INVALID_ARGUMENT.
  await assert.rejects(client.lookup('products', [9], {select: ['zz']}), (e) => {
    assert.ok(e instanceof gj.InvalidArgumentError && !(e instanceof gj.DtypeError));
    assert.equal(e.batchId, 0);
    assert.match(e.message, /select\[0\]: index "products" has no payload column "zz"/);
    return true;
  });
  await client.drop('products');
});
