'use strict';
// Every call of @gpujoin/client against a real gpujoind (CPU backend): build,
// lookup, join (every kind, on lowest_row and keep_all indexes), aggregate,
// hash, list, describe, drop, serverInfo, with uint32 and uint64 keys, and the
// typed errors the server's statuses become.
const assert = require('node:assert/strict');
const {test, useServer, rng, CLIENT} = require('./server');
const gj = require(CLIENT);

const {NO_MATCH} = gj;
let client;

useServer(test, async (_server, c) => {
  client = c;
});

test('serverInfo reports the CPU backend and the limits the client sizes by', async () => {
  const info = await client.serverInfo();
  assert.equal(info.backend, 'cpu');
  assert.equal(info.serving, true);
  assert.equal(info.maxMessageBytes, 256 * 2 ** 20);
  assert.equal(info.maxInflightBatchesPerStream, 8);
  assert.ok(info.maxResultBytes > 0);
  assert.ok(info.maxPendingResponseBytes > 0);
  assert.equal(Number(info.pendingResponseBytes), 0);
  assert.equal(client.limits.receiveMessageBytes, info.maxMessageBytes);
  assert.equal(client.limits.maxInflight, 8);
});

test('build, describe, list, lookup and drop a uint32 index with generated values', async () => {
  const info = await client.buildIndex('sensors', new Uint32Array([17, 4242, 99, 5, 17]), {capacity: 1024, firstValue: 10});
  assert.equal(info.name, 'sensors');
  assert.equal(info.version, 1);
  assert.equal(info.capacity, 1024);
  assert.equal(info.keyType, 'uint32');
  assert.equal(info.duplicates, 'lowest_row');
  assert.equal(info.rows, 5);
  assert.deepEqual([info.statistics.uniqueKeys, info.statistics.duplicateRows], [4, 1]);

  const r = await client.lookup('sensors', [4242, 8, 17, 5], {probes: true, matchCounts: true});
  assert.deepEqual(Array.from(r.values), [11, NO_MATCH, 10, 13]);
  assert.deepEqual(Array.from(r.found), [1, 0, 1, 1]);
  assert.ok(r.values instanceof Uint32Array && r.found instanceof Uint8Array);
  assert.ok(r.probes instanceof Uint32Array && r.probes.length === 4);
  assert.deepEqual(Array.from(r.matchCounts), [1, 0, 1, 1]);
  assert.deepEqual(r.statistics.found, 3);
  assert.deepEqual(r.statistics.missing, 1);
  assert.equal(r.indexVersion, 1);

  assert.deepEqual((await client.describe('sensors')).rows, 5);
  assert.deepEqual((await client.list()).map((i) => i.name), ['sensors']);

  // Create-only builds of a live name are refused; replace rebuilds (version 2).
  await assert.rejects(client.buildIndex('sensors', [1]), (e) => {
    assert.ok(e instanceof gj.AlreadyExistsError && e instanceof gj.GpujoinError);
    assert.equal(e.code, 6);
    assert.equal(e.codeName, 'ALREADY_EXISTS');
    assert.match(e.message, /sensors/);
    return true;
  });
  const v2 = await client.buildIndex('sensors', [1, 2], {replace: true, values: new Uint32Array([70, 71])});
  assert.equal(v2.version, 2);
  assert.equal(v2.explicitValues, true);
  assert.deepEqual(Array.from((await client.lookup('sensors', [2, 17])).values), [71, NO_MATCH]);

  const dropped = await client.drop('sensors');
  assert.equal(dropped.droppedVersion, 2);
  assert.ok(dropped.freedBytes > 0);
  await assert.rejects(client.describe('sensors'), gj.NotFoundError);
  await assert.rejects(client.lookup('sensors', [1]), gj.NotFoundError);
  await assert.rejects(client.drop('sensors'), (e) => e instanceof gj.NotFoundError && e.message === 'index "sensors" not found');
});

