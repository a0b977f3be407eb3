'use strict';
// Large inputs: a 1M-row lookup (one answer above gRPC's default 4 MiB receive
// limit, and in pipelined batches), a server with 64 KiB messages (build chunks
// and batches sized from GetServerInfo, a join answer continued over many
// messages and reassembled, payload included), bounded in-flight batches, and
// packed bytes at unaligned offsets viewed or copied correctly.
const assert = require('node:assert/strict');
const {test, startServer, rng, Client, CLIENT} = require('./server');
const gj = require(CLIENT);
const columns = require(`${CLIENT}/lib/columns`);

const {NO_MATCH} = gj;

test('packed bytes: aligned offsets are viewed in place, unaligned ones copied once', () => {
  const backing = Buffer.alloc(64);
  for (let i = 0; i < 16; ++i) backing.writeUInt32LE(i * 1000 + 7, i * 4);
  const aligned = backing.subarray(8, 24);
  const v = columns.viewAs(Uint32Array, aligned);
  assert.equal(v.buffer, backing.buffer);  // no copy
  assert.deepEqual(Array.from(v), [2007, 3007, 4007, 5007]);
  const odd = Buffer.concat([Buffer.from([0xaa]), backing]).subarray(9, 25);  // byteOffset 9 + pool offset
  assert.notEqual(odd.byteOffset % 4, 0);
  const copied = columns.viewAs(Uint32Array, odd);
  assert.deepEqual(Array.from(copied), [2007, 3007, 4007, 5007]);
  const wide = Buffer.alloc(17);
  wide.writeBigUInt64LE(2n ** 63n + 5n, 1);
  wide.writeBigUInt64LE(9n, 9);
  assert.deepEqual(Array.from(columns.viewAs(BigUint64Array, wide.subarray(1))), [2n ** 63n + 5n, 9n]);
  assert.throws(() => columns.viewAs(Uint32Array, backing.subarray(0, 6)), /not a multiple of 4/);
});

test('1M-row lookup: one 1M-key batch and pipelined batches, against the model', async () => {
  const server = await startServer();
  const client = new Client(server.address);
  try {
    const n = 1 << 20;
    const next = rng(1);
    const build = new Uint32Array(n);
    for (let i = 0; i < n; ++i) build[i] = next() & 0x7fffffff;
    const info = await client.buildIndex('big', build, {expectedRows: n});
    const value = new Map();
    build.forEach((k, row) => { if (!value.has(k)) value.set(k, row); });
    assert.equal(info.statistics.uniqueKeys, value.size);
    const keys = new Uint32Array(n);
    for (let i = 0; i < n; ++i) keys[i] = i % 2 ? build[next() % n] : next() & 0x7fffffff;
    const want = Uint32Array.from(keys, (k) => (value.has(k) ? value.get(k) : NO_MATCH));

    // One batch: the answer (5 MiB of values and found flags) is above gRPC's
    // default 4 MiB receive limit; the client raised it from GetServerInfo.
    const one = await client.lookup('big', keys, {batchRows: n});
    assert.deepEqual(one.values, want);
    assert.equal(one.found.length, n);
    assert.equal(one.statistics.found + one.statistics.missing, n);
    for (let i = 0; i < n; i += 997) assert.equal(one.found[i], want[i] === NO_MATCH ? 0 : 1);

    const seen = [];
    const t0 = process.hrtime.bigint();
    const batched = await client.lookup('big', keys, {batchRows: 65536, maxInflight: 3,
                                                      onProgress: (p) => seen.push(p.sent - p.answered)});
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    assert.deepEqual(batched.values, want);
    assert.equal(seen.length, 16);
    // At most 3 batches were unanswered when each answer arrived.
    assert.ok(Math.max(...seen) <= 2, `in flight after an answer: ${seen}`);
    console.log(`# 1M-row lookup in 64K batches: ${(n / seconds / 1e6).toFixed(2)} Mkeys/s`);
  } finally {
    client.close();
    assert.equal(await server.stop(), 0, server.log());
  }
});

