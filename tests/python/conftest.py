"""pytest fixtures of the Python package tests: real gpujoind processes (CPU
backend unless $GPUJOIN_TEST_BACKEND names another, free loopback ports) and
gpujoin.Client instances against them.

run_package_tests.py (the CTest entry) passes --gpujoind and puts the package
and its generated stubs on sys.path.

Nothing waits forever: every test has a time limit (TEST_TIMEOUT seconds, or
``@pytest.mark.timeout(seconds)``; pytest-timeout's own when that plugin is
installed), so a hang fails that test with every thread's stack instead of
stalling the suite until CTest kills it; and every gpujoin.Client a test makes
without a ``timeout`` gets CALL_TIMEOUT, so a stream the server never answers
fails with DeadlineExceeded naming the call.
"""
import faulthandler
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

TESTDATA = os.path.join(os.path.dirname(__file__), "..", "server", "testdata")
#: Seconds one test may run (GPUJOIN_TEST_TIMEOUT overrides it).
TEST_TIMEOUT = float(os.environ.get("GPUJOIN_TEST_TIMEOUT", "60"))
#: Deadline in seconds of every call of a Client made without a timeout.
CALL_TIMEOUT = 30.0


def pytest_addoption(parser):
    parser.addoption("--gpujoind", default=os.environ.get("GPUJOIND"),
                     help="the gpujoind binary (its backend: $GPUJOIN_TEST_BACKEND, cpu when unset)")


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): this test's time limit "
                            f"(default {TEST_TIMEOUT:g} s)")


class TestTimeout(Exception):
    """A test ran past its time limit."""


@pytest.fixture(autouse=True)
def _time_limit(request):
    """Fails the test that runs past its limit: SIGALRM raises TestTimeout in the
    test's thread (gRPC's blocking reads wake up for signals) after every
    thread's stack is printed. Should the exception never get through (a thread
    stuck in C code), faulthandler ends the process 30 s later, again with the
    stacks, so CTest reports the failure at once."""
    if request.config.pluginmanager.hasplugin("timeout") or not hasattr(signal, "SIGALRM"):
        yield  # pytest-timeout enforces the marker itself
        return
    marker = request.node.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker and marker.args else TEST_TIMEOUT

    def expired(signum, frame):
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        raise TestTimeout(f"{request.node.nodeid} ran past its {limit:g} s limit "
                          "(the stacks of every thread are above)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, limit)
    faulthandler.dump_traceback_later(limit + 30, exit=True)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def _call_deadlines(monkeypatch):
    """Gives every gpujoin.Client made without a timeout a CALL_TIMEOUT deadline."""
    import gpujoin
    init = gpujoin.Client.__init__

    def with_deadline(self, *args, **kwargs):
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = CALL_TIMEOUT
        init(self, *args, **kwargs)

    monkeypatch.setattr(gpujoin.Client, "__init__", with_deadline)


def suite_backend():
    """The backend the suite's gpujoind processes run on: $GPUJOIN_TEST_BACKEND, cpu when unset."""
    return os.environ.get("GPUJOIN_TEST_BACKEND") or "cpu"


class Gpujoind:
    """gpujoind on free ports; its log is collected by a thread so it never blocks."""

    def __init__(self, binary, *extra):
        self.proc = subprocess.Popen(
            [binary, "--listen=127.0.0.1:0", "--metrics-listen=none",
             "--backend=" + suite_backend(),
             "--cpu-threads=2", "--executor-threads=2", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.log = []
        self.ready = threading.Event()
        self.address = None
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(30):
            self.stop(signal.SIGKILL)
            raise RuntimeError("gpujoind did not become ready:\n" + "".join(self.log))

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line)
            m = re.search(r"gpujoind ready: grpc=(\S+)", line)
            if m:
                self.address = m.group(1)
                self.ready.set()
        self.ready.set()  # exited: the wait above sees no address

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(30)


def _binary(config):
    path = config.getoption("--gpujoind")
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"--gpujoind must name the gpujoind binary (got {path!r})")
    return path


@pytest.fixture(scope="session")
def server(pytestconfig):
    """A plaintext gpujoind shared by the tests (each uses its own index names)."""
    s = Gpujoind(_binary(pytestconfig), "--device-memory-limit=2G")
    if s.address is None:
        pytest.fail("gpujoind exited:\n" + "".join(s.log))
    yield s
    assert s.stop() == 0, "".join(s.log)


@pytest.fixture()
def start_gpujoind(pytestconfig):
    """start_gpujoind(*flags): a gpujoind of this test with further flags (ready,
    else the test fails with its log); each is stopped after the test."""
    started = []

    def start(*flags):
        s = Gpujoind(_binary(pytestconfig), *flags)
        started.append(s)
        if s.address is None:
            pytest.fail("gpujoind exited:\n" + "".join(s.log))
        return s

    yield start
    for s in started:
        s.stop()


@pytest.fixture()
def client(server):
    import gpujoin
    with gpujoin.Client(server.address) as c:
        yield c


@pytest.fixture(scope="session")
def small_message_server(pytestconfig):
    """gpujoind with 1 MiB messages and 8 MiB of results per request: joins
    continue over messages, and keep_all batches are cut by --max-result-bytes."""
    s = Gpujoind(_binary(pytestconfig), "--max-message-bytes=1M", "--max-result-bytes=8M")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def secure_server(pytestconfig, tmp_path_factory):
    """gpujoind serving TLS (tests/server/testdata: a self-signed localhost
    certificate) and requiring a bearer token."""
    token = tmp_path_factory.mktemp("auth") / "token"
    token.write_text("s3cret-token\n")
    s = Gpujoind(_binary(pytestconfig), f"--tls-cert={TESTDATA}/server.pem",
                 f"--tls-key={TESTDATA}/server.key", f"--auth-token-file={token}")
    s.token = "s3cret-token"
    s.root = os.path.join(TESTDATA, "server.pem")
    yield s
    s.stop()


_OPENSSL_CNF = """[req]
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
"""


def _make_certificates(d):
    """ca, server (localhost), client (signed by ca) and rogue (signed by
    rogue-ca) .pem/.key in `d`, made with the openssl command line as
    tests/server/tls_integration_test.cpp does."""
    cnf = d / "openssl.cnf"
    cnf.write_text(_OPENSSL_CNF)

    def run(*args):
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=30)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for ca in ("ca", "rogue-ca"):
        run("req", "-x509", "-new", *ec, "-keyout", d / f"{ca}.key", "-out", d / f"{ca}.pem",
            "-days", "30", "-subj", f"/CN=gpujoin python {ca}", "-config", cnf,
            "-extensions", "ca_ext")
    for serial, (name, ca, ext) in enumerate([("server", "ca", "server_ext"),
                                              ("client", "ca", "client_ext"),
                                              ("rogue", "rogue-ca", "client_ext")], start=2):
        run("req", "-new", *ec, "-keyout", d / f"{name}.key", "-out", d / f"{name}.csr",
            "-subj", f"/CN={name}", "-config", cnf)
        run("x509", "-req", "-in", d / f"{name}.csr", "-CA", d / f"{ca}.pem", "-CAkey",
            d / f"{ca}.key", "-set_serial", serial, "-days", "30", "-out", d / f"{name}.pem",
            "-extfile", cnf, "-extensions", ext)
    return d


