'use strict';
// Dtype checks before anything is sent (never a reinterpretation), and the
// server's statuses and in-band batch errors as typed GpujoinErrors carrying
// the gRPC code and the server's message; TLS with a bearer token.
const assert = require('node:assert/strict');
const {execFileSync} = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {test, startServer, useServer, Client, CLIENT, REPO} = require('./server');
const gj = require(CLIENT);

let client;

useServer(test, async (_server, c) => {
  client = c;
  await client.buildIndex('u32', new Uint32Array([1, 2, 3]));
  await client.buildIndex('u64', new BigUint64Array([1n, 2n ** 40n]));
});

function dtype(pattern) {
  return (e) => {
    assert.ok(e instanceof gj.DtypeError, `${e.name}: ${e.message}`);
    assert.ok(e instanceof gj.InvalidArgumentError && e instanceof gj.GpujoinError);
    assert.equal(e.code, 3);
    assert.match(e.message, pattern);
    return true;
  };
}

test('keys of the wrong element type or out of range are DtypeErrors', async () => {
  await assert.rejects(client.lookup('u32', new Float64Array([1, 2])), dtype(/uint32 keys.*Float64Array/));
  await assert.rejects(client.lookup('u32', new Float32Array([1])), dtype(/Float32Array/));
  await assert.rejects(client.lookup('u32', new Int32Array([1, 2, -1, -2])),
                       dtype(/^keys\[2\]: -1 does not fit a uint32 index key \(it is negative; 0 to 4294967295\)$/));
  await assert.rejects(client.lookup('u32', [1, -1]), dtype(/keys\[1\]: -1 does not fit a uint32 index key/));
  await assert.rejects(client.lookup('u32', [2 ** 32]), dtype(/keys\[0\]: 4294967296/));
  await assert.rejects(client.lookup('u32', [1.5]), dtype(/keys\[0\]: 1.5/));
  await assert.rejects(client.lookup('u32', ['1']), dtype(/keys\[0\]: string/));
  // 64-bit keys into a uint32 index: checked by value, never two 4-byte keys per row.
  await assert.rejects(client.lookup('u32', new BigUint64Array([1n, 2n ** 32n])),
                       dtype(/^keys\[1\]: 4294967296 does not fit a uint32 index key \(0 to 4294967295\)$/));
  await assert.rejects(client.join('u32', new BigInt64Array([1n, -3n])), dtype(/keys\[1\]: -3 does not fit a uint32/));
  await assert.rejects(client.lookup('u64', new Float64Array([1])), dtype(/uint64 keys.*Float64Array/));
  await assert.rejects(client.lookup('u64', [2n ** 64n]), dtype(/keys\[0\]: 18446744073709551616 does not fit a uint64 index key/));
  await assert.rejects(client.lookup('u64', [2 ** 60]), dtype(/keys\[0\]: .* safe integer/));
  await assert.rejects(client.buildIndex('bad', new Float64Array([1])), dtype(/Float64Array/));
  await assert.rejects(client.buildIndex('bad', [1, -2]), dtype(/keys\[1\]: -2/));
  await assert.rejects(client.buildIndex('bad', [1], {values: new Float64Array([1])}), dtype(/values: expected a Uint32Array/));
  // Nothing was built by the refused calls.
  assert.deepEqual((await client.list()).map((i) => i.name), ['u32', 'u64']);
});

