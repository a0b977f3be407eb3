#!/usr/bin/env python3
"""Consistency of deploy/kubernetes (and the compose profile "sharded") with
itself and with the binaries, plus the same topology live on loopback.

  kubernetes_manifests_test.py --gpujoind BIN --router BIN --source-dir DIR
                               [--kubectl BIN] [--docker-compose BIN] [--timeout S]

Static checks (always; no cluster, no Docker engine):
  - every file of deploy/kubernetes is listed in kustomization.yaml and the
    other way round; no object sets a namespace;
  - every Service and PodDisruptionBudget selector matches the pod labels of
    exactly one workload, and each workload's selector its own pod labels;
  - Service targetPorts, probe ports and prometheus.io/port annotations are
    container ports of the selected pods; the metrics annotation is the
    --metrics-listen port, the Services' grpc port the --listen port;
  - the headless Service (clusterIP: None) is the StatefulSet's serviceName;
  - $(VAR) in args is defined in the container's env; ConfigMaps, Secrets
    and their keys referenced exist; --auth-token-file / --shard-token-file
    are keys of a mounted Secret;
  - shard count N: the StatefulSet's replicas, the shards' --shard I/N (I the
    pod-index label), the router's --shard-count and the ConfigMap agree; the
    router's --shard-pattern is <statefulset>-{i}.<headless service>:<grpc port>;
  - the shards: GPU requested, --data-dir on the volumeClaimTemplate, a
    startup probe, readiness/liveness on gRPC health, a termination grace
    period covering --drain-grace + --drain-timeout;
  - every --flag of the manifests and of the compose profile "sharded" is in
    the --help output of the binary that runs it (gpujoind, gpujoin-router);
  - with --kubectl: `kubectl kustomize` renders the folder, with the
    StatefulSet's replicas taken from the ConfigMap;
  - with --docker-compose: `docker-compose --profile sharded config` renders.

Loopback topology (when the router binary exists and gpujoind --help has
--shard): N `gpujoind --backend=cpu --shard I/N` and one gpujoin-router with
the manifests' flags (addresses moved to loopback, a temp token file on both
sides), the router's --shard-pattern kept in the manifests' shape
(127.0.{i}.1:PORT, all loopback on Linux). The router must turn SERVING
(grpc.health.v1, services "" and gpujoin.v1.GpuJoin), refuse a call without
the token and answer one with it, leave SERVING when a shard stops, and every
process must exit 0 on SIGTERM. Without the router or --shard that part is
skipped with a message saying why; the static checks still run.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from deploy_lint import Failures  # noqa: E402
from live_stack import Processes, free_port, log  # noqa: E402

K8S_DIR = os.path.join("deploy", "kubernetes")
POD_INDEX_LABEL = "metadata.labels['apps.kubernetes.io/pod-index']"
ORDINAL = "<ordinal>"
WORKLOAD_KINDS = ("StatefulSet", "Deployment")


# ------------------------------------------------------------------ loading
class Obj:
    """A manifest object with the file it came from, for failure messages."""

    def __init__(self, doc, path):
        self.doc, self.path = doc, path
        self.kind = doc.get("kind")
        self.name = (doc.get("metadata") or {}).get("name")

    def __str__(self):
        return f"{self.path}: {self.kind} {self.name}"


def load_manifests(src, fails):
    kdir = os.path.join(src, K8S_DIR)
    with open(os.path.join(kdir, "kustomization.yaml")) as f:
        kust = yaml.safe_load(f)
    listed = kust.get("resources", [])
    present = sorted(f for f in os.listdir(kdir)
                     if f.endswith((".yaml", ".yml")) and f != "kustomization.yaml")
    for f in present:
        if f not in listed:
            fails.add(f"{K8S_DIR}/{f}: not listed in kustomization.yaml resources (apply -k would skip it)")
    objs = []
    for f in listed:
        path = os.path.join(kdir, f)
        if not os.path.exists(path):
            fails.add(f"{K8S_DIR}/kustomization.yaml: resource {f} does not exist")
            continue
        with open(path) as fh:
            for doc in yaml.safe_load_all(fh):
                if doc:
                    objs.append(Obj(doc, f"{K8S_DIR}/{f}"))
    for o in objs:
        if not o.kind or not o.name or not o.doc.get("apiVersion"):
            fails.add(f"{o}: needs apiVersion, kind and metadata.name")
        if (o.doc.get("metadata") or {}).get("namespace"):
            fails.add(f"{o}: metadata.namespace is set; the set must stay namespace-agnostic (apply -n)")
    return kust, objs


def find(objs, kind, name=None):
    return [o for o in objs if o.kind == kind and (name is None or o.name == name)]


def pod_spec(w):
    return w.doc["spec"]["template"]["spec"]


def pod_labels(w):
    return (w.doc["spec"]["template"].get("metadata") or {}).get("labels") or {}


def containers(w):
    return pod_spec(w).get("containers", [])


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


# ------------------------------------------------------------------ args and env
def resolve_env(obj, c, configmaps, fails):
    """{VAR: value} of a container's env; the pod-index label reads as ORDINAL."""
    env = {}
    for e in c.get("env", []):
        name, vf = e.get("name"), e.get("valueFrom") or {}
        where = f"{obj} container {c.get('name')} env {name}"
        if "value" in e:
            env[name] = str(e["value"])
        elif "configMapKeyRef" in vf:
            ref = vf["configMapKeyRef"]
            cm = configmaps.get(ref.get("name"))
            if cm is None:
                fails.add(f"{where}: configMapKeyRef names ConfigMap {ref.get('name')}, which the set lacks")
            elif ref.get("key") not in (cm.doc.get("data") or {}):
                fails.add(f"{where}: ConfigMap {cm.name} ({cm.path}) has no key {ref.get('key')}")
            else:
                env[name] = str(cm.doc["data"][ref["key"]])
        elif "fieldRef" in vf:
            field = vf["fieldRef"].get("fieldPath")
            env[name] = ORDINAL if field == POD_INDEX_LABEL else f"<{field}>"
        else:
            env[name] = f"<{name}>"
    return env


