'use strict';
// Starts a real gpujoind (CPU backend) on free loopback ports for the Node
// client tests and stops it again. The binary comes from $GPUJOIND (CTest sets
// it to the gpujoind target), else build/bin/gpujoind.
const {spawn} = require('node:child_process');
const path = require('node:path');
const nodeTest = require('node:test');

const REPO = path.join(__dirname, '..', '..');
const CLIENT = path.join(REPO, 'client', 'node');
const BINARY = process.env.GPUJOIND || path.join(REPO, 'build', 'bin', 'gpujoind');
/** The deadline of every call of a test Client made without its own deadlineMs. */
const CALL_DEADLINE_MS = 30000;
/** How long one test (or a before/after hook of useServer) may run. */
const TEST_TIMEOUT_MS = 60000;

/**
 * node:test's test() with a default `timeout` of TEST_TIMEOUT_MS, so that a test
 * that hangs fails by itself and the file goes on (a test passes its own
 * `timeout` to change it). Every test file takes `test` from here.
 */
function test(name, options, fn) {
  if (typeof options === 'function') [fn, options] = [options, {}];
  return nodeTest(name, {timeout: TEST_TIMEOUT_MS, ...options}, fn);
}
test.before = (fn, options = {}) => nodeTest.before(fn, {timeout: TEST_TIMEOUT_MS, ...options});
test.after = (fn, options = {}) => nodeTest.after(fn, {timeout: TEST_TIMEOUT_MS, ...options});

/**
 * The package's Client with a default per-call deadline, so that a stream the
 * server never answers fails with DeadlineExceededError naming the call
 * instead of waiting until the test runner's timeout.
 */
class Client extends require(CLIENT).Client {
  constructor(target, options = {}) {
    super(target, {deadlineMs: CALL_DEADLINE_MS, ...options});
  }
}

/** Resolves to {address, log(), stop(), kill()} once gpujoind logs its ready line (20 s at most). */
function startServer(extra = []) {
  const proc = spawn(BINARY, ['--listen=127.0.0.1:0', '--metrics-listen=none', '--backend=cpu',
                              '--cpu-threads=2', '--executor-threads=2', ...extra],
                     {stdio: ['ignore', 'pipe', 'pipe']});
  const lines = [];
  let ready = false;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`gpujoind did not become ready in 20 s:\n${lines.join('')}`));
    }, 20000);
    const onData = (chunk) => {
      lines.push(chunk.toString());
      const m = ready ? null : /gpujoind ready: grpc=(\S+)/.exec(lines.join(''));
      if (m) {
        ready = true;
        clearTimeout(timer);
        resolve({
          address: m[1],
          log: () => lines.join(''),
          stop: () => new Promise((done) => {
            if (proc.exitCode !== null || proc.signalCode !== null) return done(proc.exitCode);
            proc.once('exit', (code) => done(code));
            proc.kill('SIGTERM');
          }),
          /** SIGKILL, for a server whose drain cannot finish; resolves once it exited. */
          kill: () => new Promise((done) => {
            if (proc.exitCode !== null || proc.signalCode !== null) return done();
            proc.once('exit', () => done());
            proc.kill('SIGKILL');
          }),
        });
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.once('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`cannot start ${BINARY}: ${e.message}`));
    });
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`gpujoind exited (${code ?? signal}) before it was ready:\n${lines.join('')}`));
    });
  });
}

/** A deterministic pseudo-random generator (xorshift32) so failures reproduce. */
function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

/**
 * The fixture of a test file that shares one gpujoind and one Client: node:test
 * `before` starts the server, connects, and calls `ready(server, client)` (which
 * keeps them and may build the file's indexes); `after` closes the client and
 * checks that the server stopped cleanly (exit 0, else its log).
 */
function useServer(test, ready, extra = []) {
  let server;
  let client;
  test.before(async () => {
    server = await startServer(extra);
    client = new Client(server.address);
    await ready(server, client);
  });
  test.after(async () => {
    if (client) client.close();
    if (server) require('node:assert/strict').equal(await server.stop(), 0, server.log());
  });
}

module.exports = {test, startServer, useServer, rng, Client, CLIENT, REPO};
