"""The snapshot calls of gpujoin.Client against a gpujoind with --data-dir:
save_index and load_index of a copy, list_files, delete_file, the file-name
rules and --max-copy-bytes, build_index(wait_durable=True) and
IndexInfo.durable_version, each failure raised as the Error subclass of its
gRPC code; and a server without --data-dir refusing them all."""
import contextlib
import time

import grpc
import numpy as np
import pytest

import gpujoin

KEYS = np.arange(1000, 4000, dtype=np.uint32)
PROBE = np.array([999, 1000, 1001, 3999, 4000], np.uint32)


@pytest.fixture()
def data_dir(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    return d


@contextlib.contextmanager
def raises(cls, code, *fragments):
    """pytest.raises(cls), then: it is a gpujoin.Error with `code` and a message
    holding every fragment."""
    with pytest.raises(cls) as info:
        yield info
    e = info.value
    assert isinstance(e, gpujoin.Error) and e.code == code, e
    for f in fragments:
        assert f in e.message, e.message


def test_wait_durable_answers_with_the_snapshot_written(start_gpujoind, data_dir):
    s = start_gpujoind(f"--data-dir={data_dir}")
    with gpujoin.Client(s.address) as c:
        info = c.build_index("t_dur", KEYS, wait_durable=True)
        assert (info.version, info.durable_version) == (1, 1)
        # In place when the call returns: no waiting.
        assert (data_dir / "t_dur.gjsnap").is_file()
        assert c.describe("t_dur").durable_version == 1
        again = c.build_index("t_dur", KEYS[:10], replace=True, wait_durable=True)
        assert (again.version, again.durable_version) == (2, 2)
        assert [(i.name, i.durable_version) for i in c.list()] == [("t_dur", 2)]
        # Without waiting the answer may come first; the file catches up.
        later = c.build_index("t_dur", KEYS[:20], replace=True)
        assert later.version == 3 and later.durable_version <= 3
        deadline = time.monotonic() + 30
        while c.describe("t_dur").durable_version != 3:
            assert time.monotonic() < deadline, "version 3 was not written in 30 s"
            time.sleep(0.05)


def test_save_list_load_and_delete_a_copy(start_gpujoind, data_dir):
    s = start_gpujoind(f"--data-dir={data_dir}", "--max-copy-bytes=64M")
    with gpujoin.Client(s.address) as c:
        c.build_index("t_a", KEYS, wait_durable=True)
        answers = c.lookup("t_a", PROBE).values.tolist()
        assert answers == [gpujoin.NO_MATCH, 0, 1, 2999, gpujoin.NO_MATCH]

        saved = c.save_index("t_a", "t_a.bak")
        assert isinstance(saved, gpujoin.SaveResult)
        assert (saved.file, saved.version) == ("t_a.bak", 1)
        assert saved.bytes == (data_dir / "t_a.bak").stat().st_size and saved.seconds >= 0
        own = c.save_index("t_a")
        assert (own.file, own.bytes) == ("t_a.gjsnap", (data_dir / "t_a.gjsnap").stat().st_size)

        files = c.list_files()
        assert all(isinstance(f, gpujoin.DataFile) for f in files)
        assert [(f.file, f.bytes, f.index, f.live) for f in files] == [
            ("t_a.bak", saved.bytes, "", False), ("t_a.gjsnap", own.bytes, "t_a", True)]
        assert abs(files[0].modified_unix_millis - time.time() * 1000) < 600e3

        loaded = c.load_index("t_b", "t_a.bak")
        assert isinstance(loaded, gpujoin.IndexInfo)
        assert (loaded.name, loaded.version, loaded.rows) == ("t_b", 1, len(KEYS))
        assert c.lookup("t_b", PROBE).values.tolist() == answers
        with raises(gpujoin.AlreadyExists, grpc.StatusCode.ALREADY_EXISTS, "t_b"):
            c.load_index("t_b", "t_a.bak")
        assert c.load_index("t_b", "t_a.bak", replace=True).version == 2
        with raises(gpujoin.NotFound, grpc.StatusCode.NOT_FOUND, '"missing.bak"'):
            c.load_index("t_c", "missing.bak")

        with raises(gpujoin.FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION,
                    'live index "t_a"'):
            c.delete_file("t_a.gjsnap")
        assert (data_dir / "t_a.gjsnap").exists()
        assert c.delete_file("t_a.bak") == saved.bytes
        assert not (data_dir / "t_a.bak").exists()
        with raises(gpujoin.NotFound, grpc.StatusCode.NOT_FOUND, '"t_a.bak"') as e:
            c.delete_file("t_a.bak")
        assert str(data_dir) not in e.value.message
        # Left: the snapshots of t_a and of t_b (written in the background after its load).
        assert [f.file for f in c.list_files() if f.index == ""] == []

        # A corrupt copy is DataLoss and installs nothing.
        c.save_index("t_a", "t_a.bad")
        raw = bytearray((data_dir / "t_a.bad").read_bytes())
        raw[len(raw) // 2] ^= 0x7F  # inside the table: a section checksum fails
        (data_dir / "t_a.bad").write_bytes(bytes(raw))
        with raises(gpujoin.DataLoss, grpc.StatusCode.DATA_LOSS):
            c.load_index("t_bad", "t_a.bad")
        with pytest.raises(gpujoin.NotFound):
            c.describe("t_bad")


def test_file_names_and_the_copy_limit(start_gpujoind, data_dir):
    s = start_gpujoind(f"--data-dir={data_dir}", "--max-copy-bytes=100K")
    with gpujoin.Client(s.address) as c:
        c.build_index("t_a", KEYS, wait_durable=True)
        c.build_index("t_o", KEYS[:100], wait_durable=True)
        other = (data_dir / "t_o.gjsnap").stat().st_size
        # Another index's snapshot: a restart would serve t_a's rows as t_o.
        with raises(gpujoin.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT,
                    '"t_o.gjsnap" is the snapshot file of index "t_o"', 'index "t_a"'):
            c.save_index("t_a", "t_o.gjsnap")
        assert (data_dir / "t_o.gjsnap").stat().st_size == other
        for name in (".hidden", "x.gjsnap.tmp-1-0", "../x.bak", "a/b"):
            with raises(gpujoin.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT, "file"):
                c.save_index("t_a", name)
            # DeleteFile takes any plain name (ListFiles lists an operator's
            # files too): these are not there; paths are refused.
            with pytest.raises(gpujoin.InvalidArgument if "/" in name else gpujoin.NotFound):
                c.delete_file(name)
            with pytest.raises(gpujoin.InvalidArgument):
                c.load_index("t_z", name)
        with pytest.raises(gpujoin.InvalidArgument):
            c.delete_file(".t_a.gjsnap.gjsnap.tmp-1-0")  # a write's temporary file

        first = c.save_index("t_a", "t_a-1.bak")
        assert 50 << 10 < first.bytes < 100 << 10, "the test needs copies of over half the limit"
        with raises(gpujoin.ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "--max-copy-bytes=102400") as e:
            c.save_index("t_a", "t_a-2.bak")
        assert str(data_dir) not in e.value.message
        assert not (data_dir / "t_a-2.bak").exists()
        c.save_index("t_a", "t_a-1.bak")  # replacing a copy counts it once
        c.delete_file("t_a-1.bak")
        assert c.save_index("t_a", "t_a-2.bak").bytes == first.bytes


def test_a_failed_write_fails_wait_durable_and_the_index_serves(start_gpujoind, data_dir):
    s = start_gpujoind(f"--data-dir={data_dir}", "--max-snapshot-bytes=1K")
    with gpujoin.Client(s.address) as c:
        with pytest.raises(gpujoin.Error) as e:
            c.build_index("t_f", KEYS, wait_durable=True, timeout=10)
        assert isinstance(e.value, gpujoin.ResourceExhausted), e.value
        assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "installed and serving" in e.value.message, e.value.message
        assert "--max-snapshot-bytes" in e.value.message, e.value.message
        info = c.describe("t_f")
        assert (info.version, info.durable_version) == (1, 0)
        assert c.lookup("t_f", PROBE).values.tolist()[1:3] == [0, 1]
        assert not (data_dir / "t_f.gjsnap").exists()


def test_without_data_dir_every_file_call_is_failed_precondition(client):
    code = grpc.StatusCode.FAILED_PRECONDITION
    with raises(gpujoin.FailedPrecondition, code, "spec.wait_durable", "--data-dir"):
        client.build_index("t_nodir", KEYS, wait_durable=True)
    with pytest.raises(gpujoin.NotFound):
        client.describe("t_nodir")
    assert client.build_index("t_nodir", KEYS[:3], replace=True).durable_version == 0
    for call in (client.list_files, lambda: client.delete_file("x.bak"),
                 lambda: client.save_index("t_nodir"), lambda: client.load_index("t_nodir2")):
        with raises(gpujoin.FailedPrecondition, code, "--data-dir"):
            call()
    client.drop("t_nodir")
