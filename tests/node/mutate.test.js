'use strict';
// Mutations through @gpujoin/client (upsert, delete, mutate) against a real
// gpujoind: a lowest_row row-ID index with payload checked against a Map model
// after random upserts and deletes, explicit values on a uint64 index, a
// composite key schema, keep_all groups, inputs split into several requests
// (--max-mutation-rows), a refused request (what was applied is reported), the
// checks before anything is sent, the table growing past maxLoadFactor, and
// the placement option.
const assert = require('node:assert/strict');
const {test, useServer, startServer, rng, Client, CLIENT} = require('./server');
const gj = require(CLIENT);
const {planRequests} = require(`${CLIENT}/lib/mutate`);

const {NO_MATCH} = gj;
let client;

useServer(test, async (_server, c) => {
  client = c;
});

async function check(name, model, keys) {
  const r = await client.lookup(name, Uint32Array.from(keys), {select: ['qty', 'note']});
  keys.forEach((k, i) => {
    const want = model.rows.get(k);
    if (!want) {
      assert.equal(r.found[i], 0, `key ${k}`);
      assert.equal(r.values[i], NO_MATCH);
      assert.ok(r.columns.note.isNull(i));
    } else {
      assert.equal(r.found[i], 1, `key ${k}`);
      assert.equal(r.values[i], want.row, `key ${k}`);
      assert.equal(r.columns.qty.get(i), want.qty, `key ${k}`);
      assert.equal(r.columns.note.get(i), want.note, `key ${k}`);
    }
  });
  return r;
}

test('random upserts and deletes match a model', async () => {
  const next = rng(11);
  const keys = Array.from({length: 100}, (_, i) => i * 3);
  const model = {rows: new Map(), next: 0};
  const upsertModel = (ks, qty, note) => ks.forEach((k, i) => model.rows.set(k, {row: model.next++, qty: qty[i], note: note[i]}));
  const built = await client.buildIndex('m_model', Uint32Array.from(keys), {
    payload: {qty: BigInt64Array.from(keys, (k) => BigInt(k * 10)), note: keys.map((k) => `n${k}`)}, replace: true});
  assert.equal(built.mutationSequence, 0);
  upsertModel(keys, keys.map((k) => BigInt(k * 10)), keys.map((k) => `n${k}`));
  let sequence = 0;
  for (let step = 0; step < 12; ++step) {
    let got;
    if (step % 3 === 2) {
      const dels = [...new Set(Array.from({length: 1 + (next() % 40)}, () => next() % 400))];
      got = await client.delete('m_model', dels, {batchRows: step % 2 ? 7 : undefined});
      const present = dels.filter((k) => model.rows.has(k));
      present.forEach((k) => model.rows.delete(k));
      assert.equal(got.deletedKeys, present.length);
      assert.equal(got.notFoundKeys, dels.length - present.length);
    } else {
      const ups = Array.from({length: 1 + (next() % 60)}, () => next() % 400);
      const qty = ups.map(() => BigInt((next() % 10) - 5));
      const note = ups.map(() => ['a', '', 'Grüße', null][next() % 4]);
      const before = new Set(model.rows.keys());
      got = await client.upsert('m_model', ups, {payload: {qty, note}, batchRows: step % 2 ? 9 : undefined});
      upsertModel(ups, qty, note);
      assert.equal(got.upsertRows, ups.length);
      if (got.requests === 1) {
        const distinct = new Set(ups);
        assert.equal(got.insertedKeys, [...distinct].filter((k) => !before.has(k)).length);
        assert.equal(got.updatedKeys, [...distinct].filter((k) => before.has(k)).length);
      }
    }
    sequence += got.requests;
    assert.equal(got.mutationSequence, sequence);
    const r = await check('m_model', model, Array.from({length: 400}, (_, i) => i));
    assert.equal(r.mutationSequence, sequence);
  }
  const info = await client.describe('m_model');
  assert.equal(info.mutationSequence, sequence);
  assert.equal(info.nextRowId, model.next);
  assert.equal(info.statistics.uniqueKeys, model.rows.size);
  const j = await client.join('m_model', [3, 4], {kind: 'left'});
  assert.equal(j.mutationSequence, sequence);
  for await (const b of client.lookupBatches('m_model', [[3], [4]])) assert.equal(b.mutationSequence, sequence);
});

