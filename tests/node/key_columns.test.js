'use strict';
// String and composite keys (key schemas) through @gpujoin/client: builds,
// lookups and the four join kinds with string, binary and (string, int64) keys
// — the empty string, strings equal but for their last byte, non-ASCII UTF-8,
// embedded NULs, Buffers, swapped pairs, nulls in each key column — payload
// gathered by such keys, client-side and server errors, and a randomized
// comparison of lookups and joins with a JS Map model.
const assert = require('node:assert/strict');
const {test, useServer, startServer, rng, Client, CLIENT} = require('./server');
const gj = require(CLIENT);

const {NO_MATCH} = gj;
const ORDER_KEY = [{name: 'tenant', type: 'string'}, {name: 'order_id', type: 'int64'}];
let client;

useServer(test, async (_server, c) => {
  client = c;
});

/** Asserts `e` is a client-side DtypeError (an InvalidArgumentError) whose message matches `pattern`. */
function dtype(pattern) {
  return (e) => {
    assert.ok(e instanceof gj.DtypeError, `${e.name}: ${e.message}`);
    assert.match(e.message, pattern);
    return true;
  };
}

function invalid(pattern) {
  return (e) => {
    assert.ok(e instanceof gj.InvalidArgumentError && !(e instanceof gj.DtypeError), `${e.name}: ${e.message}`);
    assert.equal(e.code, 3);
    assert.match(e.message, pattern);
    return true;
  };
}

/** The pairs of a join as [left, right] arrays. */
function pairs(j) {
  return [Array.from(j.leftRows), Array.from(j.rightRows)];
}

test('string keys: empty, last byte apart, non-ASCII UTF-8, embedded NUL, case', async () => {
  const keys = ['', 'abc', 'abd', 'é', 'è', 'Grüße', '日本語', '😀', 'a\0b', 'a\0', 'a', 'A', 'x'.repeat(1000)];
  const info = await client.buildIndex('str', keys);
  assert.equal(info.keyType, 'columns');
  assert.deepEqual(info.keyColumns, [{name: 'key', type: 'string'}]);
  assert.equal(info.statistics.uniqueKeys, keys.length);
  assert.equal(info.statistics.duplicateRows, 0);
  assert.deepEqual((await client.describe('str')).keyColumns, info.keyColumns);

  const r = await client.lookup('str', keys, {probes: true});
  assert.deepEqual(Array.from(r.values), keys.map((_, i) => i));
  assert.deepEqual(Array.from(r.found), keys.map(() => 1));
  assert.equal(r.statistics.found, keys.length);

  // Near misses: one byte more, less or other, another normalisation of é.
  const misses = ['abe', 'ab', 'abcd', ' ', '\0', 'a\0c', 'b', 'e\u0301', 'Grüsse', '日本', 'x'.repeat(999)];
  const m = await client.lookup('str', misses, {probes: true});
  assert.deepEqual(Array.from(m.found), misses.map(() => 0));
  assert.deepEqual(Array.from(m.values), misses.map(() => NO_MATCH));
  assert.equal(m.statistics.missing, misses.length);

  // A string column also takes its UTF-8 bytes; a Uint8Array and a Buffer alike.
  const bytes = await client.lookup('str', [Buffer.from('Grüße'), new TextEncoder().encode('😀')]);
  assert.deepEqual(Array.from(bytes.values), [5, 7]);
  await client.drop('str');
});

test('binary keys: Buffers and Uint8Arrays, empty, 0xff and invalid UTF-8', async () => {
  const keys = [Buffer.alloc(0), Buffer.from([0]), Buffer.from([0, 0]), Buffer.from([0xff]), Buffer.from([0xc3]),
                new Uint8Array([0xc3, 0xa9]), Buffer.from('tea')];
  const info = await client.buildIndex('bin', keys, {payload: {row: Uint32Array.from(keys, (_, i) => i * 10)}});
  assert.deepEqual(info.keyColumns, [{name: 'key', type: 'binary'}]);
  assert.equal(info.statistics.uniqueKeys, keys.length);
  const probe = [new Uint8Array(0), Buffer.from([0xc3, 0xa9]), Buffer.from([0xfe]), new Uint8Array([0, 0]),
                 new Uint8Array(Buffer.from('tea')), Buffer.from([0xc3]), null];
  const r = await client.lookup('bin', probe, {select: ['row']});
  assert.deepEqual(Array.from(r.values), [0, 5, NO_MATCH, 2, 6, 4, NO_MATCH]);
  assert.deepEqual(r.columns.row.toArray(), [0, 50, null, 20, 60, 40, null]);
  // The key's text as a string is its UTF-8 bytes in a binary column.
  assert.deepEqual(Array.from((await client.lookup('bin', ['tea', 'é'])).values), [6, 5]);
  await client.drop('bin');
});

