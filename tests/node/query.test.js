'use strict';
// Client#query (the Query stream, docs/api.md "Query: plans in one round trip")
// through @gpujoin/client against a real gpujoind: lookups on uint32, uint64
// and key-schema indexes in every join kind, keep_all expansion, filters with
// nulls, aggregates with every measure, projection, limits, answers continued
// over several messages, step statistics and errors; and the plan builder's
// checks before anything is sent.
const assert = require('node:assert/strict');
const {test, useServer, startServer, Client, CLIENT} = require('./server');
const gj = require(CLIENT);

let client;

useServer(test, async (_server, c) => {
  client = c;
  await c.buildIndex('q_u32', new Uint32Array([10, 20, 30, 40]), {
    payload: {name: ['ten', 'twenty', null, 'forty'], weight: [1.5, 2.5, 3.5, null],
              region: new Uint32Array([7, 8, 7, 9])},
  });
  await c.buildIndex('q_u64', new BigUint64Array([1n << 40n, (1n << 63n) + 5n, 7n]),
                     {payload: {label: ['big', 'huge', 'small']}});
  await c.buildIndex('q_sku', {sku: ['A-1', 'B-2', 'C-3']}, {payload: {price: [9.5, 3.0, 1.25]}});
  await c.buildIndex('q_orders', {tenant: ['acme', 'acme', 'zeta'], order_id: BigInt64Array.from([1n, 2n, 1n])},
                     {payload: {total: BigInt64Array.from([100n, 200n, 300n])}});
  await c.buildIndex('q_multi', new Uint32Array([1, 2, 1, 3, 1]),
                     {duplicates: 'keep_all', payload: {tag: ['a', 'b', 'c', 'd', 'e']}});
  await c.buildIndex('q_region', new Uint32Array([7, 8]), {payload: {region: ['north', 'south']}});
  await c.buildIndex('q_sensors', new Uint32Array([1, 2, 3, 4, 6]),
                     {payload: {type: ['temp', 'door', 'temp', null, 'hum']}});
});

/** Rows of a result as arrays of the named columns' values (null for nulls). */
function rowsOf(r, names) {
  const cols = names.map((n) => {
    assert.ok(r.columns[n], `no column ${n} in ${r.names.join(', ')}`);
    return r.columns[n].toArray();
  });
  return Array.from({length: r.rows}, (_, i) => cols.map((c) => c[i]));
}

const i64 = (xs) => ({type: 'int64', values: xs});

// ---------------------------------------------------------------- the plan builder, no server

