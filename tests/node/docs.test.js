'use strict';
// The Node quick start of docs/api.md, its typed aggregation example and the
// key columns, building from rows and query plan examples of client/node/README.md run as written (the import
// pointed at this checkout's client/node, the address at a test server) and
// print what their comments say.
const assert = require('node:assert/strict');
const {execFile} = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {promisify} = require('node:util');
const {test, startServer, CLIENT, REPO} = require('./server');

test('docs/api.md Node quick start', async () => {
  const doc = fs.readFileSync(path.join(REPO, 'docs', 'api.md'), 'utf8');
  const at = doc.indexOf('**Node client.**');
  assert.ok(at >= 0, 'docs/api.md has no **Node client.** section');
  const block = /```js\n([\s\S]*?)```/.exec(doc.slice(at));
  assert.ok(block, 'no js block after **Node client.**');
  const lines = block[1].trim().split('\n');
  assert.equal(lines.length, 5, 'a five-line quick start');
  const server = await startServer();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpujoin_node_doc_'));
  try {
    const script = block[1]
      .replace("'@gpujoin/client'", JSON.stringify(path.join(CLIENT, 'index.js')))
      .replace("'127.0.0.1:50051'", JSON.stringify(server.address)) +
      'console.log(JSON.stringify([Array.from(r.values), r.columns.kind.toArray(), Array.from(j.leftRows), ' +
      'Array.from(j.rightRows)]));\nc.close();\n';
    const file = path.join(dir, 'quick.mjs');
    fs.writeFileSync(file, script);
    const {stdout} = await promisify(execFile)(process.execPath, [file], {timeout: 30000});
    assert.deepEqual(JSON.parse(stdout), [[1, 2, 4294967295], [null, 'c', null], [0, 1, 2], [2, 4294967295, 0]]);
    // The comments say the same.
    assert.match(lines[3], /r\.values \[1, 2, 4294967295\], r\.columns\.kind\.toArray\(\) \[null, 'c', null\]/);
    assert.match(lines[4], /j\.leftRows \[0, 1, 2\], j\.rightRows \[2, 4294967295, 0\]/);
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
    assert.equal(await server.stop(), 0, server.log());
  }
});

test('docs/api.md Node typed aggregation example', async () => {
  const doc = fs.readFileSync(path.join(REPO, 'docs', 'api.md'), 'utf8');
  const at = doc.indexOf('`c.aggregate(keys, {op, groups, values, mask})`');
  assert.ok(at >= 0, 'docs/api.md has no Node typed aggregation paragraph');
  const block = /```js\n([\s\S]*?)```/.exec(doc.slice(at));
  assert.ok(block, 'no js block after the Node typed aggregation paragraph');
  const lines = block[1].trim().split('\n');
  const server = await startServer();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpujoin_node_doc_'));
  try {
    const script = `import {Client} from ${JSON.stringify(path.join(CLIENT, 'index.js'))};\n` +
      `const c = new Client(${JSON.stringify(server.address)});\n` + block[1] +
      'const show = (a) => Array.from(a, (x) => (Object.is(x, -0) ? "-0" : String(x)));\n' +
      'console.log(JSON.stringify([s.values.constructor.name, show(s.values), show(s.overflow), ' +
      'show(s.contributingRows), m.values.constructor.name, show(m.values)]));\nc.close();\n';
    const file = path.join(dir, 'aggregate.mjs');
    fs.writeFileSync(file, script);
    const {stdout} = await promisify(execFile)(process.execPath, [file], {timeout: 30000});
    assert.deepEqual(JSON.parse(stdout), ['BigInt64Array', ['-9223372036854775808', '-5'], ['1', '0'], ['2', '1'],
                                          'Float64Array', ['-0', 'NaN', 'NaN']]);
    // The comments say the same.
    assert.match(lines[1], /s\.values \[-9223372036854775808n, -5n\], s\.overflow \[1, 0\] .*s\.contributingRows \[2n, 1n\]/);
    assert.match(lines[3], /m\.values \[-0, NaN, NaN\]/);
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
    assert.equal(await server.stop(), 0, server.log());
  }
});

