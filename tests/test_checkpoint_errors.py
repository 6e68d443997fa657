"""Restore tells three failures apart and never renames or deletes what it could not read: a checkpoint
naming what this install lacks (version skew) stops with one line, a disk error that may pass is tried
again and then reported, and only damage falls back, keeping the damaged checkpoint out of the pruning."""

import dataclasses
import errno
import fractions
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import REPO
from tests.test_checkpoint import files_and_hashes
from tfdqn.agent.agent import make_agent
from tfdqn.agent.networks import make_network
from tfdqn.config import DQNConfig
from tfdqn.errors import RunFailure, UserError
from tfdqn.replay.ring import ReplayRing
from tfdqn.run import checkpoint as checkpoint_module
from tfdqn.run.checkpoint import Checkpointer, restore_online
from tfdqn.run.markers import complete_steps, installed_versions


def _parts(hidden=(256, 256)):
    config = DQNConfig()
    config = dataclasses.replace(config, network=dataclasses.replace(config.network, hidden_sizes=hidden))
    return make_agent(config, (4,), np.float32, 2), ReplayRing(1000, (4,), np.float32)


def _two_checkpoints(directory, newest_state=None):
    """Checkpoints at env steps 300 and 600 (state {"at": step}, or `newest_state` at 600)."""
    agent, replay = _parts()
    checkpointer = Checkpointer(directory, agent, replay)
    for step in (300, 600):
        frame = np.full((1, 4), step, np.float32)
        replay.add(frame, [0], [1.0], [False], [False], frame)
        checkpointer.save(step, newest_state if newest_state is not None and step == 600 else {"at": step})
    return agent


def _rename_in_pickle(path, old: bytes, new: bytes) -> None:
    """What an upgrade that moved a module or class looks like to an old pickle: the same bytes, naming
    something else of the same length (so the pickle's framing stays valid)."""
    assert len(old) == len(new) and old in path.read_bytes()
    path.write_bytes(path.read_bytes().replace(old, new))


@pytest.mark.parametrize("old, new, named", [
    (b"fractions", b"fractionz", "fractionz.Fraction"),  # the module is gone
    (b"Fraction", b"Fractiom", "fractions.Fractiom"),  # the module is there, the class is not
])
def test_a_state_naming_what_this_install_lacks_stops_restore_and_changes_nothing(tmp_path, old, new, named):
    _two_checkpoints(tmp_path, newest_state={"kept": fractions.Fraction(1, 3)})
    _rename_in_pickle(tmp_path / "state-600.pkl", old, new)
    before = files_and_hashes(tmp_path)
    agent, replay = _parts()  # a resumed process's: it acts with the same network once restore stops
    with pytest.raises(UserError) as raised:
        Checkpointer(tmp_path, agent, replay).restore_latest()
    message = str(raised.value)
    assert "\n" not in message and named in message and f"env step 600 in {tmp_path}" in message
    assert f"allowed: the versions that wrote it (python {installed_versions()['python']}" in message
    assert f"tfdqn {installed_versions()['tfdqn']}" in message
    assert files_and_hashes(tmp_path) == before
    # Acting needs no pickled state: evaluation and export still read the newest network.
    assert restore_online(tmp_path, agent.online) == 600
    assert files_and_hashes(tmp_path) == before


def test_tensorflow_objects_that_differ_from_the_program_stop_restore_and_change_nothing(tmp_path):
    _two_checkpoints(tmp_path)
    before = files_and_hashes(tmp_path)
    with pytest.raises(UserError, match=r"env step 600 .* names TensorFlow objects that differ"):
        Checkpointer(tmp_path, *_parts(hidden=(32,))).restore_latest()
    with pytest.raises(UserError, match=r"env step 600 .* names TensorFlow objects that differ"):
        restore_online(tmp_path, make_network("mlp", (4,), np.float32, 2, (32,)))
    assert files_and_hashes(tmp_path) == before


@pytest.fixture
def sleeps(monkeypatch):
    """The waits between tries, recorded instead of slept."""
    waited = []
    monkeypatch.setattr(checkpoint_module.time, "sleep", waited.append)
    return waited


def test_a_transient_read_error_is_tried_again(tmp_path, monkeypatch, sleeps, capsys):
    _two_checkpoints(tmp_path)
    load, failures = checkpoint_module._load_state, []

    def eio_once(path):
        if not failures:
            failures.append(path)
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))
        return load(path)

    monkeypatch.setattr(checkpoint_module, "_load_state", eio_once)
    assert Checkpointer(tmp_path, *_parts()).restore_latest() == (600, {"at": 600})
    assert failures == [tmp_path / "state-600.pkl"] and len(sleeps) == 1 and capsys.readouterr().err == ""


@pytest.mark.parametrize("error, tries", [
    (OSError(errno.EMFILE, os.strerror(errno.EMFILE), "state-600.pkl"), 4),
    (tf.errors.UnknownError(None, None, "ckpt-600.data-00000-of-00001: Input/output error"), 4),
    (tf.errors.ResourceExhaustedError(None, None, "out of file handles"), 4),
    (PermissionError(errno.EACCES, os.strerror(errno.EACCES), "state-600.pkl"), 1),  # does not pass: no retry
], ids=["EMFILE", "tf-EIO", "tf-resource-exhausted", "EACCES"])
def test_a_disk_error_that_stays_is_reported_with_nothing_renamed_or_deleted(tmp_path, monkeypatch, sleeps,
                                                                             error, tries):
    _two_checkpoints(tmp_path)
    before = files_and_hashes(tmp_path)
    calls = []

    def failing(*args):
        calls.append(args)
        raise error

    monkeypatch.setattr(checkpoint_module, "_load_state", failing)
    agent, replay = _parts()  # a resumed process's, whose evaluation then reads the network alone
    with pytest.raises(RunFailure) as raised:
        Checkpointer(tmp_path, agent, replay).restore_latest()
    message = str(raised.value)
    assert f"checkpoint at env step 600 in {tmp_path} could not be read" in message and "\n" not in message
    assert "nothing was renamed or deleted" in message
    assert len(calls) == tries and len(sleeps) == tries - 1  # never fell back to the older checkpoint
    monkeypatch.setattr(checkpoint_module, "_load_matched", failing)
    with pytest.raises(RunFailure, match="could not be read"):
        restore_online(tmp_path, agent.online)
    assert files_and_hashes(tmp_path) == before