test('uint64 keys: int64 bit patterns, numbers and bigints, and the reserved key', async () => {
  const keys = new BigInt64Array([-5n, 5000000000n, 7n, -1n]);  // -1 is the reserved empty key
  const info = await client.buildIndex('accounts', keys);
  assert.equal(info.keyType, 'uint64');
  assert.equal(info.statistics.invalidRows, 1);
  const r = await client.lookup('accounts', [7, -5n, -6, 5000000000n, 2n ** 64n - 5n]);
  assert.deepEqual(Array.from(r.values), [2, 0, NO_MATCH, 1, 0]);
  // Keys that differ only above bit 31 are different keys.
  const r2 = await client.lookup('accounts', new BigUint64Array([5000000000n - 2n ** 32n + 2n ** 32n, 705032704n]));
  assert.deepEqual(Array.from(r2.found), [1, 0]);
  // A Uint32Array into a uint64 index is widened (value-preserving).
  assert.deepEqual(Array.from((await client.lookup('accounts', new Uint32Array([7]))).values), [2]);
  const j = await client.join('accounts', [7n, 8n, -5n]);
  assert.deepEqual(Array.from(j.leftRows), [0, 2]);
  assert.deepEqual(Array.from(j.rightRows), [2, 0]);
  await client.drop('accounts');
});

test('join kinds on a keep_all index match the documented example', async () => {
  const info = await client.buildIndex('orders', new Uint32Array([7, 8, 7, 9, 7]), {capacity: 1024, duplicates: 'keep_all'});
  assert.equal(info.duplicates, 'keep_all');
  assert.equal(info.statistics.maxGroupRows, 3);
  const lk = await client.lookup('orders', [7, 5, 9], {matchCounts: true});
  assert.deepEqual(Array.from(lk.values), [0, NO_MATCH, 3]);
  assert.deepEqual(Array.from(lk.matchCounts), [3, 0, 1]);

  const keys = new Uint32Array([7, 5, 9, 7]);
  const expected = {
    inner: [[0, 0, 0, 2, 3, 3, 3], [0, 2, 4, 3, 0, 2, 4]],
    left: [[0, 0, 0, 1, 2, 3, 3, 3], [0, 2, 4, NO_MATCH, 3, 0, 2, 4]],
    semi: [[0, 2, 3], [0, 3, 0]],
    anti: [[1], [NO_MATCH]],
  };
  for (const [kind, [left, right]] of Object.entries(expected)) {
    // Without a capacity the client sizes inner and left joins by a count-only pass.
    const j = await client.join('orders', keys, {kind, found: true});
    assert.deepEqual(Array.from(j.leftRows), left, kind);
    assert.deepEqual(Array.from(j.rightRows), right, kind);
    assert.equal(j.count, left.length, kind);
    assert.equal(j.overflow, false, kind);
    assert.deepEqual(Array.from(j.found), [1, 0, 1, 1], kind);
    // Batches of one left row give the same pairs, numbered globally.
    const b = await client.join('orders', keys, {kind, batchRows: 1});
    assert.deepEqual(Array.from(b.leftRows), left, `${kind} in batches of 1`);
    assert.deepEqual(Array.from(b.rightRows), right, `${kind} in batches of 1`);
  }
  // The full names and count_only.
  const semi = await client.join('orders', keys, {kind: 'left_semi'});
  assert.deepEqual(Array.from(semi.leftRows), [0, 2, 3]);
  const counted = await client.join('orders', keys, {countOnly: true});
  assert.equal(counted.count, 7);
  assert.equal(counted.leftRows.length, 0);
  // A capacity the caller gives keeps the stable prefix and reports overflow.
  const cut = await client.join('orders', keys, {capacity: 2});
  assert.deepEqual(Array.from(cut.leftRows), [0, 0]);
  assert.equal(cut.count, 7);
  assert.equal(cut.overflow, true);
  await assert.rejects(client.join('orders', keys, {kind: 'outer'}), gj.InvalidArgumentError);
  await client.drop('orders');
});