test('64 KiB messages: chunks and batches fit, a join answer continues over many messages', async () => {
  const server = await startServer(['--max-message-bytes=64K']);
  const client = new Client(server.address);
  try {
    assert.equal((await client.serverInfo()).maxMessageBytes, 65536);
    // 40000 rows with a string payload: the build is cut into chunks of < 64 KiB.
    const n = 40000;
    const next = rng(5);
    const keys = Uint32Array.from({length: n}, () => next() % 5000);
    const labels = Array.from({length: n}, (_, i) => (i % 13 === 0 ? null : `row-${i}-${'z'.repeat(i % 17)}`));
    await client.buildIndex('groups', keys, {duplicates: 'keep_all', payload: {label: labels, row: new Uint32Array(n).map((_, i) => i)}});
    const groups = new Map();
    keys.forEach((k, row) => {
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(row);
    });

    // A lookup of 100000 keys is split into batches whose answers fit 64 KiB.
    const probe = Uint32Array.from({length: 100000}, () => next() % 6000);
    const lk = await client.lookup('groups', probe, {matchCounts: true});
    probe.forEach((k, i) => {
      const g = groups.get(k);
      assert.equal(lk.values[i], g ? g[0] : NO_MATCH);
      assert.equal(lk.matchCounts[i], g ? g.length : 0);
    });

    // 3000 left rows against groups of about 8 rows: about 24000 pairs with their
    // labels, several hundred KiB for one request, continued over many messages.
    const left = Uint32Array.from({length: 3000}, () => next() % 5500);
    for (const kind of ['inner', 'left']) {
      const j = await client.join('groups', left, {kind, select: ['label', 'row'], batchRows: 3000});
      const pairs = [];
      left.forEach((k, l) => {
        const g = groups.get(k) || [];
        g.forEach((row) => pairs.push([l, row]));
        if (kind === 'left' && g.length === 0) pairs.push([l, null]);
      });
      assert.ok(j.messages > 10, `${kind}: ${j.messages} messages`);
      assert.equal(j.leftRows.length, pairs.length);
      assert.equal(j.count, pairs.length);
      assert.equal(j.overflow, false);
      const label = j.columns.label;
      assert.equal(label.length, pairs.length);
      pairs.forEach(([l, row], p) => {
        assert.equal(j.leftRows[p], l);
        assert.equal(j.rightRows[p], row === null ? NO_MATCH : row);
        assert.equal(label.get(p), row === null ? null : labels[row], `${kind} pair ${p}`);
        assert.equal(j.columns.row.get(p), row);
      });
      // The same pairs streamed in batches of 500 left rows, each answer continued
      // over several messages and reassembled per batch.
      const got = [];
      let messages = 0;
      for await (const r of client.joinBatches('groups', [0, 1, 2, 3, 4, 5].map((b) => left.subarray(b * 500, b * 500 + 500)),
                                               {kind, select: ['label'], capacity: 100000})) {
        messages += r.messages;
        r.leftRows.forEach((l, p) => got.push([l, r.rightRows[p], r.columns.label.get(p)]));
      }
      assert.ok(messages > 6, `${kind}: ${messages} messages for 6 batches`);
      assert.deepEqual(got, pairs.map(([l, row]) => [l, row === null ? NO_MATCH : row, row === null ? null : labels[row]]));
    }
  } finally {
    client.close();
    assert.equal(await server.stop(), 0, server.log());
  }
});

test('4 KiB messages, the smallest the server takes: builds and lookups still fit', async () => {
  const server = await startServer(['--max-message-bytes=4096']);
  const client = new Client(server.address);
  try {
    const n = 2000;
    const keys = Uint32Array.from({length: n}, (_, i) => i * 7);
    const labels = Array.from({length: n}, (_, i) => `label-${i}`);
    const info = await client.buildIndex('tiny', keys, {payload: {label: labels}});
    assert.equal(info.rows, n);
    const probe = Uint32Array.from({length: 3000}, (_, i) => i * 5);
    const r = await client.lookup('tiny', probe, {select: ['label']});
    probe.forEach((k, i) => {
      const row = k % 7 === 0 && k / 7 < n ? k / 7 : null;
      assert.equal(r.values[i], row === null ? NO_MATCH : row);
      assert.equal(r.columns.label.get(i), row === null ? null : labels[row]);
    });
  } finally {
    client.close();
    assert.equal(await server.stop(), 0, server.log());
  }
});
