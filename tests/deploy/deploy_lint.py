#!/usr/bin/env python3
"""Static checks of the deployment files (no server, no Docker engine).

  deploy_lint.py dashboards SOURCE_DIR
      Every dashboard under deploy/grafana/dashboards is valid JSON with unique
      panel ids, uses the ${datasource} and index template variables, covers
      the panels the operations guide promises, and every metric its PromQL
      uses (and the alert rules use) is documented in docs/operations.md.
  deploy_lint.py dockerfile SOURCE_DIR [--target NAME=FILE_NAME ...]
      The Dockerfile builds with scripts/build (same CMake options), installs
      scripts/install-deps' development packages, copies exactly the binaries
      scripts/build produces, runs as non-root, listens on 0.0.0.0 and has a
      gRPC health check; --target gives CMake's output file name of each
      executable target that exists.
  deploy_lint.py compose CONFIG_YAML SOURCE_DIR
      The output of `docker-compose config` has the GPU reservation, the CPU
      alternative in its own profile, and mounts files that exist; the
      "sharded" profile's shards, router and Prometheus point at each other
      (shard I of N, the router's --shards, scrape targets, volumes, ports).

The metric-name helpers are shared with live_stack.py, which checks the same
expressions against a live gpujoind's /metrics and a real Prometheus.
"""

import argparse
import json
import os
import re
import sys

import yaml

# Series that Prometheus itself records for each scrape target; they are not
# in gpujoind's /metrics but exist wherever gpujoind is scraped.
SCRAPE_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}

PROMQL_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "bool", "offset", "inf", "nan", "atan2", "topk", "bottomk",
}

# Metric families whose series carry an `index` label: every selector of them
# in a dashboard must filter on the index template variable.
PER_INDEX_PREFIXES = ("gpujoin_index_", "gpujoin_query_", "gpujoin_join_")


class Failures:
    """Collects failures; every message names the file and the object."""

    def __init__(self):
        self.items = []

    def add(self, msg):
        self.items.append(msg)

    def report(self, what):
        if self.items:
            print(f"{what}: {len(self.items)} problem(s):")
            for m in self.items:
                print(f"  FAIL {m}")
            return 1
        print(f"{what}: OK")
        return 0


# ------------------------------------------------------------------ PromQL
def _strip(expr):
    """Removes what is not a metric or function name from a PromQL expression."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)          # string literals
    e = re.sub(r"'(?:[^'\\]|\\.)*'", "''", e)
    e = re.sub(r"\{[^{}]*\}", " ", e)                     # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)                     # range / subquery durations
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    return e


def metric_names(expr):
    """Metric names referenced by a PromQL expression (sorted, unique)."""
    e = _strip(expr)
    names = set()
    for m in re.finditer(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(\s*\()?", e):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in PROMQL_KEYWORDS:
            continue
        names.add(word)
    # __name__ matchers are not used here; `{__name__=...}` would need them.
    return sorted(names)


def selectors(expr):
    """(metric, matcher-text) for each `metric{...}` or bare metric in `expr`."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', lambda m: m.group(0).replace("{", "(").replace("}", ")"), expr)
    out = []
    for m in re.finditer(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^{}]*\})?", e):
        name, matcher = m.group(1), m.group(2) or ""
        if name in metric_names(expr):
            out.append((name, matcher))
    return out


def substitute_grafana_vars(expr):
    """Grafana variables replaced by what they expand to for 'All' over a short range."""
    e = expr.replace("$__rate_interval", "1m").replace("$__interval", "15s").replace("$__range", "1h")
    e = e.replace("${datasource}", "").replace('"$index"', '".*"').replace('"$instance"', '".*"')
    return e


# ------------------------------------------------------------------ sources
def dashboard_files(src):
    d = os.path.join(src, "deploy", "grafana", "dashboards")
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".json"))


def alert_rule_files(src):
    d = os.path.join(src, "deploy", "prometheus", "rules")
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith((".yml", ".yaml")))


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