test('composite (string, int64) keys: swapped pairs, order of the object, int64 extremes', async () => {
  const min = -(2n ** 63n);
  const max = 2n ** 63n - 1n;
  const info = await client.buildIndex('orders', {
    tenant: ['acme', 'acme', 'globex', '', 'acme', '1'],
    order_id: BigInt64Array.from([1n, 2n, 1n, 0n, min, max]),
  }, {keyColumns: ORDER_KEY});
  assert.equal(info.keyType, 'columns');
  assert.deepEqual(info.keyColumns, ORDER_KEY);
  assert.equal(info.statistics.uniqueKeys, 6);

  // The object's entries in any order; plain arrays of bigints or safe numbers.
  const r = await client.lookup('orders', {
    order_id: [2n, 1n, 1, 2n, 0, max, min, -1n, 1n],
    tenant: ['acme', 'globex', 'acme', 'globex', '', '1', 'acme', 'acme', '1'],
  });
  assert.deepEqual(Array.from(r.values), [1, 2, 0, NO_MATCH, 3, 5, 4, NO_MATCH, NO_MATCH]);

  // The values of two rows' pairs swapped between them: ('', 0), ('1', max) -> ('', max), ('1', 0).
  const swapped = await client.lookup('orders', {tenant: ['', '1', '1', ''], order_id: [max, 0n, max, 0n]});
  assert.deepEqual(Array.from(swapped.values), [NO_MATCH, NO_MATCH, 5, 3]);
  // A pair's two values swapped between its columns: ('7', 8) -> ('8', 7).
  await client.buildIndex('pair', {tenant: ['7', '8'], order_id: [8n, 9n]}, {keyColumns: ORDER_KEY});
  const turned = await client.lookup('pair', {tenant: ['8', '7', '8'], order_id: [7n, 8n, 9n]});
  assert.deepEqual(Array.from(turned.values), [NO_MATCH, 0, 1]);
  await client.drop('pair');

  // The same rows declared with other names or another column order are another key.
  await assert.rejects(client.lookup('orders', {tenant: ['acme'], order: [1n]}), dtype(/"order" is not a key column; the key is \(tenant string, order_id int64\)/));
  await client.drop('orders');
});

test('composite keys with int32 and binary columns, and a typed array key of one column', async () => {
  const info = await client.buildIndex('mix', {
    region: Int32Array.from([-1, 7, 7, 0]),
    blob: [Buffer.from([1]), Buffer.from([1]), Buffer.from([]), Buffer.from([2, 3])],
    id: BigUint64Array.from([2n ** 64n - 1n, 0n, 5n, 9n]),
  });
  assert.deepEqual(info.keyColumns, [{name: 'region', type: 'int32'}, {name: 'blob', type: 'binary'},
                                     {name: 'id', type: 'uint64'}]);
  const r = await client.lookup('mix', {
    id: [0n, 2n ** 64n - 1n, 5n, 9n, 9n],
    region: [7, -1, 7, 0, 1],
    blob: [Buffer.from([1]), new Uint8Array([1]), new Uint8Array(0), Buffer.from([2, 3]), Buffer.from([2, 3])],
  });
  assert.deepEqual(Array.from(r.values), [1, 0, 2, 3, NO_MATCH]);

  // keyType 'columns' makes a Uint32Array one uint32 key column, not a uint32 index.
  const one = await client.buildIndex('one', new Uint32Array([5, 6]), {keyType: 'columns'});
  assert.deepEqual(one.keyColumns, [{name: 'key', type: 'uint32'}]);
  assert.deepEqual(Array.from((await client.lookup('one', [6, 7])).values), [1, NO_MATCH]);
  assert.deepEqual(Array.from((await client.lookup('one', {key: new Uint32Array([5])})).values), [0]);
  await client.drop('mix');
  await client.drop('one');
});