test('values, masks and payload columns are checked against their type', async () => {
  const keys = new Uint32Array([0, 1]);
  // (A Float64Array aggregates in float64: tests/node/aggregate_typed.test.js.)
  await assert.rejects(client.aggregate(keys, {op: 'sum', groups: 2, values: ['1', 2]}),
                       dtype(/values\[0\]: string is not a number/));
  await assert.rejects(client.aggregate(keys, {op: 'count', groups: 2, mask: [1, -1]}), dtype(/mask\[1\]/));
  await assert.rejects(client.aggregate(new Int32Array([0, -1]), {op: 'count', groups: 2}),
                       dtype(/keys\[1\]: -1 does not fit uint32/));
  await assert.rejects(client.aggregate(new Float32Array([0]), {op: 'count', groups: 2}), dtype(/keys: expected a Uint32Array/));
  const build = (payload) => client.buildIndex('p', keys, {payload});
  await assert.rejects(build({a: {type: 'int32', values: new Float64Array([1, 2])}}), dtype(/"a" \(int32\): expected a Int32Array/));
  await assert.rejects(build({a: {type: 'int32', values: [1, 2 ** 31]}}), dtype(/"a" \(int32\)\[1\]: 2147483648 is not an integer/));
  await assert.rejects(build({a: {type: 'uint32', values: [1, -1]}}), dtype(/\[1\]: -1/));
  await assert.rejects(build({a: {type: 'int64', values: [1n, 2n ** 63n]}}), dtype(/\[1\]: 9223372036854775808 is outside/));
  await assert.rejects(build({a: {type: 'string', values: ['x', 3]}}), dtype(/\[1\]: number is not a string/));
  await assert.rejects(build({a: {type: 'bool', values: [true, 1]}}), dtype(/\[1\]: number is not a boolean/));
  await assert.rejects(build({a: {type: 'decimal', values: [1, 2]}}), dtype(/unknown type "decimal"/));
  await assert.rejects(build({a: [null, null]}), dtype(/cannot infer a type/));
  await assert.rejects(build({a: new Float32Array(3)}), (e) => e instanceof gj.InvalidArgumentError && /3 rows but keys has 2/.test(e.message));
  await assert.rejects(client.buildIndex('p', [1, 2], {values: [1]}), /values has 1 rows but keys has 2/);
  await assert.rejects(client.lookup('u32', [1], {batchRows: 0}), gj.InvalidArgumentError);
});

test('server statuses become GpujoinError subclasses with the server message', async () => {
  await assert.rejects(client.lookup('nope', [1]), (e) => {
    assert.ok(e instanceof gj.NotFoundError);
    assert.equal(e.code, 5);
    assert.equal(e.codeName, 'NOT_FOUND');
    assert.equal(e.message, 'index "nope" not found');
    return true;
  });
  await assert.rejects(client.buildIndex('bad name', [1]), (e) => {
    assert.ok(e instanceof gj.InvalidArgumentError && !(e instanceof gj.DtypeError));
    assert.match(e.message, /^spec\.name: index name has character 0x20 at position 3/);
    return true;
  });
  await assert.rejects(client.buildIndex('cap', [1], {capacity: 1000}), (e) => e instanceof gj.InvalidArgumentError && /^spec: capacity must be a power of two between 1 and 2\^31, got 1000$/.test(e.message));
  await assert.rejects(client.buildIndex('cap', [1], {capacity: 2 ** 32 + 16}), (e) => e instanceof gj.InvalidArgumentError && /4294967312 does not fit in 32 bits/.test(e.message));
  // An in-band batch error names its batch; the message is the server's.
  await assert.rejects(client.join('u32', [1], {select: ['x']}), (e) => {
    assert.ok(e instanceof gj.InvalidArgumentError);
    assert.equal(e.batchId, 0);
    assert.match(e.message, /select\[0\]: index "u32" has no payload column "x"/);
    return true;
  });
  // A call aborted by its AbortSignal is cancelled.
  const ac = new AbortController();
  ac.abort();
  await assert.rejects(client.lookup('u32', [1], {signal: ac.signal}), gj.CancelledError);
  // A deadline that passes while a 1M-key lookup is being sent.
  await assert.rejects(client.lookup('u32', new Uint32Array(1 << 20), {deadlineMs: 1}), gj.DeadlineExceededError);
  // A server that is not there.
  const gone = new Client('127.0.0.1:1');
  await assert.rejects(gone.serverInfo(), gj.UnavailableError);
  gone.close();
});

