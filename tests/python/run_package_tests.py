#!/usr/bin/env python3
"""CTest entry of the Python package tests (client/python, tests/python/test_*.py).

Generates the gpujoin.v1 stubs from proto/ into --stubs-dir (as the CMake
target gpujoin_python_stubs does), puts the package's sources and the stubs on
sys.path and runs pytest against --gpujoind. Exits 77 (CTest: Skipped, with
the reason printed) when a Python module it needs is missing.
"""
import argparse
import importlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SKIP = 77
NEEDS = [("grpc", "python3-grpcio"), ("grpc_tools.protoc", "python3-grpc-tools"),
         ("numpy", "python3-numpy"), ("pytest", "python3-pytest")]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpujoind", required=True)
    p.add_argument("--stubs-dir", required=True, help="where gpujoin/v1/*.py are generated")
    a, pytest_args = p.parse_known_args()  # the rest goes to pytest (-k, -x, ...)
    missing = []
    for module, package in NEEDS:
        try:
            importlib.import_module(module)
        except ImportError as e:
            missing.append(f"{module} ({package}: {e})")
    if missing:
        print("SKIPPED: the Python package tests need " + ", ".join(missing)
              + "; scripts/install-deps installs them", flush=True)
        return SKIP
    sys.path[:0] = [os.path.join(ROOT, "client", "python"), a.stubs_dir]
    import build_stubs
    build_stubs.generate(a.stubs_dir, os.path.join(ROOT, "proto"))
    import pytest
    tests = sorted(os.path.join(HERE, f) for f in os.listdir(HERE)
                   if f.startswith("test_") and f.endswith(".py"))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "client", "python"), a.stubs_dir, os.environ.get("PYTHONPATH", "")])
    return pytest.main(["-v", "-p", "no:cacheprovider", f"--rootdir={HERE}",
                        f"--gpujoind={a.gpujoind}", *tests, *pytest_args])


if __name__ == "__main__":
    sys.exit(main())