test('a null in any key column never matches: build, lookup and every join kind', async () => {
  const info = await client.buildIndex('nul', {
    tenant: ['a', null, 'b', 'c', 'a'],
    order_id: {values: BigInt64Array.from([1n, 1n, 2n, 3n, 1n]), valid: [1, 1, 1, 0, 1]},
  }, {keyColumns: ORDER_KEY, duplicates: 'keep_all', payload: {p: ['r0', 'r1', 'r2', 'r3', 'r4']}});
  // Rows 1 and 3 have a null key column: invalid rows, never stored.
  assert.equal(info.statistics.invalidRows, 2);
  assert.equal(info.statistics.uniqueKeys, 2);

  const left = {tenant: ['a', null, 'b', 'c', undefined, 'b'], order_id: [1n, 1n, null, 3n, null, 2n]};
  const r = await client.lookup('nul', left, {probes: true, matchCounts: true, select: ['p']});
  assert.deepEqual(Array.from(r.found), [1, 0, 0, 0, 0, 1]);
  assert.deepEqual(Array.from(r.values), [0, NO_MATCH, NO_MATCH, NO_MATCH, NO_MATCH, 2]);
  assert.deepEqual(Array.from(r.matchCounts), [2, 0, 0, 0, 0, 1]);
  // A row with a null examines no slot.
  assert.deepEqual([1, 2, 4].map((i) => r.probes[i]), [0, 0, 0]);
  assert.deepEqual(r.columns.p.toArray(), ['r0', null, null, null, null, 'r2']);

  const want = {
    inner: [[0, 0, 5], [0, 4, 2]],
    left: [[0, 0, 1, 2, 3, 4, 5], [0, 4, NO_MATCH, NO_MATCH, NO_MATCH, NO_MATCH, 2]],
    semi: [[0, 5], [0, 2]],
    anti: [[1, 2, 3, 4], [NO_MATCH, NO_MATCH, NO_MATCH, NO_MATCH]],
  };
  for (const [kind, pairsWanted] of Object.entries(want)) {
    const j = await client.join('nul', left, {kind, select: ['p'], found: true});
    assert.deepEqual(pairs(j), pairsWanted, kind);
    assert.deepEqual(Array.from(j.found), [1, 0, 0, 0, 0, 1], kind);
    assert.deepEqual(j.columns.p.toArray(), pairsWanted[1].map((v) => (v === NO_MATCH ? null : `r${v}`)), kind);
  }
  await client.drop('nul');
});

test('payload gathered by key columns: lookups take the lowest row, keep_all joins every row', async () => {
  const keys = {tenant: ['t1', 't1', 't2', 't1', 't2'], order_id: [10n, 11n, 10n, 10n, 10n]};
  const payload = {price: new Float64Array([1.5, 2.5, 3.5, 4.5, 5.5]), note: ['a', null, 'c', 'd', 'e']};
  await client.buildIndex('lowest', keys, {keyColumns: ORDER_KEY, payload});
  const r = await client.lookup('lowest', {tenant: ['t1', 't2', 't3', 't1'], order_id: [10n, 10n, 10n, 11n]},
                                {select: ['price', 'note']});
  assert.deepEqual(Array.from(r.values), [0, 2, NO_MATCH, 1]);
  assert.deepEqual(r.columns.price.toArray(), [1.5, 3.5, null, 2.5]);
  assert.deepEqual(r.columns.note.toArray(), ['a', 'c', null, null]);

  await client.buildIndex('all', keys, {keyColumns: ORDER_KEY, payload, duplicates: 'keep_all'});
  const j = await client.join('all', {tenant: ['t2', 't1'], order_id: [10n, 10n]}, {select: ['price', 'note']});
  assert.deepEqual(pairs(j), [[0, 0, 1, 1], [2, 4, 0, 3]]);
  assert.deepEqual(j.columns.price.toArray(), [3.5, 5.5, 1.5, 4.5]);
  assert.deepEqual(j.columns.note.toArray(), ['c', 'e', 'a', 'd']);
  await client.drop('lowest');
  await client.drop('all');
});