test('client/node/README.md string and composite keys example', async () => {
  const doc = fs.readFileSync(path.join(CLIENT, 'README.md'), 'utf8');
  const at = doc.indexOf('**String and composite keys**');
  assert.ok(at >= 0, 'client/node/README.md has no **String and composite keys** paragraph');
  const block = /```js\n([\s\S]*?)```/.exec(doc.slice(at));
  assert.ok(block, 'no js block after **String and composite keys**');
  const lines = block[1].trim().split('\n').map((l) => l.trim());
  const server = await startServer();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpujoin_node_doc_'));
  try {
    const script = `import {Client} from ${JSON.stringify(path.join(CLIENT, 'index.js'))};\n` +
      `const c = new Client(${JSON.stringify(server.address)});\n` + block[1] +
      'console.log(JSON.stringify([Array.from(r.found), r.columns.price.toArray(), Array.from(j.leftRows), ' +
      'Array.from(j.rightRows), (await c.describe("orders")).keyColumns]));\nc.close();\n';
    const file = path.join(dir, 'keys.mjs');
    fs.writeFileSync(file, script);
    const {stdout} = await promisify(execFile)(process.execPath, [file], {timeout: 30000});
    assert.deepEqual(JSON.parse(stdout), [[1, 0, 0], [1, null, null], [0, 1, 2], [2, 0, 4294967295],
                                          [{name: 'tenant', type: 'string'}, {name: 'order_id', type: 'int64'}]]);
    // The comments say the same.
    assert.ok(lines.some((l) => /r\.found, r\.columns\.price\.toArray\(\); +\/\/ Uint8Array \[1, 0, 0\], \[1, null, null\]$/.test(l)));
    assert.ok(lines.some((l) => /j\.leftRows, j\.rightRows; +\/\/ Uint32Array \[0, 1, 2\], \[2, 0, 4294967295\]$/.test(l)));
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
    assert.equal(await server.stop(), 0, server.log());
  }
});

test('client/node/README.md building from rows example', async () => {
  const doc = fs.readFileSync(path.join(CLIENT, 'README.md'), 'utf8');
  const at = doc.indexOf('**Building from rows**');
  assert.ok(at >= 0, 'client/node/README.md has no **Building from rows** paragraph');
  const block = /```js\n([\s\S]*?)```/.exec(doc.slice(at));
  assert.ok(block, 'no js block after **Building from rows**');
  const lines = block[1].trim().split('\n').map((l) => l.trim());
  const server = await startServer();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpujoin_node_doc_'));
  try {
    const script = `import {Client} from ${JSON.stringify(path.join(CLIENT, 'index.js'))};\n` +
      `const c = new Client(${JSON.stringify(server.address)});\n` + block[1] +
      'const d = await c.describe("sensors");\n' +
      'console.log(JSON.stringify([Array.from(s.values), s.columns.kind.toArray(), s.columns.limit.toArray(), ' +
      'd.payload.map((p) => [p.name, p.type])]));\nc.close();\n';
    const file = path.join(dir, 'rows.mjs');
    fs.writeFileSync(file, script);
    const {stdout} = await promisify(execFile)(process.execPath, [file], {timeout: 30000});
    assert.deepEqual(JSON.parse(stdout), [[2, 4294967295], ['lock', null], [7.25, null],
                                          [['kind', 'string'], ['limit', 'float64']]]);
    // The comments say the same.
    assert.ok(lines.some((l) => /\/\/ payload kind \(string\), limit \(float64\)$/.test(l)));
    assert.ok(lines.some((l) => /s\.values, s\.columns\.kind\.toArray\(\); +\/\/ Uint32Array \[2, 4294967295\], \['lock', null\]$/.test(l)));
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
    assert.equal(await server.stop(), 0, server.log());
  }
});

test('client/node/README.md query plan example', async () => {
  const doc = fs.readFileSync(path.join(CLIENT, 'README.md'), 'utf8');
  const at = doc.indexOf('**Query plans**');
  assert.ok(at >= 0, 'client/node/README.md has no **Query plans** paragraph');
  const block = /```js\n([\s\S]*?)```/.exec(doc.slice(at));
  assert.ok(block, 'no js block after **Query plans**');
  const lines = block[1].trim().split('\n').map((l) => l.trim());
  const server = await startServer();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpujoin_node_doc_'));
  try {
    const script = `import {Client} from ${JSON.stringify(path.join(CLIENT, 'index.js'))};\n` +
      `const c = new Client(${JSON.stringify(server.address)});\n` + block[1] +
      'console.log(JSON.stringify([q.names, q.columns.count.toArray().map(String), q.columns.type.toArray(), ' +
      'q.columns.mean_latency_ms.toArray()]));\nc.close();\n';
    const file = path.join(dir, 'query.mjs');
    fs.writeFileSync(file, script);
    const {stdout} = await promisify(execFile)(process.execPath, [file], {timeout: 30000});
    assert.deepEqual(JSON.parse(stdout), [['type', 'count', 'mean_latency_ms'], ['1', '2'], ['temp', 'door'], [3, 8.25]]);
    // The comment says the same.
    assert.ok(lines.some((l) => /q\.names, q\.columns\.count\.toArray\(\); +\/\/ \['type', 'count', 'mean_latency_ms'\], \[1n, 2n\]$/.test(l)));
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
    assert.equal(await server.stop(), 0, server.log());
  }
});
