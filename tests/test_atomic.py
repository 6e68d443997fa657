"""The one atomic-write helper: the file is synced, renamed into place, and its folder synced so the
rename survives a power loss; an error mid-write leaves the old file and no temporary one."""

import json
import os
import subprocess
import sys
import threading

import pytest

from tests.conftest import REPO
from tfdqn import atomic
from tfdqn.atomic import atomic_path, atomic_write, write_json


@pytest.fixture
def synced(monkeypatch):
    """(path each fsync'd descriptor names, the published file's bytes at that moment), in order."""
    calls, fsync = [], os.fsync

    def recording_fsync(fd):
        calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", recording_fsync)
    return calls


def test_the_file_then_its_folder_are_synced_after_the_rename(tmp_path, synced):
    target = tmp_path / "state.json"
    target.write_text("old")
    data = {"env_steps": 600, "returns": list(range(1000))}
    written = write_json(target, data)
    assert synced == [str(tmp_path / f"state.json.{os.getpid()}-{threading.get_ident()}.tmp"), str(tmp_path)]
    assert json.loads(target.read_text()) == data and written == target.stat().st_size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_atomic_path_syncs_the_folder_too(tmp_path, synced):
    with atomic_path(tmp_path / "video.mp4") as tmp:
        tmp.write_bytes(b"\x00" * 4096)
    assert synced == [str(tmp_path / f"video.mp4.{os.getpid()}-{threading.get_ident()}.tmp"), str(tmp_path)]
    assert (tmp_path / "video.mp4").read_bytes() == b"\x00" * 4096


def test_an_error_mid_write_leaves_the_old_file_and_no_temporary_one(tmp_path, synced):
    target = tmp_path / "episodes.csv"
    atomic_write(target, "old\n")
    synced.clear()
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk gone")
    assert target.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["episodes.csv"]
    assert synced == []  # nothing was published


def test_writers_racing_for_one_file_each_rename_a_whole_one(tmp_path):
    # tuning workers that end a study together write the same plots and tables
    target = tmp_path / "history.txt"
    script = ("import pathlib, sys; from tfdqn.atomic import atomic_write\n"
              "for _ in range(300): atomic_write(pathlib.Path(sys.argv[1]), sys.argv[2] * 1000)")
    writers = [subprocess.Popen([sys.executable, "-c", script, str(target), mark], cwd=REPO, stderr=subprocess.PIPE,
                                text=True) for mark in "ab"]
    assert [w.wait(timeout=120) for w in writers] == [0, 0], [w.stderr.read() for w in writers]
    assert target.read_text() in ("a" * 1000, "b" * 1000)
    assert [p.name for p in tmp_path.iterdir()] == ["history.txt"]
