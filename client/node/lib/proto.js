'use strict';
// Loads gpujoin.v1 from the .proto file at runtime with @grpc/proto-loader. The
// published package carries a copy in ./proto (scripts/copy-proto.js, run by
// `npm pack`); inside the repository the package reads the repository's proto/
// directly, so the two can never drift.
const fs = require('node:fs');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const RELATIVE = path.join('gpujoin', 'v1', 'gpujoin.proto');

/** The directory holding gpujoin/v1/gpujoin.proto: the package's copy, else the repository's. */
function protoRoot() {
  const candidates = [path.join(__dirname, '..', 'proto'), path.join(__dirname, '..', '..', '..', 'proto')];
  for (const dir of candidates) {
    if (fs.existsSync(path.join(dir, RELATIVE))) return dir;
  }
  throw new Error(`@gpujoin/client: ${RELATIVE} not found in ${candidates.join(' or ')}`);
}

let cached = null;

/** {GpuJoin: the service client constructor, root: the proto root directory}. */
function load() {
  if (cached) return cached;
  const root = protoRoot();
  const definition = protoLoader.loadSync(RELATIVE, {
    includeDirs: [root],
    keepCase: true,      // field names as in the .proto (the request objects below use them)
    longs: Number,       // counts and ids stay far below 2^53
    enums: String,       // enum values decode to their names
    defaults: true,      // absent fields decode to their defaults (empty Buffers, 0, false)
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(definition);
  cached = {GpuJoin: pkg.gpujoin.v1.GpuJoin, root};
  return cached;
}

module.exports = {load, protoRoot};