def expand(arg, env, where, fails):
    """Kubernetes' $(VAR) expansion; an undefined VAR would stay literal in the pod."""
    def sub(m):
        if m.group(1) not in env:
            fails.add(f"{where}: {arg!r} uses $({m.group(1)}), which the container's env does not define")
            return m.group(0)
        return env[m.group(1)]
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, arg)


def parse_flags(args, where, fails):
    """{--flag: value} of an argument list written as --flag=value (one flag per item)."""
    flags = {}
    for a in args:
        a = str(a)
        if not a.startswith("--"):
            fails.add(f"{where}: argument {a!r} is not --flag=value (write each flag as one --flag=value item)")
            continue
        name, _, value = a.partition("=")
        if name in flags:
            fails.add(f"{where}: {name} given twice")
        flags[name] = value
    return flags


def port_of(address):
    return address.rsplit(":", 1)[1] if address and ":" in address else None


def help_flags(binary, name):
    """The --flags in `BINARY --help`, or None when the binary is missing."""
    if not binary or not os.access(binary, os.X_OK):
        return None
    res = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=20)
    text = res.stdout + res.stderr
    if res.returncode != 0:
        raise AssertionError(f"{name} --help exited {res.returncode}:\n{text}")
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


# ------------------------------------------------------------------ static checks
class Workload:
    """A workload's single container, its resolved flags and container ports."""

    def __init__(self, obj, configmaps, fails):
        self.obj = obj
        cs = containers(obj)
        if len(cs) != 1:
            fails.add(f"{obj}: want exactly one container, has {len(cs)}")
        self.c = cs[0] if cs else {}
        self.where = f"{obj} container {self.c.get('name')}"
        self.binary = (self.c.get("command") or [None])[0]
        self.env = resolve_env(obj, self.c, configmaps, fails)
        args = [expand(str(a), self.env, self.where, fails) for a in self.c.get("args", [])]
        self.raw_args = [str(a) for a in self.c.get("args", [])]
        self.flags = parse_flags(args, self.where, fails)
        self.ports = {}
        for p in self.c.get("ports", []):
            self.ports[p.get("containerPort")] = p.get("name")

    def resolve_port(self, port):
        """A port given as number or name -> container port number, or None."""
        if isinstance(port, int):
            return port if port in self.ports else None
        for number, name in self.ports.items():
            if name == port or str(number) == str(port):
                return number
        return None


