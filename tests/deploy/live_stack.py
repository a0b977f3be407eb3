#!/usr/bin/env python3
"""Live deployment checks against a real gpujoind (CPU backend) and Prometheus.

  live_stack.py metrics --gpujoind BIN --promtool BIN [--gpujoin CLI] --source-dir DIR
      Starts gpujoind with the Dockerfile's CMD flags (listen addresses moved
      to free loopback ports, CPU backend) and scrapes /metrics before any
      request: every dashboard and alert metric without an `index` label must
      be there already, the per-RPC families with a zero-valued series for
      every RPC of the proto's service, and gpujoin_build_info must name the
      binary's version. Then runs gpujoin_workload.py over gRPC, fetches
      /metrics again and checks that every metric used by the Grafana
      dashboards and the alert rules is in it. `promtool check metrics` (the
      exposition linter: names, suffixes, help, types) must pass on both
      scrapes. With --gpujoin, also runs the Dockerfile's HEALTHCHECK command
      against the server.
  live_stack.py scrape --gpujoind BIN --prometheus BIN --promtool BIN ...
      The same with the compose file's gpujoind-cpu flags, plus a real
      Prometheus with a test copy of deploy/prometheus/prometheus.yml (target
      rewritten to the test's metrics port, 1 s intervals, temp storage).
      Queries the HTTP API until a gpujoin_ series of the workload's index
      appears, checks that every alert rule loads and evaluates without error,
      that the overflow alert goes pending for the index the workload
      overflowed, and that every dashboard query (Grafana variables expanded)
      runs and returns data.

Every process runs in a temp dir with its own log, is bounded by --timeout and
is stopped in a `finally`, also when a check fails or the test is interrupted.
"""

import argparse
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import deploy_lint  # noqa: E402
import gpujoin_workload  # noqa: E402


def log(msg):
    print(msg, flush=True)


def _die_with_parent():
    """In the child before exec: SIGKILL it when this test process dies, so that
    a test killed by ctest's timeout leaves no server behind (Linux prctl).
    Processes are started before any gRPC channel exists, so no other thread
    runs here."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=3):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


class Processes:
    """Starts processes in their own process groups and always stops them."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.procs = []

    def start(self, name, argv):
        path = os.path.join(self.workdir, f"{name}.log")
        f = open(path, "w")
        log(f"starting {name}: {' '.join(argv)}")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=self.workdir,
                             start_new_session=True, preexec_fn=_die_with_parent)
        self.procs.append((name, p, path, f))
        return p

    def check_alive(self):
        for name, p, path, _ in self.procs:
            if p.poll() is not None:
                raise AssertionError(f"{name} exited early with status {p.returncode}; log:\n{self.tail(path)}")

    @staticmethod
    def tail(path, lines=40):
        try:
            with open(path) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop_all(self, show_logs):
        for name, p, path, f in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    log(f"{name} ignored SIGTERM for 5 s; killing it")
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait(timeout=10)
            f.close()
            if show_logs:
                log(f"--- {name} log (last lines) ---\n{self.tail(path)}")
        self.procs = []


def wait_until(what, fn, timeout_s, procs, interval=0.25):
    """Calls fn() until it returns a truthy value; AssertionError after timeout_s."""
    deadline = time.monotonic() + timeout_s
    last_err = None
    while time.monotonic() < deadline:
        procs.check_alive()
        try:
            v = fn()
            if v:
                return v
        except (OSError, urllib.error.URLError, ValueError, KeyError) as e:
            last_err = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}"
                         + (f" (last error: {last_err})" if last_err else ""))