test('key columns in pipelines: lookupBatches, joinBatches and keyColumns without DescribeIndex', async () => {
  await client.buildIndex('pipe', {tenant: ['a', 'b', 'c'], order_id: [1n, 2n, 3n]}, {keyColumns: ORDER_KEY});
  const batches = [{tenant: ['c', 'a'], order_id: [3n, 2n]}, {tenant: [], order_id: []}, {tenant: ['b'], order_id: [2n]}];
  const lookups = [];
  for await (const r of client.lookupBatches('pipe', batches, {keyColumns: ORDER_KEY})) lookups.push(Array.from(r.values));
  assert.deepEqual(lookups, [[2, NO_MATCH], [], [1]]);
  const joins = [];
  for await (const j of client.joinBatches('pipe', batches, {kind: 'left'})) joins.push(pairs(j));
  assert.deepEqual(joins, [[[0, 1], [2, NO_MATCH]], [[], []], [[2], [1]]]);
  // A batch of the wrong shape fails after the batches before it are answered.
  const seen = [];
  await assert.rejects((async () => {
    for await (const r of client.lookupBatches('pipe', [batches[0], ['a']])) seen.push(r.batch);
  })(), dtype(/batches\[1\]: the key has 2 columns \(tenant string, order_id int64\); give an object of columns by name/));
  assert.deepEqual(seen, [0]);
  await client.drop('pipe');
});

test('client-side errors name the key column and the sizes before anything is sent', async () => {
  await client.buildIndex('err', {tenant: ['a'], order_id: [1n]}, {keyColumns: ORDER_KEY});
  await client.buildIndex('u32', new Uint32Array([1]));

  // Shapes.
  await assert.rejects(client.lookup('err', {tenant: ['a']}), dtype(/keys: key column "order_id" \(int64\) is missing; the key is \(tenant string, order_id int64\)/));
  await assert.rejects(client.lookup('err', ['a']), dtype(/keys: the key has 2 columns \(tenant string, order_id int64\); give an object of columns by name, not Array/));
  await assert.rejects(client.join('err', {tenant: ['a'], order_id: [1n], x: [1]}), dtype(/keys: "x" is not a key column/));
  // Lengths.
  await assert.rejects(client.lookup('err', {tenant: ['a', 'b', 'c'], order_id: [1n, 2n]}),
                       invalid(/keys: key column "order_id" has 2 rows but key column "tenant" has 3 \(every key column has one row per key\)/));
  await assert.rejects(client.buildIndex('bad', {a: ['x'], b: Int32Array.from([1, 2])}),
                       invalid(/keys: key column "b" has 2 rows but key column "a" has 1/));
  await assert.rejects(client.buildIndex('bad', {a: ['x', 'y']}, {payload: {p: [1]}}),
                       invalid(/payload column "p" has 1 rows but keys has 2/));
  // Element types and ranges.
  await assert.rejects(client.lookup('err', {tenant: [1], order_id: [1n]}), dtype(/keys: key column "tenant" \(string\)\[0\]: number is not a string/));
  await assert.rejects(client.lookup('err', {tenant: ['a'], order_id: Int32Array.from([1])}),
                       dtype(/key column "order_id" \(int64\): expected a BigInt64Array or an array, got Int32Array/));
  await assert.rejects(client.lookup('err', {tenant: ['a'], order_id: [2n ** 63n]}), dtype(/"order_id" \(int64\)\[0\]: 9223372036854775808 is outside/));
  await assert.rejects(client.lookup('err', {tenant: ['a'], order_id: {type: 'int32', values: [1]}}),
                       dtype(/key column "order_id" is given as int32, but the key declares it int64/));
  await assert.rejects(client.lookup('err', {tenant: ['\ud800'], order_id: [1n]}), dtype(/"tenant" \(string\)\[0\]: the string has a lone surrogate/));
  // Integer indexes and key columns do not mix.
  await assert.rejects(client.lookup('u32', ['a']), dtype(/keys\[0\]: string is not a uint32 key: the index has uint32 keys/));
  await assert.rejects(client.join('u32', {key: [1]}), dtype(/keys: an object of columns, but the index has uint32 keys/));
  await assert.rejects(client.lookup('err', new Uint32Array([1])), dtype(/the key has 2 columns/));
  // Declared and inferred schemas.
  await assert.rejects(client.buildIndex('bad', {a: [1, 2]}), dtype(/keys: key column "a" is float64, which cannot be a key column .*plain array of numbers has no integer width/));
  await assert.rejects(client.buildIndex('bad', {a: new Float32Array(1)}), dtype(/key column "a" is float32, which cannot be a key column/));
  await assert.rejects(client.buildIndex('bad', [null, null], {keyType: 'columns'}),
                       dtype(/keys: key column "key": cannot infer a type from no non-null values/));
  await assert.rejects(client.buildIndex('bad', {}), invalid(/keys: 0 key columns; a key has 1 to 8/));
  const nine = Object.fromEntries(Array.from({length: 9}, (_, i) => [`c${i}`, ['x']]));
  await assert.rejects(client.buildIndex('bad', nine), invalid(/keys: 9 key columns; a key has 1 to 8/));
  await assert.rejects(client.buildIndex('bad', ['x'], {keyColumns: [{name: 'k', type: 'float64'}]}),
                       dtype(/keyColumns\[0\] \("k"\)\.type: "float64" cannot be a key column type/));
  await assert.rejects(client.buildIndex('bad', {k: ['x']}, {keyColumns: [{name: 'k', type: 'string'}, {name: 'k', type: 'int64'}]}),
                       invalid(/keyColumns\[1\]: key column "k" is declared twice \(also keyColumns\[0\]\)/));
  await assert.rejects(client.buildIndex('bad', ['x'], {keyColumns: [{name: 'k', type: 'string'}], keyType: 'uint32'}),
                       invalid(/keyColumns: 1 key columns declared but keyType is uint32/));
  await assert.rejects(client.buildIndex('bad', ['x'], {keyType: 'text'}), invalid(/keyType: "text" \(expected uint32, uint64 or columns\)/));
  // Nothing was built by the failed calls.
  assert.deepEqual((await client.list()).map((i) => i.name), ['err', 'u32']);
  await client.drop('err');
  await client.drop('u32');
});

