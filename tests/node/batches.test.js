'use strict';
// lookupBatches / joinBatches: batches pulled from an (async) iterable through
// one stream, results yielded per batch in order, at most maxInflight batches
// pulled ahead of the consumer, early exit cancels the stream, errors surface
// after the results before them.
const assert = require('node:assert/strict');
const {test, useServer, rng, CLIENT} = require('./server');
const gj = require(CLIENT);

const {NO_MATCH} = gj;
let client;
const next = rng(77);
const build = Uint32Array.from({length: 20000}, () => next() % 30000);
const firstRow = new Map();
build.forEach((k, row) => { if (!firstRow.has(k)) firstRow.set(k, row); });

useServer(test, async (_server, c) => {
  client = c;
  await client.buildIndex('s', build, {payload: {row: Uint32Array.from(build, (_, i) => i)}});
  await client.buildIndex('m', build, {duplicates: 'keep_all'});
});

const tick = () => new Promise((r) => setImmediate(r));

test('lookupBatches: an async source, per-batch results in order against the model', async () => {
  const sizes = [1000, 0, 1, 4096, 333, 7000, 2];
  const sent = [];
  async function* source() {
    for (const n of sizes) {
      await tick();
      const keys = Uint32Array.from({length: n}, () => next() % 40000);
      sent.push(keys);
      yield keys;
    }
  }
  let b = 0;
  for await (const r of client.lookupBatches('s', source(), {select: ['row'], matchCounts: true})) {
    assert.equal(r.batch, b);
    const keys = sent[b];
    assert.equal(r.values.length, keys.length);
    keys.forEach((k, i) => {
      const want = firstRow.has(k) ? firstRow.get(k) : NO_MATCH;
      assert.equal(r.values[i], want);
      assert.equal(r.found[i], want === NO_MATCH ? 0 : 1);
      assert.equal(r.matchCounts[i], want === NO_MATCH ? 0 : 1);
      assert.equal(r.columns.row.get(i), want === NO_MATCH ? null : want);
    });
    ++b;
  }
  assert.equal(b, sizes.length);
});

test('lookupBatches pulls at most maxInflight batches ahead of a slow consumer', async () => {
  let pulled = 0;
  function* source() {
    for (let i = 0; i < 60; ++i) {
      ++pulled;
      yield Uint32Array.from({length: 500}, (_, j) => build[(i * 500 + j) % build.length]);
    }
  }
  let i = 0;
  const ahead = [];
  for await (const r of client.lookupBatches('s', source(), {maxInflight: 3})) {
    assert.equal(r.batch, i);
    assert.equal(r.statistics.found, 500);
    // Result i taken: at most 3 more sent, and one more pulled waiting for room.
    ahead.push(pulled - (i + 1));
    for (let t = 0; t < 3; ++t) await tick();  // a slow consumer
    ++i;
  }
  assert.equal(i, 60);
  assert.ok(Math.max(...ahead) <= 4, `pulled ahead of the consumer: ${ahead}`);
});

test('leaving the loop early cancels the stream and closes the source', async () => {
  let closed = false;
  function* endless() {
    try {
      for (let i = 0; ; ++i) yield [build[i % build.length]];
    } finally {
      closed = true;
    }
  }
  let seen = 0;
  for await (const r of client.lookupBatches('s', endless(), {maxInflight: 2})) {
    assert.equal(r.found[0], 1);
    if (++seen === 5) break;
  }
  assert.equal(seen, 5);
  for (let t = 0; t < 50 && !closed; ++t) await tick();
  assert.equal(closed, true);
  // The client keeps working.
  assert.equal((await client.lookup('s', [build[0]])).found[0], 1);
});

test('errors: a bad batch from the source and an in-band error, after the results before them', async () => {
  function* mixed() {
    yield [build[0]];
    yield [build[1]];
    yield new Float64Array([1]);
  }
  const got = [];
  await assert.rejects((async () => {
    for await (const r of client.lookupBatches('s', mixed(), {maxInflight: 1})) got.push(r.batch);
  })(), (e) => e instanceof gj.DtypeError && /batches\[2\]/.test(e.message));
  assert.deepEqual(got, [0, 1]);
  // The source's own error, as it is, after every batch sent before it.
  const parseError = new Error('input.csv:3: not a number');
  async function* failing() {
    yield [build[2]];
    yield [build[3]];
    throw parseError;
  }
  const before = [];
  await assert.rejects((async () => {
    for await (const r of client.lookupBatches('s', failing(), {maxInflight: 4})) before.push(r.values[0]);
  })(), (e) => e === parseError);
  assert.deepEqual(before, [firstRow.get(build[2]), firstRow.get(build[3])]);
  await assert.rejects((async () => {
    for await (const r of client.lookupBatches('s', [[1], [2]], {select: ['nope']})) got.push(r);
  })(), (e) => e instanceof gj.InvalidArgumentError && e.batchId === 0 && /no payload column "nope"/.test(e.message));
  await assert.rejects((async () => {
    for await (const r of client.lookupBatches('gone', [[1]])) got.push(r);
  })(), gj.NotFoundError);
});

test('joinBatches: left rows numbered across batches, every kind, keep_all with a capacity', async () => {
  const batches = [Uint32Array.from({length: 700}, () => next() % 40000), new Uint32Array(0),
                   Uint32Array.from({length: 1300}, () => next() % 40000)];
  const all = new Uint32Array([...batches[0], ...batches[2]]);
  for (const [index, opts] of [['s', {}], ['m', {capacity: 100000}]]) {
    for (const kind of ['inner', 'left', 'semi', 'anti']) {
      const whole = await client.join(index, all, {kind, firstLeftRow: 10});
      const left = [];
      const right = [];
      let b = 0;
      for await (const r of client.joinBatches(index, batches, {...opts, kind, firstLeftRow: 10, found: true})) {
        assert.equal(r.batch, b);
        assert.equal(r.firstLeftRow, 10 + [0, 700, 700][b]);
        assert.equal(r.found.length, batches[b].length);
        assert.equal(r.overflow, false);
        assert.equal(r.count, r.leftRows.length);
        left.push(...r.leftRows);
        right.push(...r.rightRows);
        ++b;
      }
      assert.equal(b, 3);
      assert.deepEqual(left, Array.from(whole.leftRows), `${index} ${kind}`);
      assert.deepEqual(right, Array.from(whole.rightRows), `${index} ${kind}`);
    }
  }
  // Without a capacity a keep_all inner batch keeps its rows' worth and says so.
  for await (const r of client.joinBatches('m', [build.subarray(0, 2000)])) {
    assert.equal(r.leftRows.length, 2000);
    assert.ok(r.count > 2000 && r.overflow);
  }
});
