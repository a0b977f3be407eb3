'use strict';
// The snapshot calls of @gpujoin/client against a gpujoind with --data-dir:
// saveIndex and loadIndex of a copy, listFiles, deleteFile, the file-name rules
// and --max-copy-bytes, buildIndex(..., {waitDurable: true}) and
// IndexInfo.durableVersion, each failure rejected as the GpujoinError subclass
// of its gRPC code; and a server without --data-dir refusing them all.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {test, startServer, Client, CLIENT} = require('./server');
const gj = require(CLIENT);

const KEYS = Uint32Array.from({length: 3000}, (_, i) => 1000 + i);
const PROBE = [999, 1000, 1001, 3999, 4000];

/**
 * Runs `body(client, dir)` against a gpujoind with --data-dir=dir (none with
 * {dataDir: false}) and `flags`, then stops it (exit 0, else its log) and
 * removes the directory.
 */
async function withServer(flags, body, {dataDir = true} = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpujoin_node_snap_'));
  const server = await startServer([...(dataDir ? [`--data-dir=${dir}`] : []), ...flags]);
  const client = new Client(server.address);
  try {
    await body(client, dir);
  } finally {
    client.close();
    assert.equal(await server.stop(), 0, server.log());
    fs.rmSync(dir, {recursive: true, force: true});
  }
}

/** An assert.rejects check: an instance of `cls`, a GpujoinError with `code`, a message matching each pattern. */
function fails(cls, code, ...patterns) {
  return (e) => {
    assert.ok(e instanceof cls && e instanceof gj.GpujoinError, `${e.name}: ${e.message}`);
    assert.equal(e.code, code);
    for (const p of patterns) assert.match(e.message, p);
    return true;
  };
}

const size = (dir, file) => fs.statSync(path.join(dir, file)).size;

test('waitDurable resolves with the snapshot written; durableVersion follows', async () => {
  await withServer([], async (c, dir) => {
    const info = await c.buildIndex('dur', KEYS, {waitDurable: true});
    assert.deepEqual([info.version, info.durableVersion], [1, 1]);
    // In place when the call resolves: no waiting.
    assert.ok(fs.statSync(path.join(dir, 'dur.gjsnap')).isFile());
    assert.equal((await c.describe('dur')).durableVersion, 1);
    const again = await c.buildIndex('dur', KEYS.subarray(0, 10), {replace: true, waitDurable: true});
    assert.deepEqual([again.version, again.durableVersion], [2, 2]);
    assert.deepEqual((await c.list()).map((i) => [i.name, i.durableVersion]), [['dur', 2]]);
  });
});

test('saveIndex, listFiles, loadIndex and deleteFile of a copy', async () => {
  await withServer(['--max-copy-bytes=64M'], async (c, dir) => {
    await c.buildIndex('a', KEYS, {waitDurable: true});
    const answers = Array.from((await c.lookup('a', PROBE)).values);
    assert.deepEqual(answers, [gj.NO_MATCH, 0, 1, 2999, gj.NO_MATCH]);

    const saved = await c.saveIndex('a', 'a.bak');
    assert.equal(saved.file, 'a.bak');
    assert.equal(saved.version, 1);
    assert.equal(saved.bytes, size(dir, 'a.bak'));
    assert.equal(typeof saved.bytes, 'number');
    assert.ok(saved.seconds >= 0);
    const own = await c.saveIndex('a');
    assert.deepEqual([own.file, own.bytes], ['a.gjsnap', size(dir, 'a.gjsnap')]);

    const files = await c.listFiles();
    assert.deepEqual(files.map((f) => [f.file, f.bytes, f.index, f.live]),
                     [['a.bak', saved.bytes, '', false], ['a.gjsnap', own.bytes, 'a', true]]);
    assert.equal(typeof files[0].modifiedUnixMillis, 'number');
    assert.ok(Math.abs(files[0].modifiedUnixMillis - Date.now()) < 600e3, String(files[0].modifiedUnixMillis));

    const loaded = await c.loadIndex('b', 'a.bak');
    assert.deepEqual([loaded.name, loaded.version, loaded.rows], ['b', 1, KEYS.length]);
    assert.deepEqual(Array.from((await c.lookup('b', PROBE)).values), answers);
    await assert.rejects(c.loadIndex('b', 'a.bak'), fails(gj.AlreadyExistsError, 6, /"b"/));
    assert.equal((await c.loadIndex('b', 'a.bak', {replace: true})).version, 2);
    await assert.rejects(c.loadIndex('m', 'missing.bak'), fails(gj.NotFoundError, 5, /"missing\.bak"/));

    await assert.rejects(c.deleteFile('a.gjsnap'),
                         fails(gj.FailedPreconditionError, 9, /live index "a"; drop the index/));
    assert.ok(fs.existsSync(path.join(dir, 'a.gjsnap')));
    assert.equal(await c.deleteFile('a.bak'), saved.bytes);
    assert.equal(fs.existsSync(path.join(dir, 'a.bak')), false);
    await assert.rejects(c.deleteFile('a.bak'), (e) => {
      fails(gj.NotFoundError, 5, /"a\.bak"/)(e);
      assert.ok(!e.message.includes(dir), e.message);
      return true;
    });
    // Left: the snapshots of a and of b (written in the background after its load).
    assert.deepEqual((await c.listFiles()).filter((f) => f.file === 'a.bak' || f.index === ''), []);

    // A corrupt copy is a DataLossError and installs nothing.
    await c.saveIndex('a', 'a.bad');
    const raw = fs.readFileSync(path.join(dir, 'a.bad'));
    raw[raw.length >> 1] ^= 0x7f;  // inside the table: a section checksum fails
    fs.writeFileSync(path.join(dir, 'a.bad'), raw);
    await assert.rejects(c.loadIndex('bad', 'a.bad'), fails(gj.DataLossError, 15));
    await assert.rejects(c.describe('bad'), gj.NotFoundError);
  });
});