test('measures from text, arrays and objects; bad ones are refused', () => {
  const c = new gj.Client('127.0.0.1:1');  // never connected: nothing here is sent
  const q = c.query({k: new Uint32Array(2)}).aggregate({by: 'k', measures: [
    'count()', 'count(*)', 'count(v)', 'mean(v)', 'sum(b) as total', 'MAX( a.b )  AS  "top x"', ['min', 'x'],
    ['sum', 'y', 'sy'], {op: 'mean', column: 'z', name: 'mz'}, 'count']});
  assert.deepEqual(q.plan.steps[0].aggregate.measures.map((m) => [m.op, m.column, m.name]), [
    ['AGGREGATE_OP_COUNT', '', ''], ['AGGREGATE_OP_COUNT', '', ''], ['AGGREGATE_OP_COUNT', 'v', ''],
    ['AGGREGATE_OP_MEAN', 'v', ''], ['AGGREGATE_OP_SUM', 'b', 'total'], ['AGGREGATE_OP_MAX', 'a.b', 'top x'],
    ['AGGREGATE_OP_MIN', 'x', ''], ['AGGREGATE_OP_SUM', 'y', 'sy'], ['AGGREGATE_OP_MEAN', 'z', 'mz'],
    ['AGGREGATE_OP_COUNT', '', '']]);
  const named = c.query({k: [1]}).aggregate({measures: {n: 'count()', total: ['sum', 'b']}});
  assert.deepEqual(named.plan.steps[0].aggregate.measures.map((m) => m.name), ['n', 'total']);
  assert.equal(c.query({k: [1]}).aggregate({measures: ['sum', 'b']}).plan.steps[0].aggregate.measures.length, 1);
  assert.equal(c.query({k: [1]}).aggregate().plan.steps[0].aggregate.measures[0].op, 'AGGREGATE_OP_COUNT');
  for (const [spec, re] of [['median(x)', /op "median"/], ['sum()', /needs a column/], ['sum x', /is not 'op/],
                            [{column: 'x'}, /object measure/], [['sum', 5], /must be strings/], [42, /is not a measure/]]) {
    assert.throws(() => c.query({k: [1]}).aggregate({measures: [spec]}), (e) => e instanceof gj.InvalidArgumentError && re.test(e.message),
                  JSON.stringify(spec));
  }
  c.close();
});

test('plan steps, immutability and the checks before sending', async () => {
  const c = new gj.Client('127.0.0.1:1');
  const base = c.query({k: new Uint32Array(4)});
  const q = base.lookup('i', {key: 'k', select: 'p', prefix: 'i_', how: 'left', foundColumn: 'hit'})
    .filter('p > 2').aggregate({by: 'p'}).project('p', ['count', 'n'], {x: 'y'}).limit(3);
  assert.equal(base.plan.steps.length, 0);
  assert.deepEqual(q.plan.steps.map((s) => Object.keys(s)[0]), ['lookup', 'filter', 'aggregate', 'project', 'limit']);
  assert.deepEqual(q.plan.steps[0].lookup, {index: 'i', key: ['k'], select: ['p'], prefix: 'i_', kind: 'JOIN_KIND_LEFT_OUTER',
                                            found_column: 'hit'});
  assert.deepEqual(q.plan.steps[3].project.columns, [{column: 'p', name: ''}, {column: 'count', name: 'n'}, {column: 'x', name: 'y'}]);
  assert.deepEqual(base.project(['a', 'b']).plan.steps[0].project.columns, [{column: 'a', name: ''}, {column: 'b', name: ''}]);
  const kinds = Object.fromEntries(['inner', 'left', 'semi', 'anti', 'left_outer', 'left_semi', 'left_anti'].map(
    (h) => [h, base.lookup('i', {key: 'k', how: h}).plan.steps[0].lookup.kind]));
  assert.deepEqual(kinds, {inner: 'JOIN_KIND_INNER', left: 'JOIN_KIND_LEFT_OUTER', semi: 'JOIN_KIND_LEFT_SEMI',
                           anti: 'JOIN_KIND_LEFT_ANTI', left_outer: 'JOIN_KIND_LEFT_OUTER',
                           left_semi: 'JOIN_KIND_LEFT_SEMI', left_anti: 'JOIN_KIND_LEFT_ANTI'});
  const bad = (fn, re) => assert.throws(fn, (e) => e instanceof gj.InvalidArgumentError && re.test(e.message));
  bad(() => base.lookup('i', {key: 'k', how: 'outer'}), /how: "outer"/);
  bad(() => base.lookup('i', {}), /key names no column/);
  bad(() => base.filter(' '), /where must be/);
  bad(() => base.limit(-1), /non-negative/);
  bad(() => base.project(), /no columns/);
  await assert.rejects(base.run(), (e) => e instanceof gj.InvalidArgumentError && /at least one step/.test(e.message));
  bad(() => { let x = base; for (let i = 0; i < 65; ++i) x = x.limit(1); }, /at most 64 steps/);
  bad(() => c.query({a: [1, 2], b: [1]}), /"b": 1 rows, but "a" has 2/);
  bad(() => c.query({}), /no columns/);
  bad(() => c.query(new Uint32Array(3)), /object of columns/);
  assert.throws(() => c.query({a: {type: 'uint32', values: [-1]}}), gj.DtypeError);
  c.close();
});

// ---------------------------------------------------------------- lookups

test('lookup + select on a uint32 index, in every join kind', async () => {
  const k = new Uint32Array([20, 5, 10, 30, 20]);
  const inner = await client.query({k, v: i64([1, 2, 3, 4, 5])}).lookup('q_u32', {key: 'k', select: ['name', 'weight']}).run();
  assert.deepEqual([...inner.names].sort(), ['k', 'name', 'q_u32.found', 'v', 'weight']);
  assert.deepEqual(rowsOf(inner, ['k', 'v', 'name', 'weight', 'q_u32.found']), [
    [20, 1n, 'twenty', 2.5, true], [10, 3n, 'ten', 1.5, true], [30, 4n, null, 3.5, true], [20, 5n, 'twenty', 2.5, true]]);
  const data = {k: new Uint32Array([20, 5, 10, 40])};
  const left = await client.query(data).lookup('q_u32', {key: 'k', select: ['name', 'weight'], how: 'left'}).run();
  assert.deepEqual(rowsOf(left, ['k', 'name', 'weight', 'q_u32.found']), [
    [20, 'twenty', 2.5, true], [5, null, null, false], [10, 'ten', 1.5, true], [40, 'forty', null, true]]);
  const semi = await client.query(data).lookup('q_u32', {key: 'k', select: ['name'], how: 'semi'}).run();
  assert.deepEqual(rowsOf(semi, ['k', 'name']), [[20, 'twenty'], [10, 'ten'], [40, 'forty']]);
  const anti = await client.query(data).lookup('q_u32', {key: 'k', select: ['name'], how: 'anti'}).run();
  assert.deepEqual(rowsOf(anti, ['k', 'name']), [[5, null]]);
});

test('lookup keys: any integer type; nulls, negatives and too-wide values are missing', async () => {
  const r = await client.query({k: {type: 'int64', values: [10n, -1n, 1n << 33n, null, 30n]}})
    .lookup('q_u32', {key: 'k', select: ['name'], how: 'left', foundColumn: 'hit'}).run();
  assert.equal(r.columns['q_u32.found'], undefined);
  assert.deepEqual(r.columns.hit.toArray(), [true, false, false, false, true]);
  assert.deepEqual(r.columns.name.toArray(), ['ten', null, null, null, null]);
});

test('lookup + select on a uint64 index', async () => {
  const ids = new BigUint64Array([(1n << 63n) + 5n, 3n, 7n, 1n << 40n]);
  const r = await client.query({id: ids}).lookup('q_u64', {key: 'id', select: 'label', how: 'left'}).run();
  assert.deepEqual(r.columns.label.toArray(), ['huge', null, 'small', 'big']);
  assert.deepEqual(r.columns['q_u64.found'].toArray(), [true, false, true, true]);
  assert.equal(r.columns.id.type, 'uint64');
  const neg = await client.query({id: BigInt64Array.from([-5n, 7n])}).lookup('q_u64', {key: 'id', select: ['label'], how: 'left'}).run();
  assert.deepEqual(neg.columns.label.toArray(), [null, 'small']);
});

test('lookup on key-schema indexes (a string key, a composite key)', async () => {
  const r = await client.query({sku: ['C-3', null, 'b-2', 'A-1']}).lookup('q_sku', {key: 'sku', select: ['price'], how: 'left'}).run();
  assert.deepEqual(r.columns.price.toArray(), [1.25, null, null, 9.5]);
  const o = await client.query({t: ['zeta', 'acme', 'acme', null], id: i64([1, 2, 3, 1])})
    .lookup('q_orders', {key: ['t', 'id'], select: ['total'], prefix: 'o_'}).run();
  assert.deepEqual(rowsOf(o, ['t', 'id', 'o_total', 'q_orders.found']), [['zeta', 1n, 300n, true], ['acme', 2n, 200n, true]]);
});

test('keep_all lookups expand rows in every join kind', async () => {
  const data = {k: new Uint32Array([1, 4, 3])};
  const want = {inner: [[1, 'a'], [1, 'c'], [1, 'e'], [3, 'd']], left: [[1, 'a'], [1, 'c'], [1, 'e'], [4, null], [3, 'd']],
                semi: [[1, 'a'], [3, 'd']], anti: [[4, null]]};
  for (const [how, rows] of Object.entries(want)) {
    const r = await client.query(data).lookup('q_multi', {key: 'k', select: ['tag'], how}).run();
    assert.deepEqual(rowsOf(r, ['k', 'tag']), rows, how);
  }
});

test('chained lookups, project and step statistics per batch', async () => {
  const r = await client.query({k: new Uint32Array([10, 40, 20, 99])})
    .lookup('q_u32', {key: 'k', select: ['region'], how: 'left'})
    .lookup('q_region', {key: 'region', select: ['region'], prefix: 'r_', how: 'left'})
    .project('k', ['r_region', 'region_name'], 'q_region.found').run();
  assert.deepEqual(r.names, ['k', 'region_name', 'q_region.found']);
  assert.deepEqual(rowsOf(r, r.names), [[10, 'north', true], [40, null, false], [20, 'south', true], [99, null, false]]);

  const s = await client.query({k: new Uint32Array([10, 11, 20, 21, 30, 31, 40])})
    .lookup('q_u32', {key: 'k', select: ['name']}).filter('name is not null').run({batchRows: 3});
  assert.deepEqual(s.columns.k.toArray(), [10, 20, 40]);
  const version = (await client.describe('q_u32')).version;
  assert.equal(s.statistics.batches.length, 3);
  assert.deepEqual(s.statistics.final, []);
  s.statistics.batches.forEach((b, i) => {
    assert.deepEqual(b.map((x) => [x.step, x.kind]), [[0, 'lookup'], [1, 'filter']]);
    assert.equal(b[0].rowsIn, [3, 3, 1][i]);
    assert.equal(b[0].index, 'q_u32');
    assert.equal(b[0].indexVersion, version);
    assert.equal(b[0].statistics.found + b[0].statistics.missing, b[0].rowsIn);
    assert.equal(b[1].rowsIn, b[0].rowsOut);
  });
  assert.deepEqual(s.statistics.steps.map((x) => [x.kind, x.rowsIn, x.rowsOut]), [['lookup', 7, 4], ['filter', 4, 3]]);
});

// ---------------------------------------------------------------- filters

const FILTER_INPUT = {x: i64([1, null, 3, null, 5]), s: ['a', null, 'c', 'd', null],
                      f: new Float64Array([0.5, NaN, 2.0, 1.0, Infinity]), b: [true, false, null, true, false]};
const X = [1n, null, 3n, null, 5n];

test('filters follow SQL nulls', async () => {
  const cases = [
    ['x > 2', [2, 4]], ['x is null', [1, 3]], ['x is not null', [0, 2, 4]], ['not (x > 2)', [0]],
    ["x > 2 or s = 'd'", [2, 3, 4]], ["x > 2 and s = 'c'", [2]], ['not (x > 2 and s is null)', [0, 2, 3]],
    ['x in (1, 5)', [0, 4]], ['x not in (1, 5)', [2]], ["s not in ('a')", [2, 3]], ['x != 3', [0, 4]],
    ["x <> 3 OR s == 'a'", [0, 4]], ['f != 1.0', [0, 1, 2, 4]], ['f > 1', [2, 4]], ['x >= 3.5', [4]],
    ['b = true', [0, 3]], ['b = false or b is null', [1, 2, 4]], ['"s" = \'it\'\'s\' or s >= \'c\'', [2, 3]],
  ];
  for (const [where, rows] of cases) {
    const r = await client.query(FILTER_INPUT).filter(where).run();
    assert.deepEqual(r.columns.x.toArray(), rows.map((i) => X[i]), where);
  }
});

test('bad filter text is InvalidArgumentError', async () => {
  for (const where of ['x >', 's = 5', "x = 'a'", '(x > 1', 'x ~ 3', 'no_such_column = 1']) {
    await assert.rejects(client.query(FILTER_INPUT).filter(where).run(),
                         (e) => e instanceof gj.InvalidArgumentError && e.code === 3 && e.message.length > 0, where);
  }
});

// ---------------------------------------------------------------- aggregates

const SENSORS = {
  sensor_id: new Uint32Array([1, 2, 3, 4, 5, 1, 2, 6, 1]),
  latency: [3.0, 7.5, null, 1.0, 2.0, 5.0, 9.0, null, Infinity],
  bytes: BigInt64Array.from([10n, 20n, 30n, 40n, 50n, 60n, 70n, 80n, -5n]),
  small: new Int32Array([1, 2, 3, 4, 5, 6, 7, 8, 9]),
  u: new Uint32Array([4, 3, 2, 1, 0, 1, 2, 3, 4]),
  f32: new Float32Array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5]),
};

