#!/usr/bin/env node
'use strict';
// Lookup throughput of the Node client against gpujoin-loadtest, same server, same run.
//
// Builds a uint32 index of --build-keys distinct random keys (load 0.5), looks up
// --keys keys from a Uint32Array (--hit-ratio of them present) with one
// Client.lookup call (batches of --batch-rows, --in-flight unanswered, one
// stream; end to end: describe, dtype check, batches, values and found copied
// out; fastest of --repeats, every answer checked after the timing; also the
// least client CPU time of the repeats), and runs
// gpujoin-loadtest --rpc lookup with the same index size, batch size, one stream
// and in-flight count, alternating for --rounds rounds. Prints a table or --json.
//
//   node client/node/bench/lookup_bench.js --gpujoind build-f/bin/gpujoind \
//       --loadtest build-f/bin/gpujoin-loadtest
const {execFileSync} = require('node:child_process');
const path = require('node:path');
const {parseArgs} = require('node:util');
const {Client, NO_MATCH} = require('..');
const {startServer, rng} = require(path.join(__dirname, '..', '..', '..', 'tests', 'node', 'server.js'));

const {values: a} = parseArgs({options: {
  server: {type: 'string'}, gpujoind: {type: 'string'}, loadtest: {type: 'string'},
  keys: {type: 'string', default: '10000000'}, 'build-keys': {type: 'string', default: String(1 << 20)},
  'batch-rows': {type: 'string', default: '65536'}, 'in-flight': {type: 'string', default: '4'},
  'hit-ratio': {type: 'string', default: '0.9'}, duration: {type: 'string', default: '2'},
  repeats: {type: 'string', default: '3'}, rounds: {type: 'string', default: '5'},
  seed: {type: 'string', default: '1'}, json: {type: 'boolean', default: false},
}});
const n = Number(a.keys);
const buildKeys = Number(a['build-keys']);
const batchRows = Number(a['batch-rows']);
const inFlight = Number(a['in-flight']);
if (!a.loadtest) throw new Error('--loadtest is required');

function loadtest(address) {
  const out = execFileSync(a.loadtest, ['--server', address, '--rpc', 'lookup', '--build-keys', String(buildKeys),
    '--batch-rows', String(batchRows), '--concurrency', '1', '--in-flight', String(inFlight),
    '--duration', a.duration, '--warmup', '0.5', '--hit-ratio', a['hit-ratio'], '--seed', a.seed, '--json'],
  {encoding: 'utf8'});
  const [r] = JSON.parse(out).results;
  if (r.error_count !== 0 || r.wrong_answers !== 0) throw new Error(`loadtest: ${JSON.stringify(r)}`);
  return r.keys_per_second;
}

(async () => {
  let server = null;
  let address = a.server;
  if (!address) {
    if (a.gpujoind) process.env.GPUJOIND = a.gpujoind;
    server = await startServer();
    address = server.address;
  }
  const next = rng(Number(a.seed));
  // Distinct keys below the reserved 0xffffffff, as the loadtest's index.
  const seen = new Map();
  const build = new Uint32Array(buildKeys);
  for (let i = 0; i < buildKeys;) {
    const k = next() % 0xffffffff;
    if (!seen.has(k)) {
      seen.set(k, i);
      build[i++] = k;
    }
  }
  const keys = new Uint32Array(n);
  const hit = Number(a['hit-ratio']);
  for (let i = 0; i < n; ++i) keys[i] = next() / 2 ** 32 < hit ? build[next() % buildKeys] : next() % 0xffffffff;
  // The expected answers, then the Map is dropped: a large JS heap would slow
  // every garbage collection of the timed calls, which is not the client's cost.
  const want = Uint32Array.from(keys, (k) => (seen.has(k) ? seen.get(k) : NO_MATCH));
  seen.clear();
  const client = new Client(address, {maxInflight: inFlight, batchRows});
  const rows = [];
  try {
    await client.buildIndex('node_bench', build, {expectedRows: buildKeys, targetLoadFactor: 0.5, replace: true});
    await client.lookup('node_bench', keys.subarray(0, batchRows * 8));  // warm-up
    for (let round = 0; round < Number(a.rounds); ++round) {
      const lt = loadtest(address);
      let best = Infinity;
      let cpu = Infinity;
      let r;
      for (let i = 0; i < Number(a.repeats); ++i) {
        const t0 = process.hrtime.bigint();
        const u0 = process.cpuUsage();
        r = await client.lookup('node_bench', keys);
        const u = process.cpuUsage(u0);
        best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
        cpu = Math.min(cpu, (u.user + u.system) / 1e6);
      }
      for (let i = 0; i < n; ++i) {
        if (r.values[i] !== want[i] || r.found[i] !== (want[i] === NO_MATCH ? 0 : 1)) throw new Error(`wrong answer at ${i}`);
      }
      rows.push({loadtest_keys_per_second: lt, node_keys_per_second: n / best, ratio: n / best / lt,
                 node_cpu_seconds: cpu});
    }
    await client.drop('node_bench');
  } finally {
    client.close();
    if (server) await server.stop();
  }
  const ratios = rows.map((r) => r.ratio).sort((x, y) => x - y);
  const summary = {rounds: rows, median_ratio: ratios[Math.floor(ratios.length / 2)],
                   best_loadtest_keys_per_second: Math.max(...rows.map((r) => r.loadtest_keys_per_second)),
                   best_node_keys_per_second: Math.max(...rows.map((r) => r.node_keys_per_second))};
  if (a.json) {
    console.log(JSON.stringify(summary, null, 2));
    return;
  }
  console.log(`${'round'.padStart(5)} ${'loadtest Mkeys/s'.padStart(17)} ${'node Mkeys/s'.padStart(13)} ${'ratio'.padStart(6)} ` +
              `${'node CPU s'.padStart(11)}`);
  rows.forEach((r, i) => console.log(`${String(i).padStart(5)} ${(r.loadtest_keys_per_second / 1e6).toFixed(1).padStart(17)} ` +
                                     `${(r.node_keys_per_second / 1e6).toFixed(1).padStart(13)} ${r.ratio.toFixed(2).padStart(6)} ` +
                                     `${r.node_cpu_seconds.toFixed(2).padStart(11)}`));
  console.log(`median ratio ${summary.median_ratio.toFixed(2)}; best ${(summary.best_loadtest_keys_per_second / 1e6).toFixed(1)} ` +
              `(loadtest) vs ${(summary.best_node_keys_per_second / 1e6).toFixed(1)} (node) Mkeys/s`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
