#!/usr/bin/env python3
"""Lookup throughput of the Python client against gpujoin-loadtest, same server, same run.

Builds a uint32 index of --build-keys random keys, looks up --keys keys from a
numpy array (--hit-ratio of them present) with one gpujoin.Client.lookup call
(batches of --batch-rows, --in-flight unanswered, one stream), and runs
gpujoin-loadtest --rpc lookup with the same index size, batch size, one stream
and the same in-flight window. Prints both keys/s and their ratio (the issue
24 target: Python >= 80 % of the loadtest), as a table or --json.

    PYTHONPATH=client/python:build-d/python /usr/bin/python3 \\
        client/python/benchmarks/lookup_bench.py --gpujoind build-d/bin/gpujoind \\
        --loadtest build-d/bin/gpujoin-loadtest
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "python"))


def python_lookup(client, keys, build, a):
    """Seconds of the fastest of --repeats lookups of all `keys` (checked)."""
    best = None
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        r = client.lookup("py_bench", keys)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
        # Values are build rows: every found key maps back to itself.
        assert (build[r.values[r.found]] == keys[r.found]).all()
        assert abs(r.found.mean() - a.hit_ratio) < 0.01, r.found.mean()
    return best


def loadtest_lookup(binary, address, a):
    """keys/s of gpujoin-loadtest --rpc lookup with the same shape (its own index)."""
    out = subprocess.run(
        [binary, "--server", address, "--rpc", "lookup", "--build-keys", str(a.build_keys),
         "--batch-rows", str(a.batch_rows), "--concurrency", "1", "--in-flight", str(a.in_flight),
         "--duration", str(a.duration), "--warmup", "0.5", "--hit-ratio", str(a.hit_ratio),
         "--seed", str(a.seed), "--json"],
        check=True, capture_output=True, text=True).stdout
    (result,) = json.loads(out)["results"]
    assert result["error_count"] == 0 and result["wrong_answers"] == 0, result
    return result["keys_per_second"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", help="a running gpujoind (else --gpujoind starts one)")
    p.add_argument("--gpujoind", help="gpujoind binary to start (CPU backend)")
    p.add_argument("--loadtest", required=True, help="gpujoin-loadtest binary")
    p.add_argument("--keys", type=int, default=10_000_000)
    p.add_argument("--build-keys", type=int, default=1 << 20)
    p.add_argument("--batch-rows", type=int, default=1 << 16)
    p.add_argument("--in-flight", type=int, default=4)
    p.add_argument("--hit-ratio", type=float, default=0.9)
    p.add_argument("--duration", type=float, default=2, help="loadtest seconds per round")
    p.add_argument("--repeats", type=int, default=3, help="python lookups per round (fastest)")
    p.add_argument("--rounds", type=int, default=5, help="alternating loadtest/python rounds")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    server = None
    address = a.server
    if address is None:
        from conftest import Gpujoind
        server = Gpujoind(a.gpujoind)
        address = server.address
    import gpujoin
    rng = np.random.default_rng(a.seed)
    # Distinct keys below the reserved 0xffffffff, as the loadtest's index.
    build = np.unique(rng.integers(0, 0xFFFFFFFF, size=a.build_keys + a.build_keys // 8,
                                   dtype=np.uint32))[: a.build_keys]
    rng.shuffle(build)
    keys = build[rng.integers(0, len(build), size=a.keys)]
    miss = rng.random(a.keys) >= a.hit_ratio
    keys[miss] = rng.integers(0, 0xFFFFFFFF, size=int(miss.sum()), dtype=np.uint32)
    rows = []
    try:
        with gpujoin.Client(address, max_inflight=a.in_flight, batch_rows=a.batch_rows) as c:
            c.build_index("py_bench", build, load_factor=0.5, replace=True)
            c.lookup("py_bench", keys[: a.batch_rows * 8])  # warm-up
            for _ in range(a.rounds):  # alternate, so that both see the same machine
                lt = loadtest_lookup(a.loadtest, address, a)
                py = a.keys / python_lookup(c, keys, build, a)
                rows.append({"loadtest_keys_per_second": lt, "python_keys_per_second": py,
                             "ratio": py / lt})
            c.drop("py_bench")
    finally:
        if server:
            server.stop()
    ratios = sorted(r["ratio"] for r in rows)
    best_lt = max(r["loadtest_keys_per_second"] for r in rows)
    best_py = max(r["python_keys_per_second"] for r in rows)
    doc = {"keys": a.keys, "build_keys": a.build_keys, "batch_rows": a.batch_rows,
           "in_flight": a.in_flight, "streams": 1, "hit_ratio": a.hit_ratio, "rounds": rows,
           "median_ratio": ratios[len(ratios) // 2], "best_loadtest_keys_per_second": best_lt,
           "best_python_keys_per_second": best_py, "best_ratio": best_py / best_lt}
    if a.json:
        print(json.dumps(doc, indent=1))
        return
    print(f"lookup of {a.keys} uint32 keys, index of {a.build_keys}, batches of {a.batch_rows}, "
          f"1 stream, {a.in_flight} in flight, hit ratio {a.hit_ratio}")
    print(f"{'round':>5} {'loadtest Mkeys/s':>17} {'python Mkeys/s':>15} {'ratio':>6}")
    for i, r in enumerate(rows):
        print(f"{i:>5} {r['loadtest_keys_per_second'] / 1e6:>17.1f} "
              f"{r['python_keys_per_second'] / 1e6:>15.1f} {r['ratio']:>6.2f}")
    print(f"median ratio {doc['median_ratio']:.2f}; best of each {best_lt / 1e6:.1f} vs "
          f"{best_py / 1e6:.1f} Mkeys/s, ratio {doc['best_ratio']:.2f}")


if __name__ == "__main__":
    main()