test('aggregate by a string payload column with every measure', async () => {
  const r = await client.query(SENSORS).lookup('q_sensors', {key: 'sensor_id', select: ['type'], how: 'left'})
    .aggregate({by: ['type'], measures: ['count()', 'count(latency)', 'sum(bytes)', 'sum(u)', 'sum(latency)', 'sum(f32)',
                                         'min(latency)', 'max(latency)', 'min(small)', 'max(u)', 'mean(latency)',
                                         'mean(bytes)', 'mean(f32)']}).run();
  assert.deepEqual(r.names, ['type', 'count', 'count_latency', 'sum_bytes', 'sum_u', 'sum_latency', 'sum_f32', 'min_latency',
                             'max_latency', 'min_small', 'max_u', 'mean_latency', 'mean_bytes', 'mean_f32']);
  const col = (n) => r.columns[n].toArray();
  assert.deepEqual(col('type'), ['temp', 'door', null, 'hum']);
  assert.deepEqual(col('count'), [4n, 2n, 2n, 1n]);
  assert.deepEqual(col('count_latency'), [3n, 2n, 2n, 0n]);
  assert.deepEqual(col('sum_bytes'), [95n, 90n, 90n, 80n]);
  assert.equal(r.columns.sum_u.type, 'uint64');
  assert.deepEqual(col('sum_u'), [11n, 5n, 1n, 3n]);
  assert.deepEqual(col('sum_latency'), [8.0, 16.5, 3.0, null]);
  assert.equal(r.columns.sum_f32.type, 'float32');
  assert.deepEqual(col('sum_f32'), [17.0, 8.0, 8.0, 7.5]);
  assert.deepEqual(col('min_latency'), [3.0, 7.5, 1.0, null]);
  assert.deepEqual(col('max_latency'), [5.0, 9.0, 2.0, null]);
  assert.equal(r.columns.min_small.type, 'int32');
  assert.deepEqual(col('min_small'), [1, 2, 4, 8]);
  assert.deepEqual(col('max_u'), [4, 3, 1, 3]);
  assert.deepEqual(col('mean_latency'), [4.0, 8.25, 1.5, null]);
  assert.deepEqual(col('mean_bytes'), [23.75, 45.0, 45.0, 80.0]);
  assert.equal(r.columns.mean_f32.type, 'float32');
  assert.deepEqual(col('mean_f32'), [4.25, 4.0, 4.0, 7.5]);
});