test('server errors: invalid UTF-8 in a string key names the row; the schema is checked', async () => {
  const key = [{name: 'k', type: 'string'}];
  await assert.rejects(client.buildIndex('utf', [Buffer.from('ok'), Buffer.from([0x61, 0xc3])], {keyColumns: key}),
                       invalid(/key_columns\[0\] \(column "k"\): row 1 of the keys is not valid UTF-8/));
  await client.buildIndex('utf', ['ok'], {keyColumns: key});
  await assert.rejects(client.lookup('utf', ['ok', Buffer.from([0xff])]), (e) => {
    assert.ok(e instanceof gj.InvalidArgumentError, e.message);
    assert.match(e.message, /row 1 of the keys is not valid UTF-8/);
    return true;
  });
  // A stale schema given as keyColumns reaches the server, which names the mismatch.
  await assert.rejects(client.lookup('utf', [1], {keyColumns: [{name: 'k', type: 'int64'}]}), (e) => {
    assert.ok(e instanceof gj.InvalidArgumentError, e.message);
    assert.match(e.message, /COLUMN_TYPE_INT64.*COLUMN_TYPE_STRING/);
    return true;
  });
  await assert.rejects(client.buildIndex('bad.name/', ['x']), gj.InvalidArgumentError);
  await client.drop('utf');
});

test('long string keys are split into batches and chunks that fit 64 KiB messages', async () => {
  const server = await startServer(['--max-message-bytes=64K']);
  const small = new Client(server.address);
  try {
    const n = 600;
    const keys = Array.from({length: n}, (_, i) => `${i}:${'k'.repeat(200 + (i % 7) * 100)}`);
    const info = await small.buildIndex('long', {s: keys, i: Int32Array.from(keys, (_, i) => -i)});
    assert.equal(info.statistics.uniqueKeys, n);
    const probe = Array.from({length: 2 * n}, (_, i) => keys[(i * 7) % n]);
    let batches = 0;
    const r = await small.lookup('long', {s: probe, i: Int32Array.from(probe, (_, i) => -((i * 7) % n))},
                                 {onProgress: (p) => { batches = p.batches; }});
    assert.deepEqual(Array.from(r.values), probe.map((_, i) => (i * 7) % n));
    assert.ok(batches > 10, `${batches} batches`);
    const j = await small.join('long', {s: probe, i: Int32Array.from(probe, () => 0)}, {kind: 'anti'});
    assert.equal(j.count, probe.length - 2);  // i = 0 matches the key of row 0 only
    await assert.rejects(small.lookup('long', {s: ['x'.repeat(70000)], i: [0]}), invalid(/keys: row 0 needs \d+ bytes, more than a request holds/));
  } finally {
    small.close();
    assert.equal(await server.stop(), 0, server.log());
  }
});