def dashboard_expressions(src):
    """[(where, expr)] of every PromQL expression in dashboards (targets and variables)."""
    out = []
    for path in dashboard_files(src):
        with open(path) as f:
            dash = json.load(f)
        base = os.path.basename(path)
        for p in all_panels(dash.get("panels", [])):
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((f"{base} panel {p.get('id')} '{p.get('title')}' {t.get('refId')}", t["expr"]))
        for v in dash.get("templating", {}).get("list", []):
            if v.get("type") == "query":
                q = v.get("query")
                q = q.get("query") if isinstance(q, dict) else q
                m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", q or "")
                if m:
                    out.append((f"{base} variable {v['name']}", m.group(1)))
                elif q:
                    out.append((f"{base} variable {v['name']}", q))
    return out


def alert_expressions(src):
    out = []
    for path in alert_rule_files(src):
        with open(path) as f:
            doc = yaml.safe_load(f)
        for g in doc.get("groups", []):
            for r in g.get("rules", []):
                name = r.get("alert") or r.get("record")
                out.append((f"{os.path.basename(path)} {g['name']}/{name}", r["expr"]))
    return out


def documented_metrics(src):
    """Metric names in the metrics reference of docs/operations.md (`gpujoin_...` in backticks)."""
    with open(os.path.join(src, "docs", "operations.md")) as f:
        text = f.read()
    return set(re.findall(r"`(gpujoin_[a-z0-9_]+)", text))


def exposition_names(text):
    """Sample names in a Prometheus text exposition (histograms give _bucket/_sum/_count)."""
    names = set()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)", line)
        if m:
            names.add(m.group(1))
    return names


def check_metrics_exist(src, known, fails, what):
    """Every metric in dashboards and alert rules must be in `known` (or a scrape series).

    A histogram's `_bucket`, `_sum` and `_count` series count as known when
    the histogram's name is (the /metrics text lists them literally anyway).
    """
    checked = 0
    for where, expr in dashboard_expressions(src) + alert_expressions(src):
        names = metric_names(expr)
        if not names:
            fails.add(f"{where}: no metric name found in expression {expr!r}")
        for n in names:
            checked += 1
            if n in SCRAPE_SERIES:
                continue
            base = re.sub(r"_(bucket|sum|count)$", "", n)
            if n not in known and base not in known:
                fails.add(f"{where}: metric {n} is not in {what}")
    return checked


# ------------------------------------------------------------------ dashboards
REQUIRED = {
    "gpujoin-probe-health.json": [
        "gpujoin_index_load_factor", "gpujoin_query_probes_total", "gpujoin_query_rows_total",
        "gpujoin_query_max_probes", "gpujoin_index_probe_bound", "gpujoin_index_overflow_rows",
        "gpujoin_index_duplicate_rows", "gpujoin_index_invalid_rows", "gpujoin_query_found_total",
        "gpujoin_index_builds_total",
    ],
    "gpujoin-service.json": [
        "gpujoin_rpc_batches_total", "gpujoin_rpc_rows_total", "gpujoin_rpc_duration_seconds_bucket",
        "gpujoin_rpc_errors_total", "gpujoin_inflight_batches", "gpujoin_device_memory_used_bytes",
        "gpujoin_device_memory_budget_bytes", "gpujoin_device_memory_total_bytes", "gpujoin_build_info",
    ],
}