test('aggregate over several batches is answered by the final message', async () => {
  const r = await client.query(SENSORS).lookup('q_sensors', {key: 'sensor_id', select: ['type']})
    .aggregate({by: 'type', measures: {n: 'count()', total: 'sum(bytes)'}})
    .filter('n > 1').project('type', ['total', 'sum']).run({batchRows: 2});
  assert.deepEqual(rowsOf(r, ['type', 'sum']), [['temp', 95n], ['door', 90n]]);
  assert.equal(r.statistics.batches.length, 5);
  const agg = r.statistics.final.find((s) => s.kind === 'aggregate');
  assert.ok(agg, JSON.stringify(r.statistics.final));
  assert.equal(agg.rowsOut, 4);
});

test('aggregate without group_by answers one row, even for no rows', async () => {
  const r = await client.query({v: i64([1, 2, 3])}).filter('v > 10').aggregate({measures: ['count()', 'sum(v)', 'mean(v)']}).run();
  assert.deepEqual(rowsOf(r, ['count', 'sum_v', 'mean_v']), [[0n, null, null]]);
});

test('an integer sum that overflows is OutOfRangeError', async () => {
  await assert.rejects(client.query({g: i64([1, 1]), v: BigInt64Array.from([1n << 62n, 1n << 62n])})
    .aggregate({by: 'g', measures: ['sum(v)']}).run(), gj.OutOfRangeError);
});

