'use strict';
// The package as published: `npm pack` carries the proto it loads at runtime
// (copied by prepack, removed again by postpack), the packed package loads its
// own copy outside the repository, and index.d.ts declares every export.
const assert = require('node:assert/strict');
const {execFileSync} = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {test, CLIENT, REPO} = require('./server');

test('npm pack carries the proto, and the packed package loads its own copy', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpujoin_node_pack_'));
  try {
    const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dir],
                             {cwd: CLIENT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe']});
    const [{filename, files}] = JSON.parse(out);
    const paths = files.map((f) => f.path);
    assert.ok(paths.includes('proto/gpujoin/v1/gpujoin.proto'), paths.join(' '));
    assert.ok(paths.includes('index.d.ts') && paths.includes('lib/client.js'), paths.join(' '));
    assert.ok(!paths.some((p) => p.startsWith('node_modules/')));
    // postpack removed the copy: in the repository the package reads ../../proto.
    assert.equal(fs.existsSync(path.join(CLIENT, 'proto')), false);
    assert.equal(require(CLIENT).protoRoot(), path.join(REPO, 'proto'));
    execFileSync('tar', ['-xzf', path.join(dir, filename), '-C', dir]);
    const pkg = path.join(dir, 'package');
    fs.symlinkSync(path.join(CLIENT, 'node_modules'), path.join(pkg, 'node_modules'));
    const script = 'const c = require(process.argv[1]); require(process.argv[1] + "/lib/proto").load(); ' +
                   'console.log(c.protoRoot())';
    const root = execFileSync(process.execPath, ['-e', script, pkg], {encoding: 'utf8'}).trim();
    assert.equal(root, path.join(pkg, 'proto'));
    const copied = fs.readFileSync(path.join(root, 'gpujoin', 'v1', 'gpujoin.proto'), 'utf8');
    assert.equal(copied, fs.readFileSync(path.join(REPO, 'proto', 'gpujoin', 'v1', 'gpujoin.proto'), 'utf8'));
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
  }
});

test('index.d.ts declares every export of index.js, and ESM imports see them', () => {
  const dts = fs.readFileSync(path.join(CLIENT, 'index.d.ts'), 'utf8');
  const declared = new Set([...dts.matchAll(/^export declare (?:class|const|function) (\w+)/gm)].map((m) => m[1]));
  const exported = Object.keys(require(CLIENT));
  assert.deepEqual([...declared].sort(), [...exported].sort());
  const names = execFileSync(process.execPath, ['--input-type=module', '-e',
    `import * as m from ${JSON.stringify(path.join(CLIENT, 'index.js'))}; console.log(Object.keys(m).join(' '))`],
                             {encoding: 'utf8'}).trim().split(' ').filter((n) => n !== 'default');
  assert.deepEqual(names.sort(), [...exported].sort());
});