def lint_dashboards(src):
    fails = Failures()
    files = dashboard_files(src)
    if not files:
        fails.add("deploy/grafana/dashboards holds no .json dashboard")
    uids = {}
    for path in files:
        base = os.path.basename(path)
        try:
            with open(path) as f:
                dash = json.load(f)
        except json.JSONDecodeError as e:
            fails.add(f"{base}: invalid JSON: {e}")
            continue
        uid = dash.get("uid")
        if not uid or uid in uids:
            fails.add(f"{base}: uid {uid!r} missing or also used by {uids.get(uid)}")
        uids[uid] = base
        if dash.get("id") is not None:
            fails.add(f"{base}: provisioned dashboards must have \"id\": null, not {dash.get('id')}")
        variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
        ds = variables.get("datasource")
        if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
            fails.add(f"{base}: needs a template variable 'datasource' of type datasource, query prometheus")
        idx = variables.get("index")
        if not idx or idx.get("type") != "query" or "index" not in json.dumps(idx.get("query")):
            fails.add(f"{base}: needs a query template variable 'index' (label_values(..., index))")
        for name, v in variables.items():
            if v.get("type") == "query" and (v.get("datasource") or {}).get("uid") != "${datasource}":
                fails.add(f"{base}: variable {name} must use datasource ${{datasource}}")

        ids = {}
        cells = []
        for p in all_panels(dash.get("panels", [])):
            pid = p.get("id")
            where = f"{base} panel {pid} '{p.get('title')}'"
            if not isinstance(pid, int):
                fails.add(f"{where}: id must be an integer")
            elif pid in ids:
                fails.add(f"{where}: id {pid} also used by panel '{ids[pid]}'")
            ids[pid] = p.get("title")
            if not p.get("title"):
                fails.add(f"{where}: no title")
            g = p.get("gridPos", {})
            if not all(isinstance(g.get(k), int) for k in ("x", "y", "w", "h")) or g["x"] + g["w"] > 24:
                fails.add(f"{where}: gridPos {g} must have integer x,y,w,h within 24 columns")
            else:
                for other, og in cells:
                    if (g["x"] < og["x"] + og["w"] and og["x"] < g["x"] + g["w"]
                            and g["y"] < og["y"] + og["h"] and og["y"] < g["y"] + g["h"]):
                        fails.add(f"{where}: gridPos overlaps panel {other}")
                cells.append((pid, g))
            if p.get("type") == "row":
                continue
            if (p.get("datasource") or {}).get("uid") != "${datasource}":
                fails.add(f"{where}: datasource must be {{\"uid\": \"${{datasource}}\"}}, is {p.get('datasource')}")
            if not p.get("description"):
                fails.add(f"{where}: no description (operators read it as the panel's help)")
            targets = p.get("targets", [])
            if not targets:
                fails.add(f"{where}: no queries")
            refs = [t.get("refId") for t in targets]
            if len(set(refs)) != len(refs):
                fails.add(f"{where}: duplicate refIds {refs}")
            for t in targets:
                if (t.get("datasource") or {}).get("uid") != "${datasource}":
                    fails.add(f"{where} {t.get('refId')}: query datasource must be ${{datasource}}")
                expr = t.get("expr", "")
                if not expr.strip():
                    fails.add(f"{where} {t.get('refId')}: empty expr")
                    continue
                if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
                    fails.add(f"{where} {t.get('refId')}: unbalanced brackets in {expr!r}")
                for metric, matcher in selectors(expr):
                    if metric.startswith(PER_INDEX_PREFIXES) and 'index=~"$index"' not in matcher:
                        fails.add(f"{where} {t.get('refId')}: {metric} must be filtered with "
                                  f"index=~\"$index\" (has {matcher or 'no matcher'})")
                    if metric.startswith("gpujoin_") and 'instance=~"$instance"' not in matcher:
                        fails.add(f"{where} {t.get('refId')}: {metric} must be filtered with "
                                  f"instance=~\"$instance\" (has {matcher or 'no matcher'})")
        used = set()
        for p in all_panels(dash.get("panels", [])):
            for t in p.get("targets", []):
                used.update(metric_names(t.get("expr", "")))
        for m in REQUIRED.get(base, []):
            if m not in used:
                fails.add(f"{base}: no panel shows {m}")
        if base == "gpujoin-service.json":
            for q in ("0.5", "0.95", "0.99"):
                if not any(f"histogram_quantile({q}," in t.get("expr", "")
                           for p in all_panels(dash["panels"]) for t in p.get("targets", [])):
                    fails.add(f"{base}: no latency panel for quantile {q}")
    for base in REQUIRED:
        if base not in {os.path.basename(p) for p in files}:
            fails.add(f"deploy/grafana/dashboards/{base} is missing")

    # Alert rules: labels and annotations operators rely on.
    for path in alert_rule_files(src):
        with open(path) as f:
            doc = yaml.safe_load(f)
        for g in doc.get("groups", []):
            for r in g.get("rules", []):
                if "alert" not in r:
                    continue
                where = f"{os.path.basename(path)} {r['alert']}"
                if r.get("labels", {}).get("severity") not in ("warning", "critical"):
                    fails.add(f"{where}: severity label must be warning or critical")
                for a in ("summary", "description"):
                    if not r.get("annotations", {}).get(a):
                        fails.add(f"{where}: no {a} annotation")

    documented = documented_metrics(src)
    n = check_metrics_exist(src, documented, fails, "docs/operations.md's metrics reference")
    print(f"dashboards: {len(files)} files, {n} metric references checked")
    return fails.report("dashboard lint")


