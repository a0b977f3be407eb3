'use strict';
// Typed aggregation through @gpujoin/client against a real gpujoind (CPU
// backend; docs/api.md "Typed values"): integer values sum exactly in 64 bits
// (where float32 is wrong), the overflow report, uint64 contributing rows,
// min/max in the value type with empty integer groups not valid, float64's
// -0/NaN rules, and the dtype errors raised before anything is sent.
const assert = require('node:assert/strict');
const {test, useServer, rng, CLIENT} = require('./server');
const gj = require(CLIENT);

let client;

useServer(test, async (_server, c) => {
  client = c;
});

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;

test('int64 sums are exact over batches where float32 is not; means and counts agree', async () => {
  const random = rng(22);
  const rows = 20000;
  const groups = 7;
  const keys = new Uint32Array(rows);
  const values = new BigInt64Array(rows);
  const mask = new Uint8Array(rows);
  const sums = new Array(groups).fill(0n);
  const counts = new Array(groups).fill(0n);
  for (let i = 0; i < rows; ++i) {
    keys[i] = random() % (groups + 1);  // key 7: outside the groups, ignored
    // 2^40 + a random 32-bit part: far past float32's 24-bit significand.
    values[i] = (1n << 40n) + BigInt(random()) - (random() % 2 ? 0n : 1n << 41n);
    mask[i] = random() % 5 !== 0 ? 1 : 0;
    if (keys[i] < groups && mask[i]) {
      sums[keys[i]] += values[i];
      ++counts[keys[i]];
    }
  }
  const sum = await client.aggregate(keys, {op: 'sum', groups, values, mask, batchRows: 777, contributingRows: true});
  assert.equal(sum.valueType, 'int64');
  assert.equal(sum.rows, rows);
  assert.ok(sum.values instanceof BigInt64Array);
  assert.deepEqual(Array.from(sum.values), sums);
  assert.deepEqual(Array.from(sum.overflow), new Array(groups).fill(0));
  assert.equal(sum.overflowGroups, 0);
  assert.ok(sum.contributingRows instanceof BigUint64Array);
  assert.deepEqual(Array.from(sum.contributingRows), counts);

  // The same numbers through the float32 path are not exact.
  const f32 = await client.aggregate(keys, {op: 'sum', groups, mask, values: Float32Array.from(values, Number)});
  assert.equal(f32.valueType, 'float32');
  assert.ok(f32.values instanceof Float32Array);
  assert.ok(Array.from(f32.values).some((v, g) => BigInt(Math.round(v)) !== sums[g]));

  const mean = await client.aggregate(keys, {op: 'mean', groups, values, mask, batchRows: 4096});
  assert.ok(mean.values instanceof Float64Array);
  for (let g = 0; g < groups; ++g) {
    const want = Number(sums[g]) / Number(counts[g]);
    assert.ok(Math.abs(mean.values[g] - want) <= Math.abs(want) * 2 ** -50, `group ${g}: ${mean.values[g]} vs ${want}`);
  }
  assert.deepEqual(Array.from(mean.overflow), new Array(groups).fill(0));

  // uint32 values sum into uint64, past 2^32.
  const u = await client.aggregate([0, 0, 1], {op: 'sum', groups: 2, values: new Uint32Array([0xffffffff, 0xffffffff, 7])});
  assert.equal(u.valueType, 'uint32');
  assert.ok(u.values instanceof BigUint64Array);
  assert.deepEqual(Array.from(u.values), [8589934590n, 7n]);
  // A plain int32 sum of 2^24 + 1 (float32 would round it to 2^24).
  const i = await client.aggregate([0, 0], {op: 'sum', groups: 1, values: new Int32Array([16777216, 1])});
  assert.deepEqual(Array.from(i.values), [16777217n]);
  const c = await client.aggregate(keys, {op: 'count', groups, mask, contributingRows: true, batchRows: 5000});
  assert.equal(c.valueType, null);
  assert.deepEqual(Array.from(c.contributingRows), counts);
  assert.deepEqual(Array.from(c.counts), counts.map(Number));
});

test('an integer sum that leaves 64 bits is flagged, and stays flagged over later batches', async () => {
  const keys = [0, 0, 1];
  const r = await client.aggregate(keys, {op: 'sum', groups: 2, values: new BigInt64Array([2n ** 62n, 2n ** 62n, -5n])});
  // The low 64 bits of group 0's exact 2^63, flagged.
  assert.deepEqual(Array.from(r.values), [I64_MIN, -5n]);
  assert.deepEqual(Array.from(r.overflow), [1, 0]);
  assert.equal(r.overflowGroups, 1);
  const mean = await client.aggregate(keys, {op: 'mean', groups: 2, values: new BigInt64Array([2n ** 62n, 2n ** 62n, -5n])});
  assert.ok(Number.isNaN(mean.values[0]));
  assert.equal(mean.values[1], -5);
  assert.deepEqual(Array.from(mean.overflow), [1, 0]);
  // One row per batch: the running total passes I64_MAX after the second batch
  // and is back in range after the third; the flag stays, the sum is exact.
  const sticky = await client.aggregate([0, 0, 0, 1], {
    op: 'sum', groups: 2, batchRows: 1, values: new BigInt64Array([I64_MAX, 1n, -2n, I64_MIN]),
  });
  assert.deepEqual(Array.from(sticky.values), [I64_MAX - 1n, I64_MIN]);
  assert.deepEqual(Array.from(sticky.overflow), [1, 0]);
  // Unsigned: past 2^64 - 1.
  const u = await client.aggregate([0, 0, 1], {
    op: 'sum', groups: 2, values: new BigUint64Array([2n ** 64n - 1n, 2n, 2n ** 64n - 1n]),
  });
  assert.equal(u.valueType, 'uint64');
  assert.deepEqual(Array.from(u.values), [1n, 2n ** 64n - 1n]);
  assert.deepEqual(Array.from(u.overflow), [1, 0]);
  assert.equal(u.overflowGroups, 1);
});

