'use strict';
// Keys and tables as a new user has them, against a real gpujoind: integer keys
// of any integer typed array or plain array, checked by value against the
// index's key type (never wrapped or reinterpreted; the first value that does
// not fit is named with its position), and buildIndex(name, rows, {key}) from
// row objects or an object of columns, the other columns becoming payload.
const assert = require('node:assert/strict');
const {test, useServer, CLIENT} = require('./server');
const gj = require(CLIENT);

const {NO_MATCH} = gj;
let client;

useServer(test, async (_server, c) => {
  client = c;
  await client.buildIndex('t32', new Uint32Array([3, 100, 7]));
  await client.buildIndex('t64', new BigUint64Array([3n, 100n, 7n]));
});

/** Asserts `e` is a client-side DtypeError whose message matches `pattern`. */
function dtype(pattern) {
  return (e) => {
    assert.ok(e instanceof gj.DtypeError, `${e.name}: ${e.message}`);
    assert.match(e.message, pattern);
    return true;
  };
}

const INTEGER_ARRAYS = [Int8Array, Int16Array, Int32Array, Uint8Array, Uint8ClampedArray, Uint16Array, Uint32Array];

test('every integer typed array and plain arrays are looked up by value', async () => {
  for (const index of ['t32', 't64']) {
    for (const T of INTEGER_ARRAYS) {
      const r = await client.lookup(index, T.from([7, 3, 5, 100]));
      assert.deepEqual(Array.from(r.values), [2, 0, NO_MATCH, 1], `${T.name} into ${index}`);
    }
    for (const keys of [new BigInt64Array([7n, 3n, 5n, 100n]), new BigUint64Array([7n, 3n, 5n, 100n]),
                        [7, 3, 5, 100], [7n, 3n, 5, 100n]]) {
      const r = await client.lookup(index, keys);
      assert.deepEqual(Array.from(r.values), [2, 0, NO_MATCH, 1], `${keys.constructor.name} into ${index}`);
    }
  }
  const j = await client.join('t32', new BigInt64Array([100n, 9n, 3n]), {kind: 'left'});
  assert.deepEqual(Array.from(j.rightRows), [1, NO_MATCH, 0]);
});

test('a key that does not fit names the first one and its position', async () => {
  await assert.rejects(client.lookup('t32', new Int32Array([1, 2, 3, -1, -2])),
                       dtype(/^keys\[3\]: -1 does not fit a uint32 index key \(it is negative; 0 to 4294967295\)$/));
  await assert.rejects(client.lookup('t32', [7, 2 ** 32, 2 ** 33]),
                       dtype(/^keys\[1\]: 4294967296 does not fit a uint32 index key \(0 to 4294967295\)$/));
  await assert.rejects(client.join('t32', new BigUint64Array([1n, 1n << 40n])), dtype(/^keys\[1\]: 1099511627776 does not fit/));
  await assert.rejects(client.lookup('t32', [1, 2.5]), dtype(/^keys\[1\]: 2\.5 is not an integer$/));
  await assert.rejects(client.lookup('t32', [1, null]), dtype(/^keys\[1\]: null is not an integer$/));
  await assert.rejects(client.lookup('t32', new Float64Array([1])), dtype(/uint32 keys.*Float64Array/));
  await assert.rejects(client.lookup('t64', [1n, 2n ** 64n]), dtype(/^keys\[1\]: 18446744073709551616 does not fit a uint64 index key/));
  await assert.rejects(client.upsert('t32', new Int16Array([4, -4])), dtype(/^upsertKeys\[1\]: -4 does not fit a uint32/));
  await assert.rejects(client.buildIndex('t_bad', new Int32Array([1, -2])), dtype(/^keys\[1\]: -2 does not fit a uint32/));
  assert.deepEqual((await client.list()).map((i) => i.name).sort(), ['t32', 't64']);
});

test('upsert and delete take keys of other integer types', async () => {
  await client.buildIndex('t_stock', new Uint32Array([1, 2, 3]), {payload: {qty: new BigInt64Array([5n, 0n, 7n])}, replace: true});
  const m = await client.upsert('t_stock', new Int32Array([2, 4]), {payload: {qty: [9n, 1n]}});
  assert.deepEqual([m.insertedKeys, m.updatedKeys], [1, 1]);
  const d = await client.delete('t_stock', new BigInt64Array([1n, 8n]));
  assert.deepEqual([d.deletedKeys, d.notFoundKeys], [1, 1]);
  const r = await client.lookup('t_stock', new Int8Array([1, 2, 4]), {select: ['qty']});
  assert.deepEqual(Array.from(r.values), [NO_MATCH, 3, 4]);
  assert.deepEqual(r.columns.qty.toArray(), [null, 9n, 1n]);
});