# ------------------------------------------------------------------ Dockerfile
BINARIES = ("gpujoind", "gpujoin-router", "gpujoin", "gpujoin-loadtest")


def lint_dockerfile(src, targets):
    fails = Failures()
    with open(os.path.join(src, "Dockerfile")) as f:
        text = f.read()
    # Drop comments, then join continuation lines so each instruction is one line.
    uncommented = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
    logical = re.sub(r"\\\n", " ", uncommented)
    lines = [l.strip() for l in logical.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    args = dict(re.findall(r"^ARG (\w+)=(\S*)", logical, re.M))
    froms = [l for l in lines if l.startswith("FROM ")]
    if len(froms) != 2:
        fails.add(f"Dockerfile: want 2 stages (build, runtime), found {len(froms)}")
    else:
        expand = lambda s: re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), s)
        build_img, run_img = expand(froms[0].split()[1]), expand(froms[1].split()[1])
        if not re.fullmatch(r"nvidia/cuda:13\.0\.\d+-devel-ubuntu24\.04", build_img):
            fails.add(f"Dockerfile: build stage image {build_img} is not nvidia/cuda:13.0.x-devel-ubuntu24.04")
        if run_img != build_img.replace("-devel-", "-runtime-"):
            fails.add(f"Dockerfile: runtime image {run_img} does not match the build image {build_img}")

    # Same build as the developers': scripts/build into "build".
    with open(os.path.join(src, "scripts", "build")) as f:
        build_script = f.read()
    if not re.search(r"BUILD_DIR=build scripts/build\b", logical):
        fails.add("Dockerfile: the build stage must run `BUILD_DIR=build scripts/build`")
    for opt in ("-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-G Ninja"):
        if opt.split()[0] not in build_script:
            fails.add(f"scripts/build no longer passes {opt}; re-check the Dockerfile")
    extra = re.search(r"scripts/build([^&\n]*)", logical)
    extra_opts = extra.group(1).split() if extra else []
    if any(not o.startswith("-DGPUJOIN_CUDA=") for o in extra_opts):
        fails.add(f"Dockerfile: scripts/build gets options beyond -DGPUJOIN_CUDA: {extra_opts}")

    # Development packages: the same list scripts/install-deps installs.
    with open(os.path.join(src, "scripts", "install-deps")) as f:
        deps = f.read()
    m = re.search(r"packages=\((.*?)\)", deps, re.S)
    wanted = [p for p in (m.group(1).split() if m else []) if p.endswith("-dev") or p.startswith("protobuf-compiler")]
    if not wanted:
        fails.add("scripts/install-deps: could not read its packages=(...) list")
    for p in wanted:
        if not re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", logical):
            fails.add(f"Dockerfile: build stage does not install {p} (scripts/install-deps does)")

    # Binaries: exactly scripts/build's three, each an existing CMake target.
    copied = set(re.findall(r"/src/build/bin/([\w.-]+)", logical))
    if copied != set(BINARIES):
        fails.add(f"Dockerfile: copies {sorted(copied)}, want {list(BINARIES)}")
    for b in BINARIES:
        if b not in targets:
            fails.add(f"CMake has no executable target {b}, but the image ships build/bin/{b}")
        elif targets[b] != b:
            fails.add(f"CMake target {b} produces build/bin/{targets[b]}, the Dockerfile copies build/bin/{b}")

    run_stage = logical.split(froms[-1], 1)[-1] if froms else ""
    user = re.findall(r"^USER\s+(\S+)", run_stage, re.M)
    if not user or user[-1].split(":")[0] in ("root", "0"):
        fails.add(f"Dockerfile: runtime stage must switch to a non-root USER (has {user})")
    if "-dev" in re.sub(r"#.*", "", run_stage.split("COPY --from=build /src", 1)[0]).replace("/dev/", ""):
        fails.add("Dockerfile: runtime stage installs a -dev package")
    hc = re.search(r"^HEALTHCHECK .*CMD (.*)$", run_stage, re.M)
    if not hc or "gpujoin" not in hc.group(1) or "health" not in hc.group(1):
        fails.add("Dockerfile: HEALTHCHECK must run `gpujoin ... health` (gRPC health service)")
    cmd = re.search(r"^CMD (.*)$", run_stage, re.M)
    if not cmd or "--listen=0.0.0.0:50051" not in cmd.group(1) or "--metrics-listen=0.0.0.0:9464" not in cmd.group(1):
        fails.add("Dockerfile: CMD must pass --listen=0.0.0.0:50051 and --metrics-listen=0.0.0.0:9464")
    for label in ("title", "description", "version", "revision", "created"):
        if f"org.opencontainers.image.{label}=" not in logical:
            fails.add(f"Dockerfile: OCI label org.opencontainers.image.{label} missing")

    with open(os.path.join(src, ".dockerignore")) as f:
        ignored = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    for must in ("build", "build-*", ".git"):
        if must not in ignored:
            fails.add(f".dockerignore: must exclude {must} (local build trees and VCS data)")
    for needed in ("scripts", "tests", "proto", "engine", "server", "client", "CMakeLists.txt",
                   "deploy/docker"):
        if needed in ignored:
            fails.add(f".dockerignore: excludes {needed}, which the build stage needs")
    return fails.report("Dockerfile lint")