def check_selectors(objs, workloads, fails):
    for w in workloads:
        sel = w.obj.doc["spec"].get("selector", {}).get("matchLabels", {})
        if not matches(sel, pod_labels(w.obj)):
            fails.add(f"{w.obj}: spec.selector.matchLabels {sel} does not match its pod labels {pod_labels(w.obj)}")
    selected = {}
    for o in find(objs, "Service") + find(objs, "PodDisruptionBudget"):
        sel = o.doc["spec"].get("selector") or {}
        sel = sel.get("matchLabels", {}) if o.kind == "PodDisruptionBudget" else sel
        hits = [w for w in workloads if matches(sel, pod_labels(w.obj))]
        if len(hits) != 1:
            fails.add(f"{o}: selector {sel} matches the pods of {len(hits)} workloads "
                      f"({[w.obj.name for w in hits]}); want exactly one")
        else:
            selected[o.kind, o.name] = hits[0]
    return selected


def check_services(objs, selected, fails):
    for svc in find(objs, "Service"):
        w = selected.get(("Service", svc.name))
        if not w:
            continue
        for p in svc.doc["spec"].get("ports", []):
            target = p.get("targetPort", p.get("port"))
            number = w.resolve_port(target)
            where = f"{svc} port {p.get('name')}"
            if number is None:
                fails.add(f"{where}: targetPort {target} is not a container port of {w.where} {w.ports}")
            elif p.get("name") == "grpc" and str(number) != port_of(w.flags.get("--listen")):
                fails.add(f"{where}: targets container port {number}, {w.where} listens on "
                          f"--listen={w.flags.get('--listen')}")
            elif p.get("name") == "metrics" and str(number) != port_of(w.flags.get("--metrics-listen")):
                fails.add(f"{where}: targets container port {number}, {w.where} serves "
                          f"--metrics-listen={w.flags.get('--metrics-listen')}")


def check_probes_and_scrape(w, fails):
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        spec = w.c.get(probe)
        if not spec:
            continue
        for kind in ("grpc", "tcpSocket", "httpGet"):
            if kind in spec:
                port = spec[kind].get("port")
                if w.resolve_port(port) is None:
                    fails.add(f"{w.where} {probe}.{kind}.port {port} is not a container port {w.ports}")
                elif kind == "grpc" and str(w.resolve_port(port)) != port_of(w.flags.get("--listen")):
                    fails.add(f"{w.where} {probe}.grpc.port {port}: the gRPC server listens on "
                              f"--listen={w.flags.get('--listen')}")
                if kind == "grpc" and spec[kind].get("service") not in (None, ""):
                    fails.add(f"{w.where} {probe}.grpc.service {spec[kind]['service']!r}: probe the "
                              "default service \"\" (SERVING when the server serves)")
    ann = (w.obj.doc["spec"]["template"].get("metadata") or {}).get("annotations") or {}
    if ann.get("prometheus.io/scrape") != "true":
        fails.add(f"{w.obj}: pod annotation prometheus.io/scrape must be \"true\", is {ann.get('prometheus.io/scrape')!r}")
    port = ann.get("prometheus.io/port")
    if not isinstance(port, str) or not port.isdigit() or int(port) not in w.ports:
        fails.add(f"{w.obj}: pod annotation prometheus.io/port {port!r} is not a container port {sorted(w.ports)}")
    elif port != port_of(w.flags.get("--metrics-listen")):
        fails.add(f"{w.obj}: prometheus.io/port {port} but --metrics-listen={w.flags.get('--metrics-listen')}")
    for flag in ("--listen", "--metrics-listen"):
        if not (w.flags.get(flag) or "").startswith("0.0.0.0:"):
            fails.add(f"{w.where}: {flag}={w.flags.get(flag)} must listen on 0.0.0.0 (the default is loopback)")