const SENSORS = [
  {id: 17, kind: 'temp', threshold: 21.5, active: true, serial: 1n << 40n, tag: Buffer.from([0, 1])},
  {id: 4242, kind: null, threshold: 0, active: false, serial: -2n},
  {id: 99, kind: 'lock', threshold: 7.25, active: true, serial: 5n, tag: Buffer.from('z')},
];

test('buildIndex from row objects: the key column and payload columns of the others', async () => {
  const info = await client.buildIndex('t_rows', SENSORS, {key: 'id', replace: true});
  assert.equal(info.keyType, 'uint32');
  assert.deepEqual(info.payload.map((p) => [p.name, p.type]), [
    ['kind', 'string'], ['threshold', 'float64'], ['active', 'bool'], ['serial', 'int64'], ['tag', 'binary']]);
  const r = await client.lookup('t_rows', [99, 8, 17, 4242], {select: ['kind', 'threshold', 'active', 'serial', 'tag']});
  assert.deepEqual(Array.from(r.values), [2, NO_MATCH, 0, 1]);
  assert.deepEqual(r.columns.kind.toArray(), ['lock', null, 'temp', null]);
  assert.deepEqual(r.columns.threshold.toArray(), [7.25, null, 21.5, 0]);
  assert.deepEqual(r.columns.active.toArray(), [true, null, true, false]);
  assert.deepEqual(r.columns.serial.toArray(), [5n, null, 1n << 40n, -2n]);
  assert.deepEqual(r.columns.tag.toArray().map((b) => (b === null ? null : Array.from(b))), [[0x7a], null, [0, 1], null]);
});

test('buildIndex from an object of columns, typed columns and bigint keys', async () => {
  const columns = {
    id: [10n, 1n << 40n, 30n],
    price: new Float32Array([1.5, 2.5, 3.5]),
    qty: {type: 'uint32', values: [1, null, 3]},
  };
  const info = await client.buildIndex('t_cols', columns, {key: 'id', replace: true});
  assert.equal(info.keyType, 'uint64');
  assert.deepEqual(info.payload.map((p) => [p.name, p.type]), [['price', 'float32'], ['qty', 'uint32']]);
  const r = await client.lookup('t_cols', [30, 1n << 40n], {select: ['price', 'qty']});
  assert.deepEqual(Array.from(r.values), [2, 1]);
  assert.deepEqual(r.columns.price.toArray(), [3.5, 2.5]);
  assert.deepEqual(r.columns.qty.toArray(), [3, null]);
});

test('buildIndex from rows with a key schema of several columns', async () => {
  const rows = [
    {tenant: 'acme', order: 1n, total: 1.5},
    {tenant: 'acme', order: 2n, total: 2.5},
    {tenant: 'zeta', order: 1n, total: 3.5},
  ];
  const info = await client.buildIndex('t_orders', rows, {key: ['tenant', 'order'], replace: true});
  assert.equal(info.keyType, 'columns');
  assert.deepEqual(info.keyColumns, [{name: 'tenant', type: 'string'}, {name: 'order', type: 'int64'}]);
  assert.deepEqual(info.payload.map((p) => p.name), ['total']);
  const r = await client.lookup('t_orders', {tenant: ['zeta', 'acme', 'acme'], order: [1n, 2n, 9n]}, {select: ['total']});
  assert.deepEqual(Array.from(r.values), [2, 1, NO_MATCH]);
  assert.deepEqual(r.columns.total.toArray(), [3.5, 2.5, null]);
});

test('buildIndex from rows refuses bad input before anything is sent, naming it', async () => {
  await assert.rejects(client.buildIndex('t_bad', SENSORS, {key: 'sensor_id'}),
                       dtype(/^key: the rows have no column "sensor_id" \(their columns: "id", "kind", "threshold", "active", "serial", "tag"\)$/));
  await assert.rejects(client.buildIndex('t_bad', [{id: 1}, 7], {key: 'id'}),
                       dtype(/^rows\[1\]: expected an object of column values, got number$/));
  await assert.rejects(client.buildIndex('t_bad', [{id: 1, x: 1}], {key: 'id', payload: {y: [1]}}),
                       (e) => e instanceof gj.InvalidArgumentError && /payload and key exclude each other/.test(e.message));
  await assert.rejects(client.buildIndex('t_bad', [{id: 1}, {id: -1}], {key: 'id'}),
                       dtype(/^keys\[1\]: -1 does not fit a uint32 index key/));
  await assert.rejects(client.buildIndex('t_bad', [{id: 1, x: 1}, {id: 2, x: 'a'}], {key: 'id'}),
                       dtype(/"x" \(float64\)\[1\]: string is not a number/));
  await assert.rejects(client.buildIndex('t_bad', {id: [1, 2], x: [1]}, {key: 'id'}),
                       (e) => e instanceof gj.InvalidArgumentError && /payload column "x" has 1 rows but keys has 2/.test(e.message));
  assert.ok(!(await client.list()).some((i) => i.name === 't_bad'));
});