# ------------------------------------------------------------------ compose
def lint_compose(config_path, src):
    fails = Failures()
    with open(config_path) as f:
        cfg = yaml.safe_load(f)
    services = cfg.get("services", {})
    for name in ("gpujoind", "gpujoind-cpu", "prometheus", "grafana"):
        if name not in services:
            fails.add(f"compose: service {name} missing")
    if fails.items:
        return fails.report("compose lint")
    gpu, cpu = services["gpujoind"], services["gpujoind-cpu"]
    devices = (gpu.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices") or [])
    if not any(d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", []) for d in devices):
        fails.add(f"compose: gpujoind needs deploy.resources.reservations.devices with driver nvidia, "
                  f"capabilities [gpu]; has {devices}")
    if cpu.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices"):
        fails.add("compose: gpujoind-cpu must not reserve a GPU")
    gp, cp = set(gpu.get("profiles", [])), set(cpu.get("profiles", []))
    if not gp or not cp or gp & cp:
        fails.add(f"compose: gpujoind (profiles {sorted(gp)}) and gpujoind-cpu ({sorted(cp)}) "
                  "need separate, non-empty profiles so exactly one runs")
    for svc_name, svc, backend in (("gpujoind", gpu, "cuda"), ("gpujoind-cpu", cpu, "cpu")):
        cmd = svc.get("command") or []
        if isinstance(cmd, str):
            cmd = cmd.split()
        for flag in ("--listen=0.0.0.0:50051", "--metrics-listen=0.0.0.0:9464", f"--backend={backend}"):
            if flag not in cmd:
                fails.add(f"compose: {svc_name} command lacks {flag}: {cmd}")
        aliases = svc.get("networks", {}).get("default", {}).get("aliases", [])
        if "gpujoind" not in aliases:
            fails.add(f"compose: {svc_name} must answer to the network alias gpujoind (Prometheus target)")
        build = svc.get("build", {})
        if os.path.realpath(build.get("context", "")) != os.path.realpath(src):
            fails.add(f"compose: {svc_name} build context {build.get('context')} is not the repository root")
    # Bind mounts must point at files and folders of the repository.
    for svc_name in ("prometheus", "grafana"):
        for v in services[svc_name].get("volumes", []):
            source = v.get("source") if isinstance(v, dict) else v.split(":")[0]
            vtype = v.get("type") if isinstance(v, dict) else ("bind" if source.startswith(("/", ".")) else "volume")
            if vtype == "bind" and not os.path.exists(source):
                fails.add(f"compose: {svc_name} mounts {source}, which does not exist")
    prom_cmd = " ".join(services["prometheus"].get("command", []))
    if "--config.file=/etc/prometheus/prometheus.yml" not in prom_cmd:
        fails.add("compose: prometheus must read /etc/prometheus/prometheus.yml")

    # The pieces must point at each other: Prometheus scrapes the alias and
    # metrics port gpujoind listens on; Grafana's provisioning reads the
    # folders compose mounts, and its datasource is the prometheus service.
    mounts = {}
    for svc_name in ("prometheus", "grafana"):
        for v in services[svc_name].get("volumes", []):
            source = v.get("source") if isinstance(v, dict) else v.split(":")[0]
            target = v.get("target") if isinstance(v, dict) else v.split(":")[1]
            mounts[(svc_name, target)] = source
    with open(os.path.join(src, "deploy", "prometheus", "prometheus.yml")) as f:
        prom = yaml.safe_load(f)
    jobs = {j["job_name"]: j for j in prom.get("scrape_configs", [])}
    targets = [t for sc in jobs.get("gpujoind", {}).get("static_configs", []) for t in sc.get("targets", [])]
    metrics_flag = [c for c in (gpu.get("command") or []) if str(c).startswith("--metrics-listen=")]
    port = metrics_flag[0].rsplit(":", 1)[-1] if metrics_flag else None
    if targets != [f"gpujoind:{port}"]:
        fails.add(f"prometheus.yml: job gpujoind scrapes {targets}, gpujoind serves metrics on gpujoind:{port}")
    if mounts.get(("prometheus", "/etc/prometheus/prometheus.yml")) != \
            os.path.join(src, "deploy", "prometheus", "prometheus.yml"):
        fails.add("compose: prometheus must mount deploy/prometheus/prometheus.yml at /etc/prometheus/prometheus.yml")
    for rule_file in prom.get("rule_files", []):
        if not any(svc == "prometheus" and os.path.join("/etc/prometheus", rule_file).startswith(t + "/")
                   for (svc, t) in mounts):
            fails.add(f"compose: rule file {rule_file} (relative to /etc/prometheus) is not mounted")
    prov = os.path.join(src, "deploy", "grafana", "provisioning")
    if mounts.get(("grafana", "/etc/grafana/provisioning")) != prov:
        fails.add("compose: grafana must mount deploy/grafana/provisioning at /etc/grafana/provisioning")
    with open(os.path.join(prov, "dashboards", "gpujoin.yml")) as f:
        providers = yaml.safe_load(f).get("providers", [])
    for pvd in providers:
        path = pvd.get("options", {}).get("path")
        if mounts.get(("grafana", path)) != os.path.join(src, "deploy", "grafana", "dashboards"):
            fails.add(f"grafana provider {pvd.get('name')} reads {path}, where compose does not mount "
                      "deploy/grafana/dashboards")
    home = services["grafana"].get("environment", {}).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    if home:
        folder, name = os.path.split(home)
        if not os.path.exists(os.path.join(mounts.get(("grafana", folder), "/nonexistent"), name)):
            fails.add(f"compose: Grafana home dashboard {home} is not a mounted dashboard file")
    with open(os.path.join(prov, "datasources", "prometheus.yml")) as f:
        sources = yaml.safe_load(f).get("datasources", [])
    prom_port = "9090"
    if not any(d.get("type") == "prometheus" and d.get("url") == f"http://prometheus:{prom_port}" for d in sources):
        fails.add(f"grafana datasources: none of type prometheus at http://prometheus:{prom_port} "
                  f"(the compose service): {sources}")
    lint_compose_sharded(services, src, fails)
    return fails.report("compose lint")


def _flag(cmd, name):
    """The value of `--name=value` in a command list, or None."""
    for c in cmd or []:
        if str(c).startswith(name + "="):
            return str(c).split("=", 1)[1]
    return None


def _port_mapping(p):
    """(published, target) of a rendered compose port ("ip:host:container/tcp" or a dict)."""
    if isinstance(p, dict):
        return str(p.get("published")), str(p.get("target"))
    parts = str(p).split("/")[0].split(":")
    return parts[-2], parts[-1]


def _volume(v):
    """(source, target) of a rendered compose volume (short string or dict)."""
    if isinstance(v, dict):
        return v.get("source"), v.get("target")
    parts = v.split(":")
    return parts[0], parts[1]


def lint_compose_sharded(services, src, fails):
    """Profile "sharded": gpujoind-<I> (CPU, --shard I/N, own volume) behind
    gpujoin-router (--shards naming every shard, the usual host ports), and a
    Prometheus of that profile scraping exactly the shards and the router."""
    where = "compose profile sharded"
    shards = sorted((n for n in services if re.fullmatch(r"gpujoind-\d+", n)), key=lambda n: int(n.split("-")[1]))
    for name in ("gpujoin-router", "prometheus-sharded"):
        if name not in services:
            fails.add(f"{where}: service {name} missing")
    if not shards:
        fails.add(f"{where}: no shard services gpujoind-<I>")
    if fails.items:
        return
    router, prom = services["gpujoin-router"], services["prometheus-sharded"]
    n = len(shards)
    if [int(s.split("-")[1]) for s in shards] != list(range(n)):
        fails.add(f"{where}: shard services {shards} must be gpujoind-0..gpujoind-{n - 1}")
    for name in shards + ["gpujoin-router", "prometheus-sharded"]:
        if services[name].get("profiles") != ["sharded"]:
            fails.add(f"{where}: service {name} must have profiles [sharded], has {services[name].get('profiles')}")
    for name in ("gpujoind", "gpujoind-cpu", "prometheus"):
        if "sharded" in services[name].get("profiles", []):
            fails.add(f"{where}: service {name} must not run in the sharded profile")
    shard_addrs, metrics_targets, volumes = [], [], {}
    for i, name in enumerate(shards):
        svc = services[name]
        cmd = svc.get("command") or []
        for flag in ("--listen=0.0.0.0:50051", "--metrics-listen=0.0.0.0:9464", "--backend=cpu",
                     f"--shard={i}/{n}"):
            if flag not in cmd:
                fails.add(f"{where}: {name} command lacks {flag}: {cmd}")
        if svc.get("ports"):
            fails.add(f"{where}: {name} publishes {svc['ports']}; only the router is published")
        if svc.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices"):
            fails.add(f"{where}: {name} runs the CPU backend and must not reserve a GPU")
        listen, metrics = _flag(cmd, "--listen"), _flag(cmd, "--metrics-listen")
        shard_addrs.append(f"{name}:{listen.rsplit(':', 1)[1] if listen else '?'}")
        metrics_targets.append(f"{name}:{metrics.rsplit(':', 1)[1] if metrics else '?'}")
        data_dir = _flag(cmd, "--data-dir")
        mounted = {t: s for s, t in map(_volume, svc.get("volumes", []))}
        if not data_dir or data_dir not in mounted:
            fails.add(f"{where}: {name} --data-dir={data_dir} is not a mounted volume ({mounted})")
        else:
            source = mounted[data_dir]
            if source in volumes:
                fails.add(f"{where}: {name} and {volumes[source]} share the volume {source}")
            if source == "gpujoin-data":
                fails.add(f"{where}: {name} uses the single-server volume gpujoin-data")
            volumes[source] = name
    rcmd = router.get("command") or []
    if router.get("entrypoint") != ["gpujoin-router"]:
        fails.add(f"{where}: gpujoin-router entrypoint must be [gpujoin-router], is {router.get('entrypoint')}")
    if _flag(rcmd, "--shards") != ",".join(shard_addrs):
        fails.add(f"{where}: gpujoin-router --shards={_flag(rcmd, '--shards')}, the shards listen on "
                  f"{','.join(shard_addrs)} (in shard order)")
    listen, metrics = _flag(rcmd, "--listen"), _flag(rcmd, "--metrics-listen")
    if not listen or not listen.startswith("0.0.0.0:") or not metrics or not metrics.startswith("0.0.0.0:"):
        fails.add(f"{where}: gpujoin-router needs --listen=0.0.0.0:PORT and --metrics-listen=0.0.0.0:PORT: {rcmd}")
    else:
        published = dict(_port_mapping(p) for p in router.get("ports", []))
        # The single-server profiles' host ports (rendered with their defaults).
        gpu_ports = dict(_port_mapping(p) for p in services["gpujoind"].get("ports", []))
        for host_port, what, target in ((k, "gRPC", listen) for k, v in gpu_ports.items() if v == "50051"):
            if published.get(host_port) != target.rsplit(":", 1)[1]:
                fails.add(f"{where}: gpujoin-router must publish its {what} port {target} on host port "
                          f"{host_port} (as gpujoind does), publishes {router.get('ports')}")
        for host_port in (k for k, v in gpu_ports.items() if v == "9464"):
            if published.get(host_port) != metrics.rsplit(":", 1)[1]:
                fails.add(f"{where}: gpujoin-router must publish its metrics port {metrics} on host port "
                          f"{host_port}, publishes {router.get('ports')}")
        test = (router.get("healthcheck") or {}).get("test") or []
        if f"127.0.0.1:{listen.rsplit(':', 1)[1]}" not in test or "health" not in test:
            fails.add(f"{where}: gpujoin-router healthcheck {test} must run `gpujoin --server "
                      f"127.0.0.1:{listen.rsplit(':', 1)[1]} ... health` (the image's asks gpujoind's port)")
    # Prometheus of the profile: its own config file at the usual path, the
    # network name Grafana's datasource uses, and exactly these targets.
    mounts = {t: s for s, t in map(_volume, prom.get("volumes", []))}
    cfg_path = os.path.join(src, "deploy", "prometheus", "prometheus-sharded.yml")
    if mounts.get("/etc/prometheus/prometheus.yml") != cfg_path:
        fails.add(f"{where}: prometheus-sharded must mount deploy/prometheus/prometheus-sharded.yml at "
                  f"/etc/prometheus/prometheus.yml, mounts {mounts}")
    if "prometheus" not in (prom.get("networks", {}).get("default") or {}).get("aliases", []):
        fails.add(f"{where}: prometheus-sharded must answer to the network alias prometheus (Grafana's datasource)")
    with open(cfg_path) as f:
        cfg = yaml.safe_load(f)
    jobs = {j["job_name"]: j for j in cfg.get("scrape_configs", [])}
    for job, want in (("gpujoind", metrics_targets),
                      ("gpujoin-router", [f"gpujoin-router:{metrics.rsplit(':', 1)[1] if metrics else '?'}"])):
        got = [t for sc in jobs.get(job, {}).get("static_configs", []) for t in sc.get("targets", [])]
        if got != want:
            fails.add(f"prometheus-sharded.yml: job {job} scrapes {got}, the sharded profile serves metrics on {want}")
    for rule_file in cfg.get("rule_files", []):
        if not any(os.path.join("/etc/prometheus", rule_file).startswith(t + "/") for t in mounts):
            fails.add(f"{where}: rule file {rule_file} of prometheus-sharded.yml is not mounted")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dashboards")
    d.add_argument("source_dir")
    k = sub.add_parser("dockerfile")
    k.add_argument("source_dir")
    k.add_argument("--target", action="append", default=[], help="NAME=FILE_NAME of an existing CMake target")
    c = sub.add_parser("compose")
    c.add_argument("config_yaml")
    c.add_argument("source_dir")
    a = ap.parse_args()
    if a.cmd == "dashboards":
        return lint_dashboards(a.source_dir)
    if a.cmd == "dockerfile":
        targets = dict(t.split("=", 1) for t in a.target)
        return lint_dockerfile(a.source_dir, targets)
    return lint_compose(a.config_yaml, a.source_dir)


if __name__ == "__main__":
    sys.exit(main())