def check_secrets(objs, w, fails):
    secrets = {s.name: s for s in find(objs, "Secret")}
    mounts = {}
    volumes = {v["name"]: v for v in pod_spec(w.obj).get("volumes", [])}
    for v in volumes.values():
        if "secret" in v and v["secret"].get("secretName") not in secrets:
            fails.add(f"{w.obj}: volume {v['name']} uses Secret {v['secret'].get('secretName')}, which the set lacks")
    for m in w.c.get("volumeMounts", []):
        v = volumes.get(m.get("name"))
        if v and "secret" in v:
            mounts[m["mountPath"].rstrip("/")] = secrets.get(v["secret"].get("secretName"))
    for e in w.c.get("env", []):
        ref = (e.get("valueFrom") or {}).get("secretKeyRef")
        if ref and ref.get("name") not in secrets:
            fails.add(f"{w.where} env {e.get('name')}: secretKeyRef names Secret {ref.get('name')}, which the set lacks")
    for flag in ("--auth-token-file", "--shard-token-file"):
        path = w.flags.get(flag)
        if path is None:
            continue
        d, key = os.path.split(path)
        secret = mounts.get(d)
        if secret is None:
            fails.add(f"{w.where}: {flag}={path} is not in a mounted Secret volume (mounts: {sorted(mounts)})")
        elif key not in {**(secret.doc.get("data") or {}), **(secret.doc.get("stringData") or {})}:
            fails.add(f"{w.where}: {flag}={path}: Secret {secret.name} ({secret.path}) has no key {key}")


def check_shards(sts, headless, n, fails):
    spec = sts.obj.doc["spec"]
    if spec.get("replicas") != n:
        fails.add(f"{sts.obj}: spec.replicas {spec.get('replicas')} differs from the shard count {n} "
                  "(ConfigMap gpujoin-shards data.shard-count); kubectl apply -f would deploy a wrong N")
    if headless is None:
        fails.add(f"{sts.obj}: no headless Service (clusterIP: None) selects its pods")
    elif spec.get("serviceName") != headless.name:
        fails.add(f"{sts.obj}: spec.serviceName {spec.get('serviceName')!r} is not the headless Service "
                  f"{headless.name!r} ({headless.path}); gpujoind-<i>.{headless.name} would not resolve")
    if sts.binary != "gpujoind":
        fails.add(f"{sts.where}: command must start gpujoind, is {sts.c.get('command')}")
    shard = sts.flags.get("--shard")
    if shard != f"{ORDINAL}/{n}":
        fails.add(f"{sts.where}: --shard resolves to {shard!r}; want <pod ordinal>/{n}: the index from the "
                  f"{POD_INDEX_LABEL} env and N from the shard count")
    if sts.flags.get("--backend") != "cuda":
        fails.add(f"{sts.where}: --backend={sts.flags.get('--backend')}, want cuda (one GPU per shard)")
    res = sts.c.get("resources", {})
    for part in ("limits", "requests"):
        got = (res.get(part) or {}).get("nvidia.com/gpu")
        if got is not None and str(got) != "1":
            fails.add(f"{sts.where}: resources.{part}['nvidia.com/gpu'] is {got}, want 1")
    if (res.get("limits") or {}).get("nvidia.com/gpu") is None:
        fails.add(f"{sts.where}: resources.limits['nvidia.com/gpu'] must be 1 (extended resources are set in limits)")
    data_dir = sts.flags.get("--data-dir")
    claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
    mounted = {m["mountPath"].rstrip("/"): m["name"] for m in sts.c.get("volumeMounts", [])}
    if not data_dir:
        fails.add(f"{sts.where}: no --data-dir (snapshots would be lost with the pod)")
    elif mounted.get(data_dir.rstrip("/")) not in claims:
        fails.add(f"{sts.where}: --data-dir={data_dir} is not mounted from a volumeClaimTemplate "
                  f"(claims {sorted(claims)}, mounts {mounted})")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if "grpc" not in (sts.c.get(probe) or {}):
            fails.add(f"{sts.where}: {probe} must be a grpc probe (gpujoind's grpc.health.v1)")
    sp = sts.c.get("startupProbe") or {}
    budget = sp.get("periodSeconds", 10) * sp.get("failureThreshold", 3)
    if budget < 600:
        fails.add(f"{sts.where}: startupProbe allows {budget}s; snapshot loading at start needs at least 600s")
    drain = float(sts.flags.get("--drain-grace", 1)) + float(sts.flags.get("--drain-timeout", 30))
    grace = pod_spec(sts.obj).get("terminationGracePeriodSeconds", 30)
    if grace < drain + 5:
        fails.add(f"{sts.obj}: terminationGracePeriodSeconds {grace} does not cover --drain-grace + "
                  f"--drain-timeout = {drain:g}s plus a margin of 5s")