test('explicit values on a uint64 index; deletes apply before upserts', async () => {
  await client.buildIndex('m_acct', BigInt64Array.from([-5n, 5000000000n, 7n]),
                          {values: [100, 200, 300], replace: true});
  const m = await client.mutate('m_acct', {upsertKeys: BigInt64Array.from([-5n, 8n]), values: [111, 888],
                                           deleteKeys: [-5n, 7n]});
  assert.equal(m.requests, 1);
  assert.deepEqual([m.deletedKeys, m.insertedKeys, m.updatedKeys], [2, 2, 0]);
  const r = await client.lookup('m_acct', BigInt64Array.from([-5n, 5000000000n, 7n, 8n]));
  assert.deepEqual(Array.from(r.values), [111, 200, NO_MATCH, 888]);
  await assert.rejects(client.upsert('m_acct', [9n]), /explicit values/);
});

test('a composite key schema: upserts and deletes of key columns', async () => {
  await client.buildIndex('m_orders', {tenant: ['acme', 'acme', 'zeta'], order_id: BigInt64Array.from([1n, 2n, 1n])},
                          {keyColumns: [{name: 'tenant', type: 'string'}, {name: 'order_id', type: 'int64'}],
                           payload: {total: new Float64Array([1.5, 2.5, 3.5])}, replace: true});
  const m = await client.upsert('m_orders', {tenant: ['zeta', 'beta'], order_id: [1n, 9n]},
                                {payload: {total: [9, null]}});
  assert.deepEqual([m.insertedKeys, m.updatedKeys], [1, 1]);
  const d = await client.delete('m_orders', {tenant: ['acme', null], order_id: [2n, 1n]});
  assert.deepEqual([d.deletedKeys, d.notFoundKeys], [1, 1]);
  const r = await client.lookup('m_orders', {tenant: ['acme', 'acme', 'zeta', 'beta'], order_id: [1n, 2n, 1n, 9n]},
                                {select: ['total']});
  assert.deepEqual(Array.from(r.values), [0, NO_MATCH, 3, 4]);
  assert.deepEqual(r.columns.total.toArray(), [1.5, null, 9, null]);
  assert.equal(r.mutationSequence, 2);
});

test('keep_all: upserts append to groups, a delete removes the group', async () => {
  await client.buildIndex('m_groups', [1, 1, 2], {duplicates: 'keep_all', replace: true});
  const m = await client.upsert('m_groups', [1, 3, 3]);
  assert.equal(m.upsertRows, 3);
  const r = await client.lookup('m_groups', [1, 2, 3], {matchCounts: true});
  assert.deepEqual(Array.from(r.matchCounts), [3, 1, 2]);
  const j = await client.join('m_groups', [1]);
  assert.deepEqual(Array.from(j.rightRows), [0, 1, 3]);
  const d = await client.delete('m_groups', [1]);
  assert.deepEqual([d.deletedKeys, d.deletedRows], [1, 3]);
});

test('inputs past --max-mutation-rows go as several requests', async () => {
  const server = await startServer(['--max-mutation-rows=5']);
  const c = new Client(server.address);
  try {
    assert.equal((await c.serverInfo()).maxMutationRows, 5);
    await c.buildIndex('m_split', Uint32Array.from({length: 20}, (_, i) => i), {replace: true});
    const m = await c.mutate('m_split', {deleteKeys: Uint32Array.from({length: 10}, (_, i) => 2 * i),
                                         upsertKeys: Uint32Array.from({length: 15}, (_, i) => 15 + i)});
    assert.equal(m.requests, 5);
    assert.equal(m.mutationSequence, 5);
    assert.equal(m.deletedKeys, 10);
    assert.equal(m.upsertRows, 15);
    const r = await c.lookup('m_split', Uint32Array.from({length: 32}, (_, i) => i));
    assert.deepEqual(Array.from(r.found), Array.from({length: 32}, (_, k) => (k < 30 && (k % 2 === 1 || k >= 15) ? 1 : 0)));
  } finally {
    c.close();
    assert.equal(await server.stop(), 0, server.log());
  }
});

test('a refused request: no more are sent, the error carries what was applied', async () => {
  await client.buildIndex('m_bad', [1, 2, 3], {replace: true});
  const keys = Uint32Array.from([10, 11, 12, 13, 0xffffffff, 14]);  // the reserved key in request 2
  await assert.rejects(client.upsert('m_bad', keys, {batchRows: 2}), (e) => {
    assert.ok(e instanceof gj.InvalidArgumentError, String(e));
    assert.equal(e.batchId, 2);
    assert.equal(e.result.requests, 2);
    assert.equal(e.result.mutationSequence, 2);
    return true;
  });
  const r = await client.lookup('m_bad', [10, 11, 12, 13, 14]);
  assert.deepEqual(Array.from(r.found), [1, 1, 1, 1, 0]);
});

