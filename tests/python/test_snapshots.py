"""Snapshots through gpujoin.Client against a gpujoind with --data-dir: a build
is written to <name>.gjsnap in the background, a drop deletes the file before
it returns (also while the write may still run), and a restart serves only
the indexes that were not dropped."""
import time

import numpy as np
import pytest

import gpujoin


def wait_for(path, seconds=20):
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} was not written in {seconds} s"
        time.sleep(0.05)


def test_drop_deletes_the_snapshot_and_a_restart_serves_nothing(start_gpujoind, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    keys = np.arange(1000, 2000, dtype=np.uint32)
    first = start_gpujoind(f"--data-dir={data}")
    with gpujoin.Client(first.address) as c:
        c.build_index("t_snap", keys, payload={"tag": [f"t{k}" for k in keys.tolist()]})
        c.build_index("t_keep", keys[:10])
        wait_for(data / "t_snap.gjsnap")
        wait_for(data / "t_keep.gjsnap")
        c.drop("t_snap")
        assert not (data / "t_snap.gjsnap").exists()
        # Dropped right after its build: the background write is cancelled or its
        # file deleted, never left behind.
        c.build_index("t_quick", keys)
        c.drop("t_quick")
        assert not (data / "t_quick.gjsnap").exists()
    assert first.stop() == 0, "".join(first.log)
    assert sorted(p.name for p in data.iterdir()) == ["t_keep.gjsnap"]

    second = start_gpujoind(f"--data-dir={data}")
    with gpujoin.Client(second.address) as c:
        assert [i.name for i in c.list()] == ["t_keep"]
        for name in ("t_snap", "t_quick"):
            with pytest.raises(gpujoin.NotFound):
                c.describe(name)
        assert c.lookup("t_keep", keys[:3]).values.tolist() == [0, 1, 2]
    assert second.stop() == 0, "".join(second.log)