def check_router(router, sts, headless, n, fails):
    if router.binary != "gpujoin-router":
        fails.add(f"{router.where}: command must start gpujoin-router, is {router.c.get('command')}")
    pattern = router.flags.get("--shard-pattern")
    shard_port = port_of(sts.flags.get("--listen"))
    if headless is not None:
        want = f"{sts.obj.name}-{{i}}.{headless.name}:{shard_port}"
        if pattern != want:
            fails.add(f"{router.where}: --shard-pattern={pattern}; the shards are {want} "
                      f"(<StatefulSet>-{{i}}.<headless Service>:<gpujoind --listen port>)")
        hp = {p.get("port") for p in headless.doc["spec"].get("ports", [])}
        if shard_port and int(shard_port) not in hp:
            fails.add(f"{headless}: has no port {shard_port}, the shards' gRPC port the router dials")
    if router.flags.get("--shard-count") != str(n):
        fails.add(f"{router.where}: --shard-count resolves to {router.flags.get('--shard-count')!r}, "
                  f"the shard count is {n} (StatefulSet {sts.obj.name} replicas, --shard I/{n})")
    if "--shards" in router.flags:
        fails.add(f"{router.where}: --shards is fixed; use --shard-pattern and --shard-count for the StatefulSet")
    live = (router.c.get("livenessProbe") or {})
    if "grpc" in live:
        fails.add(f"{router.where}: livenessProbe on gRPC health would restart every router while a shard is "
                  "down (the router is NOT_SERVING then); probe its listener (tcpSocket)")
    if "grpc" not in (router.c.get("readinessProbe") or {}):
        fails.add(f"{router.where}: readinessProbe must be a grpc probe (SERVING when every shard is)")
    for flag in ("--auth-token-file", "--shard-token-file"):
        if flag not in router.flags:
            fails.add(f"{router.where}: no {flag} (the shards require the token)")
    if "--auth-token-file" not in sts.flags:
        fails.add(f"{sts.where}: no --auth-token-file (the router sends the shards a token)")


def check_flags_in_help(where, flags, help_set, binary_name, fails, exempt=()):
    for flag in flags:
        if flag in exempt:
            continue
        if flag not in help_set:
            fails.add(f"{where}: {flag} is not in `{binary_name} --help`")


def compose_commands(src):
    """[(where, binary, flags)] of the compose profile sharded, ${VAR:-default} expanded."""
    with open(os.path.join(src, "deploy", "docker-compose.yml")) as f:
        services = yaml.safe_load(f)["services"]
    out = []
    for name, svc in services.items():
        if "sharded" not in svc.get("profiles", []) or "prometheus" in name:
            continue
        binary = (svc.get("entrypoint") or ["gpujoind"])[0]
        cmd = [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(c)) for c in svc.get("command") or []]
        out.append((f"deploy/docker-compose.yml service {name}", binary, cmd))
    return out