test('min/max keep the value type; an empty integer group is not valid', async () => {
  const keys = [0, 0, 2, 2, 9];
  const min = await client.aggregate(keys, {op: 'min', groups: 3, values: new Int32Array([-5, 3, 2 ** 31 - 1, -(2 ** 31), 1])});
  assert.equal(min.valueType, 'int32');
  assert.ok(min.values instanceof Int32Array);
  assert.deepEqual(Array.from(min.values), [-5, 0, -(2 ** 31)]);
  assert.deepEqual(Array.from(min.valid), [1, 0, 1]);
  assert.equal(min.overflow, undefined);
  const max = await client.aggregate(keys, {op: 'max', groups: 3, batchRows: 2,
                                            values: new BigUint64Array([1n, 2n ** 64n - 1n, 0n, 5n, 7n])});
  assert.ok(max.values instanceof BigUint64Array);
  assert.deepEqual(Array.from(max.values), [2n ** 64n - 1n, 0n, 5n]);
  assert.deepEqual(Array.from(max.valid), [1, 0, 1]);
  const full = await client.aggregate([0, 1], {op: 'max', groups: 2, values: new BigInt64Array([I64_MIN, I64_MAX])});
  assert.deepEqual(Array.from(full.values), [I64_MIN, I64_MAX]);
  assert.deepEqual(Array.from(full.valid), [1, 1]);
  // Int16Array widens to int32 (as the Python client's int16), Uint8Array to uint32.
  const narrow = await client.aggregate([0, 0], {op: 'min', groups: 1, values: new Int16Array([-300, 4])});
  assert.equal(narrow.valueType, 'int32');
  assert.deepEqual(Array.from(narrow.values), [-300]);
  const bytes = await client.aggregate([0, 0], {op: 'sum', groups: 1, values: new Uint8Array([200, 100])});
  assert.equal(bytes.valueType, 'uint32');
  assert.deepEqual(Array.from(bytes.values), [300n]);
});

test('float64 follows the float32 rules in float64: non-finite ignored, -0 below +0, empty sum +0', async () => {
  const keys = [0, 0, 1, 1, 1, 2];
  const values = new Float64Array([0, -0, NaN, Infinity, 0.1, -Infinity]);
  const min = await client.aggregate(keys, {op: 'min', groups: 4, values});
  assert.equal(min.valueType, 'float64');
  assert.ok(min.values instanceof Float64Array);
  assert.ok(Object.is(min.values[0], -0));
  assert.equal(min.values[1], 0.1);
  assert.ok(Number.isNaN(min.values[2]) && Number.isNaN(min.values[3]));  // only non-finite; empty
  assert.equal(min.valid, undefined);
  const max = await client.aggregate(keys, {op: 'max', groups: 4, values});
  assert.ok(Object.is(max.values[0], 0));
  const sum = await client.aggregate(keys, {op: 'sum', groups: 4, values, contributingRows: true});
  assert.ok(Object.is(sum.values[2], 0) && Object.is(sum.values[3], 0));  // empty sums are +0
  assert.equal(sum.values[1], 0.1);
  assert.equal(sum.overflow, undefined);
  assert.deepEqual(Array.from(sum.contributingRows), [2n, 1n, 0n, 0n]);
  // Accumulated in float64: 0.1 + 0.2 is float64's 0.30000000000000004, not float32's.
  const exact = await client.aggregate([0, 0], {op: 'sum', groups: 1, values: new Float64Array([0.1, 0.2])});
  assert.equal(exact.values[0], 0.1 + 0.2);
  const mean = await client.aggregate(keys, {op: 'mean', groups: 4, values, batchRows: 1});
  assert.equal(mean.values[0], 0);
  assert.equal(mean.values[1], 0.1);
  assert.ok(Number.isNaN(mean.values[2]) && Number.isNaN(mean.values[3]));
});

test('values of no aggregation type are a DtypeError before anything is sent', async () => {
  const dtype = (pattern) => (e) => {
    assert.ok(e instanceof gj.DtypeError, `${e.name}: ${e.message}`);
    assert.match(e.message, pattern);
    return true;
  };
  const keys = [0, 1];
  await assert.rejects(client.aggregate(keys, {op: 'sum', groups: 2, values: [1n, 2n]}),
                       dtype(/values\[0\]: a bigint in a plain array; send 64-bit integers as a BigInt64Array/));
  await assert.rejects(client.aggregate(keys, {op: 'sum', groups: 2, values: [1, '2']}), dtype(/values\[1\]: string is not a number/));
  await assert.rejects(client.aggregate(keys, {op: 'max', groups: 2, values: new DataView(new ArrayBuffer(8))}),
                       dtype(/values: expected a Float32Array, Float64Array, Int32Array.*got DataView/));
  await assert.rejects(client.aggregate(keys, {op: 'count', groups: 2, values: new BigInt64Array(2)}),
                       (e) => e instanceof gj.InvalidArgumentError && /count takes no values/.test(e.message));
  await assert.rejects(client.aggregate(keys, {op: 'sum', groups: 2, values: new Float64Array(3)}),
                       (e) => e instanceof gj.InvalidArgumentError && /values has 3 rows but keys has 2/.test(e.message));
  // Zero rows of typed values: every group empty.
  const none = await client.aggregate([], {op: 'min', groups: 2, values: new BigInt64Array(0)});
  assert.deepEqual(Array.from(none.values), [0n, 0n]);
  assert.deepEqual(Array.from(none.valid), [0, 0]);
});