@pytest.mark.slow
def test_a_real_emfile_is_reported_while_it_stays_and_tried_again_until_it_passes(tmp_path):
    """A real EMFILE: the process's descriptor table is filled under a lowered RLIMIT_NOFILE; the first
    restore finds it full at every try, the second frees it at its first wait."""
    _two_checkpoints(tmp_path)
    before = files_and_hashes(tmp_path)
    script = textwrap.dedent(f"""
        import os, resource, sys, time
        sys.path.insert(0, {str(REPO)!r})
        from tests.test_checkpoint_errors import _parts
        from tfdqn.errors import RunFailure
        from tfdqn.run.checkpoint import Checkpointer
        checkpointer = Checkpointer({str(tmp_path)!r}, *_parts())
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 64,) * 2)
        held = []
        try:
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError as error:
            assert error.errno == 24, error  # EMFILE
        try:
            checkpointer.restore_latest()
        except RunFailure as error:
            print(error)
        sleep, waits = time.sleep, []
        def free_then_sleep(seconds):
            waits.append(seconds)
            while held:
                os.close(held.pop())
            sleep(seconds)
        time.sleep = free_then_sleep
        print(checkpointer.restore_latest(), len(waits))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr
    reported, restored = result.stdout.strip().splitlines()[-2:]
    assert reported == (f"checkpoint folder {tmp_path} could not be read: {tmp_path}: EMFILE (Too many open files) "
                        f"after 4 tries; nothing was renamed or deleted; run the command again once it reads")
    assert restored == "(600, {'at': 600}) 1"
    assert files_and_hashes(tmp_path) == before


def test_damaged_newest_falls_back_and_the_saves_after_keep_it_and_the_one_resumed_from(tmp_path, capsys):
    _two_checkpoints(tmp_path)
    data = next(tmp_path.glob("ckpt-600.data-*"))
    data.write_bytes(data.read_bytes()[:100])  # a torn TensorFlow data file
    damaged = {name: digest for name, digest in files_and_hashes(tmp_path).items() if "-600" in name}
    agent, replay = _parts()
    checkpointer = Checkpointer(tmp_path, agent, replay)
    assert checkpointer.restore_latest() == (300, {"at": 300})
    warning = capsys.readouterr().err.strip().splitlines()
    assert len(warning) == 1 and "env step 600" in warning[0] and "left as it is" in warning[0]
    checkpointer.save(400, {"at": 400})  # 600 does not count: 400 and the 300 resumed from are kept
    assert complete_steps(tmp_path) == [600, 400, 300]
    checkpointer.save(500, {"at": 500})
    assert complete_steps(tmp_path) == [600, 500, 400] and not list(tmp_path.glob("ckpt-300.*"))
    assert damaged.items() <= files_and_hashes(tmp_path).items()  # untouched, every file of it
    resumed = _parts()  # a later process's, resuming twice
    assert Checkpointer(tmp_path, *resumed).restore_latest() == (500, {"at": 500})
    checkpointer.save(600, {"at": 600})  # the run's own checkpoint at that step replaces the damaged one
    assert Checkpointer(tmp_path, *resumed).restore_latest() == (600, {"at": 600})
    assert complete_steps(tmp_path) == [600, 500]


def test_restore_online_falls_back_past_damage_and_changes_nothing(tmp_path, capsys):
    _two_checkpoints(tmp_path)
    next(tmp_path.glob("ckpt-600.data-*")).write_bytes(b"")
    before = files_and_hashes(tmp_path)
    assert restore_online(tmp_path, _parts()[0].online) == 300
    assert "env step 600" in capsys.readouterr().err and files_and_hashes(tmp_path) == before


def test_a_damaged_pickle_is_damage_not_skew(tmp_path, capsys):
    _two_checkpoints(tmp_path)
    (tmp_path / "state-600.pkl").write_bytes(pickle.dumps({"at": 600})[:-3])
    assert Checkpointer(tmp_path, *_parts()).restore_latest() == (300, {"at": 300})
    assert "env step 600" in capsys.readouterr().err
    assert (tmp_path / "ckpt-600.complete").exists()


def test_a_replay_saved_in_another_layout_is_a_version_skew_not_damage(tmp_path):
    """A checkpoint from a tfdqn whose ring kept other counters (the per-stream layout before the shared
    ring) stops restore in one line instead of falling back to an older checkpoint of the same layout."""
    import json

    _two_checkpoints(tmp_path)
    for step in (300, 600):
        manifest = json.loads((tmp_path / f"replay-{step}.json").read_text())
        del manifest["counters"]["oldest"]
        (tmp_path / f"replay-{step}.json").write_text(json.dumps(manifest))
    before = files_and_hashes(tmp_path)
    with pytest.raises(UserError, match=r"env step 600 .* names a replay layout without oldest, which this install"):
        Checkpointer(tmp_path, *_parts()).restore_latest()
    assert files_and_hashes(tmp_path) == before