test('file names that are not copies, and --max-copy-bytes', async () => {
  await withServer(['--max-copy-bytes=100K'], async (c, dir) => {
    await c.buildIndex('a', KEYS, {waitDurable: true});
    await c.buildIndex('o', KEYS.subarray(0, 100), {waitDurable: true});
    const other = size(dir, 'o.gjsnap');
    // Another index's snapshot: a restart would serve a's rows as o.
    await assert.rejects(c.saveIndex('a', 'o.gjsnap'),
                         fails(gj.InvalidArgumentError, 3, /"o\.gjsnap" is the snapshot file of index "o"/, /index "a"/));
    assert.equal(size(dir, 'o.gjsnap'), other);
    for (const name of ['.hidden', 'x.gjsnap.tmp-1-0', '../x.bak', 'a/b']) {
      await assert.rejects(c.saveIndex('a', name), fails(gj.InvalidArgumentError, 3, /file/));
      // DeleteFile takes any plain name (ListFiles lists an operator's files
      // too): these are not there; paths are refused.
      await assert.rejects(c.deleteFile(name), name.includes('/') ? gj.InvalidArgumentError : gj.NotFoundError);
      await assert.rejects(c.loadIndex('z', name), gj.InvalidArgumentError);
    }

    await assert.rejects(c.deleteFile('.a.gjsnap.gjsnap.tmp-1-0'), gj.InvalidArgumentError);

    const first = await c.saveIndex('a', 'a-1.bak');
    assert.ok(first.bytes > 50 * 1024 && first.bytes < 100 * 1024, `copies of over half the limit: ${first.bytes}`);
    await assert.rejects(c.saveIndex('a', 'a-2.bak'), fails(gj.ResourceExhaustedError, 8, /--max-copy-bytes=102400/));
    assert.equal(fs.existsSync(path.join(dir, 'a-2.bak')), false);
    await c.saveIndex('a', 'a-1.bak');  // replacing a copy counts it once
    await c.deleteFile('a-1.bak');
    assert.equal((await c.saveIndex('a', 'a-2.bak')).bytes, first.bytes);
  });
});

test('a failed write rejects waitDurable and the index serves', async () => {
  await withServer(['--max-snapshot-bytes=1K'], async (c, dir) => {
    const e = await c.buildIndex('f', KEYS, {waitDurable: true, deadlineMs: 10000}).then(() => null, (x) => x);
    fails(gj.ResourceExhaustedError, 8, /installed and serving/, /--max-snapshot-bytes/)(e);
    const info = await c.describe('f');
    assert.deepEqual([info.version, info.durableVersion], [1, 0]);
    assert.deepEqual(Array.from((await c.lookup('f', PROBE)).values).slice(1, 3), [0, 1]);
    assert.equal(fs.existsSync(path.join(dir, 'f.gjsnap')), false);
  });
});

test('without --data-dir every file call is a FailedPreconditionError', async () => {
  await withServer([], async (c) => {
    await assert.rejects(c.buildIndex('n', KEYS, {waitDurable: true}),
                         fails(gj.FailedPreconditionError, 9, /spec\.wait_durable/, /--data-dir/));
    await assert.rejects(c.describe('n'), gj.NotFoundError);
    assert.equal((await c.buildIndex('n', KEYS.subarray(0, 3))).durableVersion, 0);
    for (const call of [() => c.listFiles(), () => c.deleteFile('x.bak'), () => c.saveIndex('n'),
                        () => c.loadIndex('n2')]) {
      await assert.rejects(call(), fails(gj.FailedPreconditionError, 9, /--data-dir/));
    }
  }, {dataDir: false});
});