def static_checks(args, fails):
    src = args.source_dir
    kust, objs = load_manifests(src, fails)
    configmaps = {c.name: c for c in find(objs, "ConfigMap")}
    stss = find(objs, "StatefulSet", "gpujoind")
    routers = find(objs, "Deployment", "gpujoin-router")
    if len(stss) != 1 or len(routers) != 1:
        fails.add(f"{K8S_DIR}: want one StatefulSet gpujoind and one Deployment gpujoin-router, "
                  f"have {[str(o) for o in stss + routers]}")
        return None
    for name in ("gpujoin-router",):
        if not find(objs, "Service", name):
            fails.add(f"{K8S_DIR}: no Service {name} (the clients' address)")
    if not find(objs, "Secret", "gpujoin-token"):
        fails.add(f"{K8S_DIR}: no Secret gpujoin-token")
    workloads = [Workload(o, configmaps, fails) for o in objs if o.kind in WORKLOAD_KINDS]
    sts = next(w for w in workloads if w.obj is stss[0])
    router = next(w for w in workloads if w.obj is routers[0])

    # N: the ConfigMap the env reads, the replacement into replicas.
    count_ref = next((e["valueFrom"]["configMapKeyRef"] for e in sts.c.get("env", [])
                      if "configMapKeyRef" in (e.get("valueFrom") or {})), None)
    n = None
    if count_ref and count_ref["name"] in configmaps:
        n = int(configmaps[count_ref["name"]].doc["data"][count_ref["key"]])
        reps = [r for r in kust.get("replacements", [])
                if r["source"].get("kind") == "ConfigMap" and r["source"].get("name") == count_ref["name"]
                and r["source"].get("fieldPath") == f"data.{count_ref['key']}"]
        if not any(t["select"].get("kind") == "StatefulSet" and t["select"].get("name") == sts.obj.name
                   and "spec.replicas" in t.get("fieldPaths", []) for r in reps for t in r["targets"]):
            fails.add(f"{K8S_DIR}/kustomization.yaml: no replacement copies ConfigMap {count_ref['name']} "
                      f"data.{count_ref['key']} into StatefulSet {sts.obj.name} spec.replicas")
    else:
        fails.add(f"{sts.where}: the shard count must come from a ConfigMap (configMapKeyRef) of the set")
        n = sts.obj.doc["spec"].get("replicas")

    selected = check_selectors(objs, workloads, fails)
    check_services(objs, selected, fails)
    headless = [s for s in find(objs, "Service") if s.doc["spec"].get("clusterIP") == "None"
                and selected.get(("Service", s.name)) is sts]
    headless = headless[0] if headless else None
    if headless is not None and not headless.doc["spec"].get("publishNotReadyAddresses"):
        fails.add(f"{headless}: publishNotReadyAddresses must be true, so a shard that is loading "
                  "(NOT_SERVING) still resolves and the router can name it")
    for svc in find(objs, "Service", "gpujoin-router"):
        if selected.get(("Service", svc.name)) is not router:
            fails.add(f"{svc}: must select the gpujoin-router pods")
    for w in workloads:
        check_probes_and_scrape(w, fails)
        check_secrets(objs, w, fails)
    check_shards(sts, headless, n, fails)
    check_router(router, sts, headless, n, fails)

    # Flags against the binaries' --help.
    gj_help = help_flags(args.gpujoind, "gpujoind")
    if gj_help is None:
        fails.add(f"gpujoind binary {args.gpujoind!r} is not an executable file")
        gj_help = set()
    rt_help = help_flags(args.router, "gpujoin-router")
    exempt = set()
    if "--shard" not in gj_help:
        exempt.add("--shard")
        log(f"SKIP: {args.gpujoind} --help has no --shard (scale-out not built into this gpujoind yet); "
            "--shard is not checked against it")
    helps = {"gpujoind": gj_help, "gpujoin-router": rt_help}
    uses = [(w.where, w.binary, list(w.flags)) for w in workloads]
    for where, binary, cmd in compose_commands(args.source_dir):
        uses.append((where, binary, list(parse_flags(cmd, where, fails))))
    for where, binary, flags in uses:
        if binary not in helps:
            fails.add(f"{where}: runs {binary!r}, neither gpujoind nor gpujoin-router")
        elif helps[binary] is None:
            log(f"SKIP: {where}: {binary} binary {args.router!r} is missing; its flags "
                f"{' '.join(flags)} are not checked")
        else:
            check_flags_in_help(where, flags, helps[binary], binary, fails, exempt)

    # The image ships what the manifests run (once the router is built here).
    if rt_help is not None:
        with open(os.path.join(src, "Dockerfile")) as f:
            shipped = set(re.findall(r"/src/build/bin/([\w.-]+)", f.read()))
        for w in workloads:
            if w.binary not in shipped:
                fails.add(f"{w.where}: runs {w.binary}, which the Dockerfile does not copy into the image "
                          f"(copies {sorted(shipped)})")

    render_kustomize(args, sts, n, fails)
    render_compose(args, fails)
    return {"n": n, "sts": sts, "router": router, "gj_help": gj_help, "rt_help": rt_help}


def render_kustomize(args, sts, n, fails):
    if not args.kubectl:
        log("SKIP: no kubectl; `kubectl kustomize deploy/kubernetes` not run")
        return
    res = subprocess.run([args.kubectl, "kustomize", os.path.join(args.source_dir, K8S_DIR)],
                         capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        fails.add(f"kubectl kustomize {K8S_DIR} failed:\n{res.stderr}")
        return
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    rendered = [d for d in docs if d.get("kind") == "StatefulSet" and d["metadata"]["name"] == sts.obj.name]
    if not rendered or rendered[0]["spec"].get("replicas") != n:
        fails.add(f"kubectl kustomize {K8S_DIR}: StatefulSet {sts.obj.name} replicas "
                  f"{rendered[0]['spec'].get('replicas') if rendered else None!r}, want the shard count {n}")
    log(f"ok: kubectl kustomize {K8S_DIR} renders {len(docs)} objects")


def render_compose(args, fails):
    if not args.docker_compose:
        log("SKIP: no docker-compose; `docker-compose --profile sharded config` not run")
        return
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items()
               if k not in ("DOCKER_HOST", "COMPOSE_FILE", "COMPOSE_PROJECT_NAME", "COMPOSE_PROFILES")}
        env["DOCKER_CONFIG"] = tmp
        cmd = [args.docker_compose, "-f", os.path.join(args.source_dir, "deploy", "docker-compose.yml"),
               "--profile", "sharded", "config"]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    if res.returncode != 0:
        fails.add(f"`{' '.join(cmd)}` failed:\n{res.stderr}")
    else:
        log(f"ok: {' '.join(cmd)}")