// ---------------------------------------------------------------- limits, continuation, errors

test('limit over a stream of batches', async () => {
  const n = 1000;
  const r = await client.query({i: BigInt64Array.from({length: n}, (_, i) => BigInt(i)), s: Array.from({length: n}, (_, i) => `r${i}`)})
    .filter('i >= 100').limit(250).run({batchRows: 64});
  assert.equal(r.rows, 250);
  assert.deepEqual(r.columns.s.toArray(), Array.from({length: 250}, (_, i) => `r${i + 100}`));
  assert.equal(r.statistics.batches.length, Math.ceil(n / 64));
});

test('results larger than a message (a batch\'s rows, an aggregate\'s groups) are reassembled from their parts', async () => {
  const server = await startServer(['--max-message-bytes=1M', '--max-result-bytes=8M']);
  const c = new Client(server.address);
  try {
    const n = 4000;
    const texts = Array.from({length: n}, (_, i) => String(i).padStart(6, '0') + 'x'.repeat(994));
    await c.buildIndex('q_wide', Uint32Array.from({length: n}, (_, i) => i), {payload: {text: texts}});
    const keys = Uint32Array.from({length: n}, (_, i) => n - 1 - i);
    const r = await c.query({k: keys}).lookup('q_wide', {key: 'k', select: ['text']}).run({batchRows: n});
    assert.equal(r.rows, n);
    assert.ok(r.messages > 3, `${r.messages} messages`);  // 4 MB in 1 MiB messages
    assert.equal(r.statistics.batches.length, 1);
    assert.deepEqual(r.columns.k.toArray(), Array.from(keys));
    const got = r.columns.text.toArray();
    for (let i = 0; i < n; ++i) assert.equal(got[i], texts[keys[i]], `row ${i}`);
    // An aggregate's groups larger than a message: the final answer comes in parts too.
    const g = await c.query({g: [...texts, ...texts.slice().reverse()]}).aggregate({by: 'g'}).run({batchRows: 1000});
    assert.equal(g.statistics.batches.length, 8);
    assert.ok(g.messages > 8 + 2, `${g.messages} messages`);
    assert.deepEqual(g.columns.g.toArray(), texts);
    assert.ok(g.columns.count.toArray().every((x) => x === 2n));
  } finally {
    c.close();
    assert.equal(await server.stop(), 0, server.log());
  }
});

