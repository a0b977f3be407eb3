"""`pip install client/python` builds the package with stubs generated from
proto/ (none are committed) and the installed copy talks to a server."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import suite_backend

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCE = os.path.join(ROOT, "client", "python")


def test_no_generated_stubs_are_tracked():
    tracked = subprocess.run(["git", "-C", ROOT, "ls-files", "client/python"], capture_output=True,
                             text=True, check=True).stdout.split()
    if not tracked:  # not a git checkout (an unpacked source tree): nothing to check
        return
    assert not [f for f in tracked if "_pb2" in f], tracked


@pytest.mark.timeout(200)  # pip's own limit is 120 s, the probe's 60 s
def test_pip_install_builds_stubs_and_the_installed_package_works(server, tmp_path):
    # A copy of the package alone: the proto is found through GPUJOIN_PROTO_DIR,
    # and the build writes nothing into the source tree.
    src = tmp_path / "src"
    shutil.copytree(SOURCE, src, ignore=shutil.ignore_patterns(
        "v1", "build", "*.egg-info", "__pycache__", "benchmarks"))
    site = tmp_path / "site"
    env = dict(os.environ, GPUJOIN_PROTO_DIR=os.path.join(ROOT, "proto"))
    env.pop("PYTHONPATH", None)
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
         "--disable-pip-version-check", "--target", str(site), str(src)],
        capture_output=True, text=True, env=env, timeout=120)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert (site / "gpujoin" / "v1" / "gpujoin_pb2.py").is_file()
    assert (site / "gpujoin" / "py.typed").is_file()
    # Run from an empty directory with only the installed copy on the path.
    probe = ("import sys, gpujoin; assert gpujoin.__file__.startswith(sys.argv[1]), gpujoin.__file__; "
             "c = gpujoin.Client(sys.argv[2]); c.build_index('t_pip', [5, 6], replace=True); "
             "print(c.lookup('t_pip', [6, 7]).values.tolist(), c.server_info().backend)")
    run = subprocess.run([sys.executable, "-c", probe, str(site), server.address], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60,
                         env=dict(env, PYTHONPATH=str(site)))
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["[1,", "4294967295]", suite_backend()]


def test_gpujoin_imports_without_dask_and_gpujoin_dask_names_what_to_install():
    # A process where importing dask fails (sys.modules entry None), as without it installed.
    probe = ("import sys; sys.modules['dask'] = None; import gpujoin; "
             "assert 'dask' not in dir(gpujoin), dir(gpujoin)\n"
             "try:\n    import gpujoin.dask\nexcept ImportError as e:\n    print(e)\n"
             "else:\n    raise SystemExit('gpujoin.dask imported without dask')")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gpujoin.dask needs Dask" in r.stdout
    assert "python3-dask and python3-distributed" in r.stdout
    assert "pip install 'dask[distributed]'" in r.stdout