# ------------------------------------------------------------------ loopback topology
def health(address, service, timeout=2.0):
    """grpc.health.v1.Health/Check status (1 = SERVING) or the gRPC error code's name.

    The health messages are encoded by hand (field 1: service string; reply
    field 1: status enum): Debian has no grpc_health package.
    """
    import grpc
    req = service.encode()
    req = (b"\x0a" + bytes([len(req)]) + req) if req else b""
    with grpc.insecure_channel(address) as ch:
        check = ch.unary_unary("/grpc.health.v1.Health/Check",
                               request_serializer=lambda b: b, response_deserializer=lambda b: b)
        try:
            reply = check(req, timeout=timeout)
        except grpc.RpcError as e:
            return e.code().name
    return reply[1] if len(reply) >= 2 and reply[0] == 0x08 else 0


def server_info(address, token):
    """The status code name of gpujoin.v1.GpuJoin/GetServerInfo (empty request)."""
    import grpc
    with grpc.insecure_channel(address) as ch:
        call = ch.unary_unary("/gpujoin.v1.GpuJoin/GetServerInfo",
                              request_serializer=lambda b: b, response_deserializer=lambda b: b)
        md = [("authorization", f"Bearer {token}")] if token else None
        try:
            call(b"", timeout=10, metadata=md)
            return "OK"
        except grpc.RpcError as e:
            return f"{e.code().name}: {e.details()}"


def wait_for(what, fn, timeout_s, procs):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        procs.check_alive()
        last = fn()
        if last is True:
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what} (last: {last})")


def loopback_port(hosts):
    """A TCP port free on every host address in `hosts`."""
    for _ in range(50):
        port = free_port()
        try:
            for h in hosts:
                with socket.socket() as s:
                    s.bind((h, port))
            return port
        except OSError:
            continue
    raise AssertionError(f"no port free on all of {hosts}")


def deployed_argv(w, overrides, drop=()):
    """The workload's args with `overrides` ({--flag: value}) replacing or adding flags."""
    argv, seen = [], set()
    for flag, value in w.flags.items():
        if flag in drop:
            continue
        seen.add(flag)
        argv.append(f"{flag}={overrides.get(flag, value)}")
    argv += [f"{f}={v}" for f, v in overrides.items() if f not in seen]
    return argv