test('a batch cut by the result limit runs again in smaller batches', async () => {
  // --max-result-bytes=8M: 4096 keys matching 400 rows each of a keep_all index
  // expand to 1.4M rows, more than one batch may hold.
  const server = await startServer(['--max-message-bytes=1M', '--max-result-bytes=8M']);
  const c = new Client(server.address);
  try {
    await c.buildIndex('q_cut', Uint32Array.from({length: 4000}, (_, i) => Math.floor(i / 400)), {duplicates: 'keep_all'});
    const left = Uint32Array.from({length: 4096}, (_, i) => i % 12);
    const r = await c.query({k: left, row: Int32Array.from({length: 4096}, (_, i) => i)}).lookup('q_cut', {key: 'k'}).run();
    const want = [];
    left.forEach((k, i) => { if (k < 10) for (let j = 0; j < 400; ++j) want.push(i); });
    assert.equal(r.rows, want.length);
    assert.deepEqual(Array.from(r.columns.row.values), want);
    await assert.rejects(c.query({k: left}).lookup('q_cut', {key: 'k'}).run({batchRows: 4096}),
                         (e) => e instanceof gj.ResourceExhaustedError && /--max-result-bytes/.test(e.message));
  } finally {
    c.close();
    assert.equal(await server.stop(), 0, server.log());
  }
});

test('errors: an unknown index, a plan error in every batch', async () => {
  await assert.rejects(client.query({k: new Uint32Array([1])}).lookup('q_no_such_index', {key: 'k'}).run(),
                       (e) => (e instanceof gj.NotFoundError || e instanceof gj.InvalidArgumentError) && /q_no_such_index/.test(e.message));
  await assert.rejects(client.query({x: i64(Array.from({length: 100}, (_, i) => i))}).filter('x >').run({batchRows: 10}),
                       (e) => e instanceof gj.InvalidArgumentError && e.batchId === 0);
  await assert.rejects(client.query({k: [1.5]}).lookup('q_u32', {key: 'k'}).run(), gj.InvalidArgumentError);
});
