"""Snapshots through gpujoin.Client against a gpujoind with --data-dir: a build
is written to <name>.gjsnap (wait_durable: before the build returns), a drop
deletes the file before it returns (also while the background write of a build
just made may still run), and a restart serves only the indexes that were not
dropped."""
import numpy as np
import pytest

import gpujoin


def test_drop_deletes_the_snapshot_and_a_restart_serves_nothing(start_gpujoind, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    keys = np.arange(1000, 2000, dtype=np.uint32)
    first = start_gpujoind(f"--data-dir={data}")
    with gpujoin.Client(first.address) as c:
        info = c.build_index("t_snap", keys, payload={"tag": [f"t{k}" for k in keys.tolist()]},
                             wait_durable=True)
        c.build_index("t_keep", keys[:10], wait_durable=True)
        assert (data / "t_snap.gjsnap").is_file() and (data / "t_keep.gjsnap").is_file()
        assert c.describe("t_snap").durable_version == info.version
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