@pytest.fixture(scope="session")
def mtls_server(pytestconfig, tmp_path_factory):
    """gpujoind requiring a client certificate signed by a test CA (--tls-client-ca)."""
    if not shutil.which("openssl"):
        pytest.skip("the openssl command line makes the test certificates; install openssl")
    certs = _make_certificates(tmp_path_factory.mktemp("mtls"))
    s = Gpujoind(_binary(pytestconfig), f"--tls-cert={certs}/server.pem",
                 f"--tls-key={certs}/server.key", f"--tls-client-ca={certs}/ca.pem")
    s.certs = certs
    yield s
    s.stop()


# gpujoin-router over gpujoind shards (tests/python/test_router.py, test_dask.py).

class Router:
    """gpujoin-router on a free port; its log is collected by a thread."""

    def __init__(self, binary, shards, *extra):
        self.proc = subprocess.Popen(
            [binary, "--listen=127.0.0.1:0", "--metrics-listen=none",
             "--shards=" + ",".join(shards), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.log = []
        self.ready = threading.Event()
        self.address = None
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(30) or self.address is None:
            self.stop(signal.SIGKILL)
            raise RuntimeError("gpujoin-router did not become ready:\n" + "".join(self.log))

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line)
            m = re.search(r"gpujoin-router ready: grpc=(\S+)", line)
            if m:
                self.address = m.group(1)
                self.ready.set()
        self.ready.set()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(30)


def wait_serving(client, want=True, limit=10.0):
    """Waits until `client`'s server reports (grpc.health.v1) SERVING, or with
    want=False anything else."""
    import gpujoin
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if (client.health() == "SERVING") == want:
                return
        except gpujoin.Error:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the router did not report serving={want} within {limit} s")


@pytest.fixture()
def cluster(pytestconfig, start_gpujoind):
    """cluster(n, order=None): n shards (--shard i/n) and a router over them,
    in `order` (a permutation of the shards; default 0..n-1)."""
    routers = []
    binary = os.path.join(os.path.dirname(pytestconfig.getoption("--gpujoind")), "gpujoin-router")
    if not os.access(binary, os.X_OK):
        pytest.fail(f"gpujoin-router is not beside gpujoind ({binary})")

    def start(n, order=None):
        shards = [start_gpujoind(f"--shard={i}/{n}") for i in range(n)]
        order = list(range(n)) if order is None else order
        router = Router(binary, [shards[i].address for i in order])
        routers.append(router)
        return shards, router

    yield start
    for r in routers:
        r.stop()
