'use strict';
// Probe bounds through @gpujoin/client: maxProbeCount on lookup, join,
// lookupBatches and joinBatches, and a build whose bound leaves keys without a
// slot, which every join of the index reports as overflow.
//
// The keys fill a table completely (64 keys, capacity 64), so many sit past
// their home slot; an unbounded lookup with probes tells each key's distance
// (its probe count), the oracle: under a request bound b a key is found exactly
// when its probe count is at most b. A client that dropped the bound would find
// every key.
const assert = require('node:assert/strict');
const {test, useServer, CLIENT} = require('./server');
const gj = require(CLIENT);

const CAPACITY = 64;
const KEYS = Uint32Array.from({length: CAPACITY}, (_, i) => CAPACITY - i);
let client;
let free;  // the unbounded lookup of KEYS, with probes

useServer(test, async (_server, c) => {
  client = c;
  const info = await client.buildIndex('bound', KEYS, {capacity: CAPACITY});
  assert.equal(info.statistics.uniqueKeys, CAPACITY);
  assert.equal(info.maxProbeCount, CAPACITY);
  free = await client.lookup('bound', KEYS, {probes: true});
  assert.ok(free.found.every((f) => f === 1));
  assert.ok(free.probes.some((p) => p > 2), 'no key sits two slots past its home: the test shows nothing');
});

const within = (bound) => Array.from(free.probes, (p) => (p <= bound ? 1 : 0));
const rowsWithin = (bound) => within(bound).flatMap((w, i) => (w ? [i] : []));
async function collect(generator) {
  const out = [];
  for await (const r of generator) out.push(r);
  return out;
}

for (const bound of [1, 2]) {
  test(`lookup honours maxProbeCount ${bound}`, async () => {
    const r = await client.lookup('bound', KEYS, {probes: true, maxProbeCount: bound, batchRows: 10});
    assert.deepEqual(Array.from(r.found), within(bound));
    assert.deepEqual(Array.from(r.values), Array.from(free.values, (v, i) => (free.probes[i] <= bound ? v : gj.NO_MATCH)));
    assert.deepEqual(Array.from(r.probes), Array.from(free.probes, (p) => Math.min(p, bound)));
    assert.equal(r.statistics.found, rowsWithin(bound).length);
    assert.equal(r.statistics.maxProbes, bound);

    const parts = await collect(client.lookupBatches('bound', [KEYS.subarray(0, 20), KEYS.subarray(20)],
                                                     {maxProbeCount: bound}));
    assert.deepEqual(parts.flatMap((p) => Array.from(p.found)), within(bound));
  });

  test(`join honours maxProbeCount ${bound}`, async () => {
    const rows = rowsWithin(bound);
    const j = await client.join('bound', KEYS, {maxProbeCount: bound, found: true, batchRows: 10});
    assert.deepEqual(Array.from(j.leftRows), rows);
    assert.deepEqual(Array.from(j.rightRows), rows.map((i) => free.values[i]));
    assert.deepEqual(Array.from(j.found), within(bound));
    assert.equal(j.count, rows.length);
    assert.equal(j.overflow, false);

    const anti = await client.join('bound', KEYS, {kind: 'anti', maxProbeCount: bound});
    assert.deepEqual(Array.from(anti.leftRows), within(bound).flatMap((w, i) => (w ? [] : [i])));

    const parts = await collect(client.joinBatches('bound', [KEYS.subarray(0, 20), KEYS.subarray(20)],
                                                   {maxProbeCount: bound}));
    assert.deepEqual(parts.flatMap((p) => Array.from(p.leftRows)), rows);
  });
}

test('a bound above the capacity is refused', async () => {
  await assert.rejects(client.lookup('bound', KEYS.subarray(0, 3), {maxProbeCount: CAPACITY + 1}),
                       (e) => e instanceof gj.InvalidArgumentError && /max_probe_count/.test(e.message));
  await assert.rejects(client.join('bound', KEYS.subarray(0, 3), {maxProbeCount: CAPACITY + 1}),
                       (e) => e instanceof gj.InvalidArgumentError && /max_probe_count/.test(e.message));
});

test('build overflow is reported by every join of the index', async () => {
  // Eight keys into four slots with a bound of one: at least four find no slot.
  const keys = Uint32Array.from([1, 2, 3, 4, 5, 6, 7, 8]);
  const info = await client.buildIndex('overflowed', keys, {capacity: 4, maxProbeCount: 1});
  const stored = info.statistics.uniqueKeys;
  assert.ok(info.statistics.overflowRows >= 4);
  assert.equal(info.statistics.overflowRows, keys.length - stored);
  const found = (await client.lookup('overflowed', keys)).found;
  const j = await client.join('overflowed', keys);
  assert.equal(j.overflow, true);
  assert.equal(j.count, stored);
  assert.deepEqual(Array.from(j.leftRows), Array.from(found).flatMap((f, i) => (f ? [i] : [])));
  for (const kind of ['left', 'semi', 'anti']) {
    assert.equal((await client.join('overflowed', keys, {kind})).overflow, true, kind);
  }
  const counted = await client.join('overflowed', keys, {countOnly: true});
  assert.equal(counted.overflow, true);
  assert.equal(counted.count, stored);
  // No pair at all, still overflow: a missing key may be one the build dropped.
  assert.equal((await client.join('overflowed', [100])).overflow, true);
  const parts = await collect(client.joinBatches('overflowed', [keys.subarray(0, 4), keys.subarray(4)]));
  assert.deepEqual(parts.map((p) => p.overflow), [true, true]);

  await client.buildIndex('overflowed', keys, {capacity: 16, replace: true});
  assert.equal((await client.join('overflowed', keys)).overflow, false);
});