def topology(args, st, fails):
    if st["rt_help"] is None:
        log(f"SKIP: loopback topology: gpujoin-router binary {args.router!r} is missing "
            "(scale-out not built yet)")
        return
    if "--shard" not in st["gj_help"]:
        log(f"SKIP: loopback topology: {args.gpujoind} --help has no --shard (scale-out not built yet)")
        return
    n, sts, router = st["n"], st["sts"], st["router"]
    # The manifests' --shard-pattern shape on loopback: 127.0.{i}.1 is loopback on Linux.
    hosts = [f"127.0.{i}.1" for i in range(n)]
    port = loopback_port(hosts)
    workdir = tempfile.mkdtemp(prefix="gpujoin-k8s-topology-")
    token = "k8s-topology-test-token"
    token_file = os.path.join(workdir, "token")
    with open(token_file, "w") as f:
        f.write(token)
    procs = Processes(workdir)
    ok = False
    try:
        shard_procs = []
        for i in range(n):
            data = os.path.join(workdir, f"data-{i}")
            os.mkdir(data)
            argv = [args.gpujoind] + deployed_argv(sts, {
                "--listen": f"{hosts[i]}:{port}", "--metrics-listen": f"127.0.0.1:{free_port()}",
                "--backend": "cpu", "--data-dir": data, "--shard": f"{i}/{n}",
                "--auth-token-file": token_file,
                # Gentle on a 2-core CI machine; a short drain keeps the shutdown quick.
                "--drain-grace": "0", "--drain-timeout": "2", "--cpu-threads": "2", "--executor-threads": "2"})
            shard_procs.append(procs.start(f"gpujoind-{i}", argv))
        router_addr = f"127.0.0.1:{free_port()}"
        argv = [args.router] + deployed_argv(router, {
            "--listen": router_addr, "--metrics-listen": f"127.0.0.1:{free_port()}",
            "--shard-pattern": f"127.0.{{i}}.1:{port}", "--shard-count": str(n),
            "--auth-token-file": token_file, "--shard-token-file": token_file})
        router_proc = procs.start("gpujoin-router", argv)

        for i in range(n):
            wait_for(f"gpujoind-{i} health SERVING", lambda i=i: health(f"{hosts[i]}:{port}", "") == 1, 20, procs)
        for svc in ("", "gpujoin.v1.GpuJoin"):
            wait_for(f"gpujoin-router health SERVING (service {svc!r})",
                     lambda svc=svc: health(router_addr, svc) == 1, 20, procs)
        log("ok: gpujoin-router SERVING with every shard up")
        got = server_info(router_addr, None)
        if not got.startswith("UNAUTHENTICATED"):
            fails.add(f"gpujoin-router --auth-token-file: GetServerInfo without the token gave {got}, "
                      "want UNAUTHENTICATED")
        got = server_info(router_addr, token)
        if got != "OK":
            fails.add(f"gpujoin-router: GetServerInfo with the token gave {got}, want OK "
                      "(--shard-token-file must reach the shards)")

        # A shard that stops takes the router out of SERVING (never a partial answer).
        last = n - 1
        os.killpg(shard_procs[last].pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while health(router_addr, "") == 1 and time.monotonic() < deadline:
            time.sleep(0.25)
        if health(router_addr, "") == 1:
            fails.add(f"gpujoin-router stays SERVING 15s after gpujoind-{last} stopped")
        else:
            log(f"ok: gpujoin-router left SERVING after gpujoind-{last} stopped")
        if shard_procs[last].wait(timeout=10) != 0:
            fails.add(f"gpujoind-{last} exited {shard_procs[last].returncode} on SIGTERM, want 0")

        for name, p in [("gpujoin-router", router_proc)] + [(f"gpujoind-{i}", shard_procs[i]) for i in range(last)]:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                rc = p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                fails.add(f"{name} did not exit within 10s of SIGTERM")
                continue
            if rc != 0:
                fails.add(f"{name} exited {rc} on SIGTERM, want 0")
        ok = not fails.items
    finally:
        procs.stop_all(show_logs=not ok)
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpujoind", required=True, help="the gpujoind binary (its --help and the topology)")
    ap.add_argument("--router", required=True, help="the gpujoin-router binary; a missing one skips its parts")
    ap.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--kubectl", help="kubectl, to render the kustomization")
    ap.add_argument("--docker-compose", help="docker-compose, to render the profile sharded")
    ap.add_argument("--timeout", type=float, default=55, help="seconds for the whole test")
    args = ap.parse_args()
    args.source_dir = os.path.abspath(args.source_dir)
    for attr in ("kubectl", "docker_compose"):
        v = getattr(args, attr)
        if v and (v.endswith("-NOTFOUND") or not os.access(v, os.X_OK)):
            setattr(args, attr, None)

    def on_alarm(signum, frame):
        raise TimeoutError(f"kubernetes_manifests_test: exceeded {args.timeout:.0f}s")
    signal.signal(signal.SIGALRM, on_alarm)
    def on_term(signum, frame):
        raise KeyboardInterrupt("SIGTERM")
    signal.signal(signal.SIGTERM, on_term)
    signal.alarm(int(args.timeout))

    fails = Failures()
    try:
        st = static_checks(args, fails)
        rc = fails.report("kubernetes manifests")
        if rc == 0 and st:
            topology(args, st, fails)
            rc = fails.report("loopback topology")
    except (AssertionError, TimeoutError, RuntimeError, OSError, KeyError, TypeError) as e:
        log(f"FAIL: {type(e).__name__}: {e}")
        rc = 1
    finally:
        signal.alarm(0)
    return rc


if __name__ == "__main__":
    sys.exit(main())
