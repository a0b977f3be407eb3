'use strict';
// `npm pack` / `npm publish` (prepack): copies the repository's proto/gpujoin
// into the package so that the published package carries the API it loads at
// runtime; postpack (`--clean`) removes the copy again, so that inside the
// repository the package always reads ../../proto.
const fs = require('node:fs');
const path = require('node:path');

const pkg = path.join(__dirname, '..');
const target = path.join(pkg, 'proto');
const source = path.join(pkg, '..', '..', 'proto', 'gpujoin');

if (process.argv.includes('--clean')) {
  fs.rmSync(target, {recursive: true, force: true});
} else {
  if (!fs.existsSync(source)) {
    console.error(`copy-proto: ${source} not found (run inside the gpujoin repository)`);
    process.exit(1);
  }
  fs.rmSync(target, {recursive: true, force: true});
  fs.cpSync(source, path.join(target, 'gpujoin'), {recursive: true});
}