// ---------------------------------------------------------------- randomized model

/** A random (string, int64) table with duplicates and nulls in both columns. */
function randomKeys(next, n) {
  const alphabet = ['', 'a', 'b', '\0', 'é', '日', 'ab'];
  const tenant = [];
  const orderId = [];
  for (let i = 0; i < n; ++i) {
    tenant.push(next() % 23 === 0 ? null : Array.from({length: next() % 3}, () => alphabet[next() % alphabet.length]).join(''));
    const v = [0n, -1n, 1n, 2n ** 63n - 1n, -(2n ** 63n), BigInt(next() % 5)][next() % 6];
    orderId.push(next() % 19 === 0 ? null : v);
  }
  return {tenant, order_id: orderId};
}

/** The model key of row i, or null when a column is null. */
function modelKey(keys, i) {
  if (keys.tenant[i] === null || keys.order_id[i] === null) return null;
  return JSON.stringify([keys.tenant[i], String(keys.order_id[i])]);
}

test('random (string, int64) keys: lookups and the four join kinds against a Map model', async () => {
  const next = rng(2024);
  const build = randomKeys(next, 3000);
  const left = randomKeys(next, 4000);
  for (const duplicates of ['lowest_row', 'keep_all']) {
    const info = await client.buildIndex('rand', build, {keyColumns: ORDER_KEY, duplicates, replace: true,
                                                         chunkRows: 700, payload: {row: build.tenant.map((_, i) => i)}});
    const rowsOf = new Map();
    let invalidRows = 0;
    build.tenant.forEach((_, row) => {
      const k = modelKey(build, row);
      if (k === null) return ++invalidRows;
      if (!rowsOf.has(k)) rowsOf.set(k, []);
      rowsOf.get(k).push(row);
    });
    assert.equal(info.statistics.invalidRows, invalidRows, duplicates);
    assert.equal(info.statistics.uniqueKeys, rowsOf.size, duplicates);
    const matches = (l) => {
      const k = modelKey(left, l);
      const rows = (k !== null && rowsOf.get(k)) || [];
      return duplicates === 'keep_all' ? rows : rows.slice(0, 1);
    };

    const r = await client.lookup('rand', left, {batchRows: 333, matchCounts: true, select: ['row']});
    left.tenant.forEach((_, l) => {
      const rows = matches(l);
      assert.equal(r.values[l], rows.length ? rows[0] : NO_MATCH, `${duplicates} lookup row ${l}`);
      assert.equal(r.found[l], rows.length ? 1 : 0);
      assert.equal(r.columns.row.get(l), rows.length ? rows[0] : null);
    });
    for (const kind of ['inner', 'left', 'semi', 'anti']) {
      const want = [[], []];
      left.tenant.forEach((_, l) => {
        const rows = matches(l);
        if (kind === 'inner' || kind === 'left') rows.forEach((row) => { want[0].push(l + 9); want[1].push(row); });
        if (kind === 'left' && rows.length === 0) { want[0].push(l + 9); want[1].push(NO_MATCH); }
        if (kind === 'semi' && rows.length) { want[0].push(l + 9); want[1].push(rows[0]); }
        if (kind === 'anti' && rows.length === 0) { want[0].push(l + 9); want[1].push(NO_MATCH); }
      });
      const j = await client.join('rand', left, {kind, batchRows: 1000, firstLeftRow: 9, maxInflight: 3, select: ['row']});
      assert.deepEqual(pairs(j), want, `${duplicates} ${kind}`);
      assert.equal(j.count, want[0].length);
      assert.deepEqual(j.columns.row.toArray(), want[1].map((v) => (v === NO_MATCH ? null : v)));
    }
  }
  await client.drop('rand');
});