test('join against a model on random keys, lowest_row and keep_all, every kind', async () => {
  const next = rng(24);
  const build = Uint32Array.from({length: 5000}, () => next() % 3000);
  const left = Uint32Array.from({length: 7000}, () => next() % 4000);
  for (const duplicates of ['lowest_row', 'keep_all']) {
    await client.buildIndex('rand', build, {duplicates, replace: true});
    const rowsOf = new Map();
    build.forEach((k, row) => {
      if (!rowsOf.has(k)) rowsOf.set(k, []);
      if (duplicates === 'keep_all' || rowsOf.get(k).length === 0) rowsOf.get(k).push(row);
    });
    for (const kind of ['inner', 'left', 'semi', 'anti']) {
      const want = [[], []];
      left.forEach((k, l) => {
        const rows = rowsOf.get(k) || [];
        if (kind === 'inner' || kind === 'left') rows.forEach((r) => { want[0].push(l + 50); want[1].push(r); });
        if (kind === 'left' && rows.length === 0) { want[0].push(l + 50); want[1].push(NO_MATCH); }
        if (kind === 'semi' && rows.length) { want[0].push(l + 50); want[1].push(rows[0]); }
        if (kind === 'anti' && rows.length === 0) { want[0].push(l + 50); want[1].push(NO_MATCH); }
      });
      const j = await client.join('rand', left, {kind, batchRows: 1000, firstLeftRow: 50, maxInflight: 3});
      assert.deepEqual(Array.from(j.leftRows), want[0], `${duplicates} ${kind}`);
      assert.deepEqual(Array.from(j.rightRows), want[1], `${duplicates} ${kind}`);
      assert.equal(j.count, want[0].length);
    }
  }
  await client.drop('rand');
});

test('aggregate: count, sum, min, max and mean over batches, with a mask', async () => {
  const keys = new Uint32Array([0, 1, 1, 2, 0, 5]);  // 5 >= groups: ignored
  const values = new Float32Array([1, 2, 3, 4, 5, 6]);
  const count = await client.aggregate(keys, {op: 'count', groups: 3, batchRows: 4});
  assert.deepEqual(Array.from(count.counts), [2, 2, 1]);
  assert.equal(count.rows, 6);
  const sum = await client.aggregate(keys, {op: 'sum', groups: 3, values, batchRows: 2});
  assert.deepEqual(Array.from(sum.values), [6, 5, 4]);
  assert.deepEqual(Array.from((await client.aggregate(keys, {op: 'min', groups: 3, values})).values), [1, 2, 4]);
  assert.deepEqual(Array.from((await client.aggregate(keys, {op: 'max', groups: 4, values})).values).slice(0, 3), [5, 3, 4]);
  const mean = await client.aggregate(keys, {op: 'mean', groups: 4, values: Array.from(values), mask: [true, true, false, true, true, true]});
  assert.deepEqual(Array.from(mean.values).slice(0, 3), [3, 2, 4]);
  assert.ok(Number.isNaN(mean.values[3]));  // an empty group's mean
  await assert.rejects(client.aggregate(keys, {op: 'sum', groups: 3}), gj.InvalidArgumentError);
  // The server's limit on groups is its typed error, with its message.
  await assert.rejects(client.aggregate(keys, {op: 'count', groups: 2 ** 31}), (e) => {
    assert.ok(e instanceof gj.ResourceExhaustedError, e.name);
    assert.match(e.message, /--max-aggregate-groups/);
    return true;
  });
});