def deployed_flags(args):
    """gpujoind's flags as deployed: the Dockerfile's CMD (metrics mode) or the
    compose file's gpujoind-cpu command (scrape mode), ${VAR:-default} expanded."""
    if args.mode == "metrics":
        with open(os.path.join(args.source_dir, "Dockerfile")) as f:
            m = re.search(r"^CMD (\[.*\])\s*$", f.read(), re.M)
        if not m:
            raise AssertionError("Dockerfile: no exec-form CMD [...] line")
        return "Dockerfile CMD", json.loads(m.group(1))
    with open(os.path.join(args.source_dir, "deploy", "docker-compose.yml")) as f:
        compose = yaml.safe_load(f)
    cmd = compose["services"]["gpujoind-cpu"]["command"]
    return "docker-compose gpujoind-cpu command", [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", c) for c in cmd]


def start_server(args, procs, workdir):
    """Starts gpujoind with the deployed flags, listen addresses moved to free
    loopback ports and the CPU backend; returns (grpc address, metrics port, URL)."""
    grpc_port, metrics_port = free_port(), free_port()
    origin, flags = deployed_flags(args)
    argv = [args.gpujoind]
    for flag in flags:
        name = flag.split("=", 1)[0]
        if name == "--listen":
            flag = f"--listen=127.0.0.1:{grpc_port}"
        elif name == "--metrics-listen":
            flag = f"--metrics-listen=127.0.0.1:{metrics_port}"
        elif name == "--backend":
            flag = "--backend=cpu"
        elif name == "--data-dir":
            # The deployed volume's path, moved into this run's own directory.
            flag = f"--data-dir={os.path.join(workdir, 'data')}"
        argv.append(flag)
    if not any(a.startswith("--listen=") for a in argv) or not any(a.startswith("--metrics-listen=") for a in argv):
        raise AssertionError(f"{origin} {flags} must set --listen and --metrics-listen")
    # Gentle on a 2-core CI machine; a short drain keeps the shutdown quick.
    argv += ["--cpu-threads=2", "--executor-threads=2", "--drain-timeout=2"]
    log(f"gpujoind flags from the {origin}: {' '.join(flags)}")
    procs.start("gpujoind", argv)
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    serving = re.compile(r"^gpujoin_serving(\{[^}]*\})? 1(\.0*)?(e\+0+)?\s*$", re.M)
    wait_until("gpujoind /metrics with gpujoin_serving 1",
               lambda: serving.search(http_get(metrics_url)), 20, procs)
    return f"127.0.0.1:{grpc_port}", metrics_port, metrics_url


def check_healthcheck(args, address, fails):
    """Runs the Dockerfile's HEALTHCHECK command (gpujoin ... health) against the test server."""
    with open(os.path.join(args.source_dir, "Dockerfile")) as f:
        lines = [line for line in f.read().splitlines() if not line.lstrip().startswith("#")]
    logical = re.sub(r"\\\n", " ", "\n".join(lines))
    m = re.search(r"^HEALTHCHECK .*\bCMD (\[.*\])\s*$", logical, re.M)
    if not m:
        fails.add("Dockerfile: HEALTHCHECK has no exec-form CMD [...]")
        return
    cmd = [args.gpujoin if i == 0 else a.replace("127.0.0.1:50051", address)
           for i, a in enumerate(json.loads(m.group(1)))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    log(f"HEALTHCHECK {' '.join(cmd)}: exit {r.returncode}, {r.stdout.strip()}")
    if r.returncode != 0 or r.stdout.strip() != "SERVING":
        fails.add(f"HEALTHCHECK command {cmd} exited {r.returncode}: {r.stdout}{r.stderr}")


def run_workload(args, address, workdir):
    stubs = os.path.join(workdir, "stubs")
    os.makedirs(stubs)
    pb2, pb2_grpc = gpujoin_workload.generate_stubs(os.path.join(args.source_dir, "proto"), stubs)
    w = gpujoin_workload.Workload(address, pb2, pb2_grpc, log=log)
    try:
        w.run()
    finally:
        w.close()


def parse_exposition(text):
    """[(sample name, {label: value}, value)] of a Prometheus text exposition."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)", line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def proto_rpcs(src):
    """The RPC names of the GpuJoin service in proto/gpujoin/v1/gpujoin.proto."""
    with open(os.path.join(src, "proto", "gpujoin", "v1", "gpujoin.proto")) as f:
        return re.findall(r"^\s*rpc\s+(\w+)\s*\(", f.read(), re.M)


# Families with an `rpc` label whose series exist for every RPC from start-up.
PER_RPC_FAMILIES = ("gpujoin_rpc_batches_total", "gpujoin_rpc_rows_total",
                    "gpujoin_rpc_duration_seconds_count", "gpujoin_rpc_errors_total")


def check_startup_metrics(args, metrics_text, fails):
    """The scrape before any request: no dashboard panel or alert may find "No data"
    for a metric that has no per-index label, and counters start at 0."""
    known = deploy_lint.exposition_names(metrics_text)
    checked = 0
    for where, expr in deploy_lint.dashboard_expressions(args.source_dir) + \
            deploy_lint.alert_expressions(args.source_dir):
        for n in deploy_lint.metric_names(expr):
            if n in deploy_lint.SCRAPE_SERIES or n.startswith(deploy_lint.PER_INDEX_PREFIXES):
                continue
            checked += 1
            if n not in known and re.sub(r"_(bucket|sum|count)$", "", n) not in known:
                fails.add(f"{where}: {n} is not in /metrics at start-up (the panel or alert sees no data)")
    samples = parse_exposition(metrics_text)
    rpcs = proto_rpcs(args.source_dir)
    for family in PER_RPC_FAMILIES:
        values = {}
        for name, labels, value in samples:
            if name == family:
                values.setdefault(labels.get("rpc"), []).append(value)
        for rpc in rpcs:
            if rpc not in values:
                fails.add(f'/metrics at start-up has no {family}{{rpc="{rpc}"}} series')
            elif any(v != 0 for v in values[rpc]):
                fails.add(f'{family}{{rpc="{rpc}"}} is {values[rpc]} before any request, want 0')
    log(f"start-up scrape: {checked} dashboard/alert references and {len(PER_RPC_FAMILIES)} "
        f"per-RPC families x {len(rpcs)} RPCs checked")


def check_build_info(args, metrics_text, fails):
    """gpujoin_build_info: one series, value 1, version of `gpujoind --version`, backend cpu,
    device as in gpujoin_backend_info."""
    r = subprocess.run([args.gpujoind, "--version"], capture_output=True, text=True, timeout=10)
    m = re.match(r"gpujoind (\S+)", r.stdout)
    if r.returncode != 0 or not m:
        fails.add(f"gpujoind --version printed {r.stdout!r} (exit {r.returncode})")
        return
    samples = parse_exposition(metrics_text)
    info = [(labels, v) for name, labels, v in samples if name == "gpujoin_build_info"]
    backend = [labels for name, labels, v in samples if name == "gpujoin_backend_info"]
    want = {"version": m.group(1), "backend": "cpu",
            "device": backend[0].get("device") if backend else "(no gpujoin_backend_info)"}
    if len(info) != 1 or info[0][0] != want or info[0][1] != 1:
        fails.add(f"gpujoin_build_info is {info}, want one series {want} = 1")
    else:
        log(f"gpujoin_build_info{want} = 1")


def promtool_check_metrics(args, metrics_text, when, fails):
    """`promtool check metrics`: Prometheus' own lint of an exposition (for example a
    gauge ending in `_count`, a counter without `_total`, a family without help)."""
    r = subprocess.run([args.promtool, "check", "metrics"], input=metrics_text,
                       capture_output=True, text=True, timeout=20)
    out = (r.stdout + r.stderr).strip()
    if r.returncode != 0 or out:
        fails.add(f"promtool check metrics on the {when} scrape: exit {r.returncode}: {out}")
    else:
        log(f"promtool check metrics: the {when} scrape passes ({len(metrics_text.splitlines())} lines)")


def check_metrics(args, metrics_text):
    known = deploy_lint.exposition_names(metrics_text)
    gpujoin_names = sorted(n for n in known if n.startswith("gpujoin_"))
    log(f"/metrics after the workload: {len(gpujoin_names)} gpujoin_ sample names")
    fails = deploy_lint.Failures()
    n = deploy_lint.check_metrics_exist(args.source_dir, known, fails, "gpujoind's /metrics output")
    log(f"checked {n} metric references of dashboards and alert rules")
    # The workload's own index must be there with its label.
    want = f'gpujoin_index_load_factor{{index="{gpujoin_workload.SENSORS}"}}'
    if f'index="{gpujoin_workload.SENSORS}"' not in metrics_text:
        fails.add(f"/metrics has no series for the workload's index ({want})")
    # Its builds counter has a series for every result from its first build.
    results = {labels.get("result") for name, labels, _ in parse_exposition(metrics_text)
               if name == "gpujoin_index_builds_total" and labels.get("index") == gpujoin_workload.SENSORS}
    want_results = {"ok", "invalid_argument", "resource_exhausted", "already_exists", "cancelled", "error"}
    if results != want_results:
        fails.add(f"gpujoin_index_builds_total{{index=\"{gpujoin_workload.SENSORS}\"}} has results "
                  f"{sorted(results)}, want {sorted(want_results)}")
    if f'index="{gpujoin_workload.DROPPED}"' in metrics_text:
        fails.add(f"/metrics still has series of the dropped index {gpujoin_workload.DROPPED}")
    # Not a failure: metrics the server exports that the operations guide does not describe.
    documented = deploy_lint.documented_metrics(args.source_dir)
    undocumented = [n for n in gpujoin_names
                    if n not in documented and re.sub(r"_(bucket|sum|count)$", "", n) not in documented]
    if undocumented:
        log(f"note: not described in docs/operations.md: {', '.join(undocumented)}")
    return fails


def prometheus_config(args, metrics_port, prom_port, workdir):
    """A test copy of deploy/prometheus/prometheus.yml pointing at the test server."""
    src = os.path.join(args.source_dir, "deploy", "prometheus", "prometheus.yml")
    with open(src) as f:
        cfg = yaml.safe_load(f)
    cfg["global"]["scrape_interval"] = "1s"
    cfg["global"]["evaluation_interval"] = "1s"
    rules_dir = os.path.join(args.source_dir, "deploy", "prometheus")
    cfg["rule_files"] = [os.path.join(rules_dir, r) for r in cfg.get("rule_files", [])]
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    if "gpujoind" not in jobs:
        raise AssertionError(f"{src}: no scrape job named gpujoind")
    job = jobs["gpujoind"]
    job["scrape_interval"] = "1s"
    job["scrape_timeout"] = "1s"
    for sc in job["static_configs"]:
        sc["targets"] = [f"127.0.0.1:{metrics_port}"]
    if "prometheus" in jobs:
        for sc in jobs["prometheus"]["static_configs"]:
            sc["targets"] = [f"127.0.0.1:{prom_port}"]
    path = os.path.join(workdir, "prometheus.yml")
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    return path


def prom_query(base, expr):
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        body = http_get(url)
    except urllib.error.HTTPError as e:  # 400 for a bad expression: keep Prometheus' error text
        body = e.read().decode()
    return json.loads(body)


def start_prometheus(args, metrics_port, procs, workdir):
    """Starts Prometheus on the test copy of the config; returns its base URL."""
    prom_port = free_port()
    config = prometheus_config(args, metrics_port, prom_port, workdir)
    check = subprocess.run([args.promtool, "check", "config", config], capture_output=True, text=True)
    if check.returncode != 0:
        raise AssertionError(f"promtool rejects the test config:\n{check.stdout}{check.stderr}")
    procs.start("prometheus", [args.prometheus, f"--config.file={config}",
                               f"--storage.tsdb.path={os.path.join(workdir, 'tsdb')}",
                               f"--web.listen-address=127.0.0.1:{prom_port}",
                               "--storage.tsdb.retention.time=1h", "--log.level=warn"])
    base = f"http://127.0.0.1:{prom_port}"
    wait_until("Prometheus ready", lambda: "Ready" in http_get(f"{base}/-/ready"), 30, procs)
    return base


def scrape_checks(args, base, procs, fails):
    """Prometheus-side checks after the workload; problems go to `fails`."""
    # The workload's series, through the query API.
    series = f'gpujoin_query_rows_total{{job="gpujoind",index="{gpujoin_workload.SENSORS}",op="lookup"}}'

    def workload_series():
        r = prom_query(base, series)
        return r["data"]["result"] if r.get("status") == "success" and r["data"]["result"] else None

    found = wait_until(f"Prometheus to return {series}", workload_series, 30, procs)
    log(f"Prometheus has {series} = {found[0]['value'][1]}")
    if float(found[0]["value"][1]) <= 0:
        fails.add(f"{series} is {found[0]['value'][1]}, the workload looked keys up")
    up = prom_query(base, 'up{job="gpujoind"}')["data"]["result"]
    if not up or up[0]["value"][1] != "1":
        fails.add(f'up{{job="gpujoind"}} is {up}, want 1')

    # Rules: loaded from the repository's file and evaluated without error.
    def rules_evaluated():
        r = json.loads(http_get(f"{base}/api/v1/rules"))
        rules = [rule for g in r["data"]["groups"] for rule in g["rules"]]
        # health is "unknown" until a rule's first evaluation.
        return rules if rules and all(rule.get("health") != "unknown" for rule in rules) else None

    rules = wait_until("every alert rule evaluated once", rules_evaluated, 20, procs)
    expected = len(deploy_lint.alert_expressions(args.source_dir))
    if len(rules) != expected:
        fails.add(f"Prometheus loaded {len(rules)} rules, the rule files have {expected}")
    for rule in rules:
        if rule.get("health") != "ok":
            fails.add(f"rule {rule.get('name')}: health {rule.get('health')}: {rule.get('lastError')}")
    log(f"{len(rules)} alert rules loaded from the repository and evaluated")

    # The workload overflowed deploy_tight on purpose: the overflow alert must
    # go pending (its `for` is 1m) for that index, from real server data.
    def overflow_alert():
        alerts = json.loads(http_get(f"{base}/api/v1/alerts"))["data"]["alerts"]
        return [a for a in alerts if a["labels"].get("alertname") == "GpujoinIndexOverflowRows"
                and a["labels"].get("index") == gpujoin_workload.TIGHT and a["state"] in ("pending", "firing")]

    try:
        a = wait_until(f"GpujoinIndexOverflowRows pending for index {gpujoin_workload.TIGHT}",
                       overflow_alert, 15, procs)
        log(f"alert {a[0]['labels']['alertname']}{{index={a[0]['labels']['index']}}} is {a[0]['state']}")
    except AssertionError as e:
        fails.add(str(e))

    # Every dashboard query parses, runs on a real Prometheus, and shows data
    # from the workload once a few scrapes give rate() two samples.
    exprs = deploy_lint.dashboard_expressions(args.source_dir)
    state = {"empty": [], "rejected": []}

    def all_queries_have_data():
        state["empty"], state["rejected"] = [], []
        for where, expr in exprs:
            q = deploy_lint.substitute_grafana_vars(expr)
            r = prom_query(base, q)
            if r.get("status") != "success":
                state["rejected"].append(f"{where}: Prometheus rejects {q!r}: {r.get('errorType')}: {r.get('error')}")
            elif not r["data"]["result"]:
                state["empty"].append(f"{where}: no data for {q!r}")
        return not state["empty"] and not state["rejected"]

    try:
        wait_until("every dashboard query to return data", all_queries_have_data, 20, procs, interval=1)
        log(f"all {len(exprs)} dashboard queries (panels and variables) return data from the workload")
    except AssertionError as e:
        fails.add(str(e))
        for m in state["rejected"] + state["empty"]:
            fails.add(m)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["metrics", "scrape"])
    ap.add_argument("--gpujoind", required=True)
    ap.add_argument("--prometheus")
    ap.add_argument("--promtool", required=True)
    ap.add_argument("--gpujoin", help="the CLI, to run the Dockerfile's HEALTHCHECK command")
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--timeout", type=float, default=50, help="seconds for the whole check")
    args = ap.parse_args()
    args.source_dir = os.path.abspath(args.source_dir)
    # Processes run with their temp dir as working directory.
    for attr in ("gpujoind", "prometheus", "promtool", "gpujoin"):
        if getattr(args, attr):
            setattr(args, attr, os.path.abspath(getattr(args, attr)))
    for what, path in (("gpujoind", args.gpujoind), ("promtool", args.promtool),
                       ("prometheus", args.prometheus)):
        if (what != "prometheus" or args.mode == "scrape") and not (path and os.access(path, os.X_OK)):
            log(f"FAIL: {what} binary {path!r} is not an executable file")
            return 1

    # A hard bound on the whole test, whatever hangs: SIGALRM raises here.
    def on_alarm(signum, frame):
        raise TimeoutError(f"live_stack {args.mode}: exceeded {args.timeout:.0f}s")
    signal.signal(signal.SIGALRM, on_alarm)
    def on_term(signum, frame):
        raise KeyboardInterrupt("SIGTERM")
    signal.signal(signal.SIGTERM, on_term)
    signal.alarm(int(args.timeout))

    workdir = tempfile.mkdtemp(prefix=f"gpujoin-deploy-{args.mode}-")
    procs = Processes(workdir)
    ok = False
    try:
        address, metrics_port, metrics_url = start_server(args, procs, workdir)
        startup_text = http_get(metrics_url)
        # Every process starts before the workload opens a gRPC channel (see _die_with_parent).
        prom = start_prometheus(args, metrics_port, procs, workdir) if args.mode == "scrape" else None
        run_workload(args, address, workdir)
        text = http_get(metrics_url)
        fails = check_metrics(args, text)
        check_startup_metrics(args, startup_text, fails)
        check_build_info(args, startup_text, fails)
        promtool_check_metrics(args, startup_text, "start-up", fails)
        promtool_check_metrics(args, text, "after-workload", fails)
        if args.gpujoin:
            check_healthcheck(args, address, fails)
        if args.mode == "scrape":
            scrape_checks(args, prom, procs, fails)
        procs.check_alive()
        ok = fails.report(f"live {args.mode} check") == 0
    except (AssertionError, TimeoutError, RuntimeError, OSError) as e:
        log(f"FAIL: {e}")
    finally:
        signal.alarm(0)
        procs.stop_all(show_logs=not ok)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