test('TLS with a bearer token; a missing or wrong token is UnauthenticatedError', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpujoin_node_tls_'));
  const token = path.join(dir, 'token');
  fs.writeFileSync(token, 's3cret\n');
  const data = path.join(REPO, 'tests', 'server', 'testdata');
  const tls = await startServer([`--tls-cert=${data}/server.pem`, `--tls-key=${data}/server.key`,
                                 `--auth-token-file=${token}`]);
  const port = tls.address.split(':').pop();
  const ca = fs.readFileSync(path.join(data, 'server.pem'));
  try {
    const good = new Client(`localhost:${port}`, {tls: {ca}, token: 's3cret'});
    await good.buildIndex('t', [5, 6]);
    assert.deepEqual(Array.from((await good.lookup('t', [6, 7])).found), [1, 0]);
    good.close();
    // The CA as a file, and the name checked against the certificate set explicitly.
    const byFile = new Client(`127.0.0.1:${port}`, {tls: {caFile: path.join(data, 'server.pem'), serverName: 'localhost'}, token: 's3cret'});
    assert.equal((await byFile.describe('t')).rows, 2);
    byFile.close();
    for (const opts of [{tls: {ca}}, {tls: {ca}, token: 'wrong'}]) {
      const bad = new Client(`localhost:${port}`, opts);
      await assert.rejects(bad.serverInfo(), (e) => e instanceof gj.UnauthenticatedError && e.code === 16);
      bad.close();
    }
    const plain = new Client(`localhost:${port}`, {token: 's3cret'});
    await assert.rejects(plain.serverInfo(), gj.UnavailableError);
    plain.close();
  } finally {
    assert.equal(await tls.stop(), 0, tls.log());
    fs.rmSync(dir, {recursive: true, force: true});
  }
});

const OPENSSL_CNF = `[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
[client_ext]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
`;

// ca, server (localhost), client (signed by ca) and rogue (signed by rogue-ca)
// .pem/.key in `dir`, made with the openssl command line as
// tests/server/tls_integration_test.cpp does.
function makeCertificates(dir) {
  const cnf = path.join(dir, 'openssl.cnf');
  fs.writeFileSync(cnf, OPENSSL_CNF);
  const run = (...args) => execFileSync('openssl', args, {stdio: 'pipe', timeout: 30000});
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  const f = (name) => path.join(dir, name);
  for (const ca of ['ca', 'rogue-ca']) {
    run('req', '-x509', '-new', ...ec, '-keyout', f(`${ca}.key`), '-out', f(`${ca}.pem`), '-days', '30',
        '-subj', `/CN=gpujoin node ${ca}`, '-config', cnf, '-extensions', 'ca_ext');
  }
  [['server', 'ca', 'server_ext'], ['client', 'ca', 'client_ext'], ['rogue', 'rogue-ca', 'client_ext']]
    .forEach(([name, ca, ext], i) => {
      run('req', '-new', ...ec, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${name}`,
          '-config', cnf);
      run('x509', '-req', '-in', f(`${name}.csr`), '-CA', f(`${ca}.pem`), '-CAkey', f(`${ca}.key`),
          '-set_serial', String(i + 2), '-days', '30', '-out', f(`${name}.pem`), '-extfile', cnf, '-extensions', ext);
    });
}

test('mutual TLS: a client certificate of the CA works, none or another CA\'s is refused', async (t) => {
  try {
    execFileSync('openssl', ['version'], {stdio: 'pipe'});
  } catch {
    t.skip('the openssl command line makes the test certificates; install openssl');
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpujoin_node_mtls_'));
  makeCertificates(dir);
  const f = (name) => path.join(dir, name);
  const mtls = await startServer([`--tls-cert=${f('server.pem')}`, `--tls-key=${f('server.key')}`,
                                  `--tls-client-ca=${f('ca.pem')}`]);
  const port = mtls.address.split(':').pop();
  try {
    const good = new Client(`localhost:${port}`, {tls: {caFile: f('ca.pem'), certFile: f('client.pem'), keyFile: f('client.key')}});
    assert.equal((await good.serverInfo()).backend, 'cpu');
    await good.buildIndex('m', [1]);
    good.close();
    const inMemory = new Client(`localhost:${port}`, {tls: {ca: fs.readFileSync(f('ca.pem')),
                                                            cert: fs.readFileSync(f('client.pem')), key: fs.readFileSync(f('client.key'))}});
    assert.deepEqual((await inMemory.list()).map((i) => i.name), ['m']);
    inMemory.close();
    for (const tls of [{caFile: f('ca.pem')}, {caFile: f('ca.pem'), certFile: f('rogue.pem'), keyFile: f('rogue.key')}]) {
      const refused = new Client(`localhost:${port}`, {tls});
      await assert.rejects(refused.serverInfo(), gj.UnavailableError);
      refused.close();
    }
    assert.throws(() => new Client(`localhost:${port}`, {tls: {caFile: f('missing.pem')}}), gj.NotFoundError);
  } finally {
    assert.equal(await mtls.stop(), 0, mtls.log());
    fs.rmSync(dir, {recursive: true, force: true});
  }
});