test('hash: deterministic, batched like whole, nulls, strings, 32 and 64 bits', async () => {
  const a = new Uint32Array([1, 2, 3, 1]);
  const h = await client.hash([a]);
  assert.ok(h.hashes instanceof BigUint64Array);
  assert.equal(h.hashes[0], h.hashes[3]);
  assert.notEqual(h.hashes[0], h.hashes[1]);
  assert.equal(h.nullCount, 0);
  const batched = await client.hash([a], {batchRows: 1});
  assert.deepEqual(batched.hashes, h.hashes);
  const h32 = await client.hash([a], {bits: 32});
  assert.ok(h32.hashes instanceof Uint32Array);
  // Composite keys with a null row and a string column.
  const s = ['tea', 'jam', null, 'tea'];
  const hc = await client.hash([{type: 'int64', values: [1n, 2n, 3n, 1n]}, s]);
  assert.equal(hc.nullCount, 1);
  assert.equal(hc.hashes[2], 0n);
  assert.equal(hc.validity[0], 0b1011);
  assert.equal(hc.hashes[0], hc.hashes[3]);
  const hs = await client.hash([s], {batchRows: 3});
  assert.deepEqual(hs.hashes, (await client.hash([s])).hashes);
  await assert.rejects(client.hash([new Uint8Array([1])]), gj.DtypeError);  // bool needs {type: 'bool'} or booleans
});

test('hash: the known answers of docs/hashing.md at 32 and 64 bits', async () => {
  const cases = [
    [[new Uint32Array([0])], 0x08d6d969, 0x3aefa6fd5cf2deb4n],
    [[new Uint32Array([42])], 0x454235d1, 0xd756d7b62fc50bf1n],
    [[new BigInt64Array([-1n])], 0xc182c6d9, 0x85d136adb773c6c9n],
    [[new Float32Array([-0])], 0x08d6d969, 0x3aefa6fd5cf2deb4n],
    [[{type: 'binary', values: [Buffer.from('abc')]}], 0x32d153ff, 0x44bc2cf5ad770999n],
    [[['abc']], 0x32d153ff, 0x44bc2cf5ad770999n],
    [[new Uint32Array([1]), ['x']], 0x312371b9, 0xdf65db6222acac39n],
    [[[true]], 0x3892f731, 0x8a4127811b21e730n],
  ];
  for (const [columns, h32, h64] of cases) {
    assert.equal((await client.hash(columns, {bits: 32})).hashes[0], h32);
    assert.equal((await client.hash(columns)).hashes[0], h64);
  }
  // A bool column with nulls, across batches.
  const b = await client.hash([[true, null, false, true]], {batchRows: 3});
  assert.deepEqual(Array.from(b.hashes), [0x8a4127811b21e730n, 0n, b.hashes[2], 0x8a4127811b21e730n]);
  assert.equal(b.nullCount, 1);
});

test('an index rebuilt between the batches of a lookup or join is AbortedError, never mixed answers', async () => {
  for (const what of ['lookup', 'join']) {
    await client.buildIndex('vers', [1, 2, 3], {replace: true});
    const rebuildAfterFirst = async ({answered}) => {
      // The next batch is held back until the rebuild is installed.
      if (answered === 1) await client.buildIndex('vers', [3, 2, 1], {replace: true});
    };
    await assert.rejects(client[what]('vers', [1, 2, 3], {batchRows: 1, maxInflight: 1, onProgress: rebuildAfterFirst}), (e) => {
      assert.ok(e instanceof gj.AbortedError, `${what}: ${e.name} ${e.message}`);
      assert.match(e.message, new RegExp(`index "vers" was rebuilt during the ${what}: its batches ran on versions \\d+ and \\d+`));
      return true;
    });
  }
  // Without a rebuild the same calls succeed, each batch waiting for the callback.
  let calls = 0;
  const slow = () => new Promise((resolve) => setImmediate(() => { ++calls; resolve(); }));
  const r = await client.lookup('vers', [1, 2, 3], {batchRows: 1, onProgress: slow});
  assert.deepEqual(Array.from(r.values), [2, 1, 0]);
  assert.equal(calls, 3);
  await client.drop('vers');
});
