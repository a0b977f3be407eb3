'use strict';
// Null values in @gpujoin/client's aggregate (opts.valid): a null does not
// contribute to its group (sum, contributingRows, min/max, mean) in any batch
// cut. Typed values carry the nulls in the request's validity bitmap (the
// requests are recorded and checked); float32 values fold them into the mask.
// The values under a null are extreme so that counting one would show.
const assert = require('node:assert/strict');
const {test, useServer, CLIENT} = require('./server');
const gj = require(CLIENT);

let client;

useServer(test, async (_server, c) => {
  client = c;
});

const GROUPS = 4;  // group 3 gets only nulls, group 2 no rows
const KEYS = Uint32Array.from([0, 1, 0, 1, 3, 0, 1, 3, 0, 1, 0]);
const VALUES = BigInt64Array.from([5n, -7n, 9n, 11n, 13n, -(1n << 40n), 1n << 40n, 8n, 2n, 4n, 1n << 41n]);
const VALID = Uint8Array.from([1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0]);

// Per group, the non-null values.
const members = (g) => Array.from(VALUES).filter((_, i) => KEYS[i] === g && VALID[i]);
const MODEL = {
  sum: [0, 1, 2, 3].map((g) => members(g).reduce((a, b) => a + b, 0n)),
  min: [0, 1, 2, 3].map((g) => (members(g).length ? members(g).reduce((a, b) => (b < a ? b : a)) : 0n)),
  max: [0, 1, 2, 3].map((g) => (members(g).length ? members(g).reduce((a, b) => (b > a ? b : a)) : 0n)),
  mean: [0, 1, 2, 3].map((g) => (members(g).length ? Number(members(g).reduce((a, b) => a + b, 0n)) / members(g).length : NaN)),
};
const ROWS = [0, 1, 2, 3].map((g) => BigInt(members(g).length));

/** Records the Aggregate requests `client` writes until restore(). */
function recordRequests() {
  const sent = [];
  const stream = client._stream;
  client._stream = function (method, opts) {
    const call = stream.call(this, method, opts);
    if (method === 'Aggregate') {
      const write = call.write.bind(call);
      call.write = (request, ...rest) => {
        sent.push(request);
        return write(request, ...rest);
      };
    }
    return call;
  };
  return {sent, restore: () => delete client._stream};
}

const bitmap = (start, n) => {
  const slice = VALID.subarray(start, start + n);
  if (slice.every((v) => v)) return '';
  return Buffer.from(Array.from({length: (n + 7) >> 3}, (_, b) =>
    slice.subarray(8 * b, 8 * b + 8).reduce((acc, v, i) => acc | (v << i), 0))).toString('hex');
};

for (const batchRows of [3, 8, 100]) {
  for (const op of ['sum', 'min', 'max', 'mean']) {
    test(`${op} skips null values (batches of ${batchRows})`, async () => {
      const rec = recordRequests();
      let r;
      try {
        r = await client.aggregate(KEYS, {op, groups: GROUPS, values: VALUES, valid: VALID, batchRows,
                                          contributingRows: true});
      } finally {
        rec.restore();
      }
      assert.deepEqual(Array.from(r.contributingRows), ROWS);
      if (op === 'mean') {
        assert.deepEqual(Array.from(r.values), MODEL.mean);
      } else {
        assert.deepEqual(Array.from(r.values), MODEL[op]);
      }
      if (op === 'min' || op === 'max') assert.deepEqual(Array.from(r.valid), [1, 1, 0, 0]);
      if (op === 'sum') assert.equal(r.overflowGroups, 0);
      const want = [];
      for (let s = 0; s < KEYS.length; s += batchRows) want.push(bitmap(s, Math.min(batchRows, KEYS.length - s)));
      assert.deepEqual(rec.sent.map((q) => Buffer.from(q.typed_values.validity || []).toString('hex')), want);
    });
  }
}

test('nulls and the mask combine; boolean flags are accepted', async () => {
  const mask = new Uint8Array(KEYS.length).fill(1);
  mask[0] = 0;  // leaves out 5 of group 0
  const r = await client.aggregate(KEYS, {op: 'sum', groups: GROUPS, values: VALUES, mask,
                                          valid: Array.from(VALID, Boolean), contributingRows: true});
  assert.deepEqual(Array.from(r.values), [MODEL.sum[0] - 5n, ...MODEL.sum.slice(1)]);
  assert.deepEqual(Array.from(r.contributingRows), [ROWS[0] - 1n, ...ROWS.slice(1)]);
});

test('float32 values: nulls are masked out', async () => {
  const rec = recordRequests();
  let r;
  try {
    r = await client.aggregate(KEYS, {op: 'sum', groups: GROUPS, values: Float32Array.from(VALUES, (v) => Number(v) / 4),
                                      valid: VALID});
  } finally {
    rec.restore();
  }
  assert.ok(r.values instanceof Float32Array);
  assert.deepEqual(Array.from(r.values), MODEL.sum.map((s) => Number(s) / 4));
  const packed = rec.sent[0].mask.packed;
  assert.deepEqual(Array.from({length: packed.length / 4}, (_, i) => packed.readUInt32LE(4 * i)), Array.from(VALID));
  assert.equal(rec.sent[0].typed_values, undefined);
});

test('valid of the wrong length or for count is refused before anything is sent', async () => {
  await assert.rejects(client.aggregate(KEYS, {op: 'sum', groups: GROUPS, values: VALUES, valid: VALID.subarray(1)}),
                       (e) => e instanceof gj.InvalidArgumentError && /valid has 10 rows but keys has 11/.test(e.message));
  await assert.rejects(client.aggregate(KEYS, {op: 'count', groups: GROUPS, valid: VALID}),
                       (e) => e instanceof gj.InvalidArgumentError && /valid/.test(e.message));
});