test('checks before anything is sent', async () => {
  await client.buildIndex('m_checked', [1, 2], {payload: {qty: BigInt64Array.from([1n, 2n])}, replace: true});
  await assert.rejects(client.upsert('m_checked', [5]), /column "qty" \(int64\) of index "m_checked" is missing/);
  await assert.rejects(client.upsert('m_checked', [5], {payload: {qty: [1n], other: [2]}}), /no payload column "other"/);
  await assert.rejects(client.upsert('m_checked', [5], {values: [7], payload: {qty: [1n]}}), /row-ID values/);
  await assert.rejects(client.upsert('m_checked', [5, 6], {payload: {qty: [1n]}}), /has 1 rows but keys has 2/);
  await assert.rejects(client.upsert('m_checked', [5], {payload: {qty: {type: 'int32', values: [1]}}}), gj.DtypeError);
  await assert.rejects(client.upsert('m_checked', ['a'], {payload: {qty: [1n]}}), gj.DtypeError);
  await assert.rejects(client.delete('m_no_such_index', [1]), gj.NotFoundError);
  assert.equal((await client.describe('m_checked')).mutationSequence, 0);
  const empty = await client.delete('m_checked', new Uint32Array(0));
  assert.deepEqual([empty.requests, empty.mutationSequence], [0, 0]);
});

test('upserts past maxLoadFactor grow the table', async () => {
  const info = await client.buildIndex('m_grows', [1, 2, 3], {capacity: 16, maxLoadFactor: 0.5, replace: true});
  assert.equal(info.maxLoadFactor, 0.5);
  const m = await client.upsert('m_grows', Uint32Array.from({length: 40}, (_, i) => 100 + i));
  assert.ok(m.rehashes >= 1 && m.capacity >= 128 && m.loadFactor <= 0.5, JSON.stringify(m));
  assert.equal((await client.describe('m_grows')).rehashes, m.rehashes);
});

test('with a data dir every batch is durable, and a restart serves it', async () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpujoin_node_wal_'));
  try {
    let server = await startServer([`--data-dir=${dir}`]);
    let c = new Client(server.address);
    assert.equal((await c.serverInfo()).walSync, 'always');
    await c.buildIndex('m_durable', [1, 2, 3], {replace: true});
    const m = await c.upsert('m_durable', [4, 5]);
    assert.ok(m.durable);
    assert.equal(m.mutationSequence, 1);
    c.close();
    assert.equal(await server.stop(), 0, server.log());
    server = await startServer([`--data-dir=${dir}`]);
    c = new Client(server.address);
    const info = await c.describe('m_durable');
    assert.deepEqual([info.mutationSequence, info.nextRowId], [1, 5]);
    assert.deepEqual(Array.from((await c.lookup('m_durable', [4, 5])).values), [3, 4]);
    c.close();
    assert.equal(await server.stop(), 0, server.log());
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
  }
});

test('planRequests: rows and bytes bounds, deletes first', () => {
  const bytes = (w) => () => (n) => w * n;
  assert.deepEqual(planRequests(10, 5, 4, 1e6, bytes(4), bytes(8)),
                   [[0, 4, 0, 0], [4, 8, 0, 0], [8, 10, 0, 2], [10, 10, 2, 5]]);
  assert.deepEqual(planRequests(0, 5, 100, 16, bytes(4), bytes(8)), [[0, 0, 0, 2], [0, 0, 2, 4], [0, 0, 4, 5]]);
  assert.deepEqual(planRequests(0, 0, 10, 100, bytes(4), bytes(8)), []);
  assert.throws(() => planRequests(0, 1, 10, 100, bytes(4), bytes(500)), /upsert row 0/);
  assert.throws(() => planRequests(2, 0, 10, 100, bytes(500), bytes(8)), /deleteKeys: row 0/);
});

test('placement is sent and described, and a bad one refused before anything is sent', async () => {
  const info = await client.buildIndex('m_placed', [5, 6], {placement: 'replicated', replace: true});
  assert.equal(info.placement, 'replicated');
  assert.equal((await client.describe('m_placed')).placement, 'replicated');
  assert.equal((await client.buildIndex('m_placed', [5], {replace: true})).placement, 'partitioned');
  await assert.rejects(client.buildIndex('m_placed', [5], {placement: 'everywhere', replace: true}),
                       /placement: "everywhere"/);
});
