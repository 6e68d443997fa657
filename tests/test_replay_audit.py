"""The replay audit (`replay.audit`): what it catches on a real ring, a clean record in every mode of the loop on
CartPole and on Pong's frames, and through SIGKILLs and resumes."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.conftest import REPO, SMALL_CARTPOLE, checkpoint_steps, train_in_process, wait_for_checkpoints
from tests.test_resume import variables
from tfdqn.errors import RunFailure
from tfdqn.replay.audit import ReplayAudit, _close
from tfdqn.replay.frame_codec import encode_frames, make_codec
from tfdqn.replay.ring import ReplayRing

FRAME = (3, 3)


def _audited_ring(compression: str = "none", capacity: int = 64) -> ReplayRing:
    ring = ReplayRing(capacity, FRAME, np.uint8, stack_size=4, num_streams=2, seed=0, n_step=3, gamma=0.9,
                      clip_rewards=True, compression=compression)
    ring.audit = ReplayAudit(FRAME, np.uint8, 4, 3, 0.9, True, keep=2 * capacity)
    return ring


def _step(ring: ReplayRing, rng: np.random.Generator, encoded: bool = False) -> None:
    """One step of both streams: random frames, actions and rewards (some beyond ±1, which the loss clips), episodes
    that terminate or are truncated now and then."""
    frame, final = rng.integers(0, 256, (2, *FRAME), np.uint8), rng.integers(0, 256, (2, *FRAME), np.uint8)
    if encoded:  # as actors in processes hand them over
        codec = make_codec(ring.compression, 9)
        frame, final = encode_frames(codec, frame, 2), encode_frames(codec, final, 2)
    ended = rng.random(2)
    ring.add(frame, rng.integers(0, 4, 2), rng.integers(-3, 4, 2).astype(np.float32), ended < 0.08,
             (ended >= 0.08) & (ended < 0.12), final)


@pytest.mark.parametrize("compression, encoded", [("none", False), ("lz4", False), ("zstd", True)])
def test_every_batch_of_a_ring_that_wraps_many_times_matches_what_was_written(compression, encoded):
    ring, rng = _audited_ring(compression), np.random.default_rng(0)
    checked = 0
    for _ in range(600):
        _step(ring, rng, encoded)
        if ring.can_sample(8):
            indices = ring.sample_indices(8, draws=16)
            ring.audit.check(indices, ring.drawn(indices), *ring.stack(indices, 2)[:5])
            checked += 16
    assert ring.audit.checked == checked > 8000


def _drawn_batch(seed: int = 1):
    ring, rng = _audited_ring(), np.random.default_rng(seed)
    for _ in range(200):
        _step(ring, rng)
    indices = ring.sample_indices(16)
    return ring, rng, indices, ring.drawn(indices), ring.stack(indices, 1)


@pytest.mark.parametrize("field, change, says", [
    ("reward", lambda x: x + 0.5, "-step return"),
    ("action", lambda x: (x + 1) % 4, "action"),
    ("bootstrap", lambda x: np.where(x > 0, 0.0, 0.9), "bootstrap"),
    ("observation", lambda x: x ^ np.uint8(1), "observation: frame"),
    ("next_observation", lambda x: x ^ np.uint8(1), "next observation: frame"),
])
def test_a_batch_that_differs_from_what_was_written_stops_with_the_slot_named(field, change, says):
    ring, _, indices, drawn, batch = _drawn_batch()
    tampered = batch._replace(**{field: change(getattr(batch, field))})
    with pytest.raises(RunFailure) as failure:
        ring.audit.check(indices, drawn, *tampered[:5])
    message = str(failure.value)
    assert message.startswith(f"replay audit: slot {indices[0]} (stream {drawn[0, 0]}, its write {drawn[1, 0]})")
    assert says in message and "\n" not in message
    ring.audit.check(indices, drawn, *batch[:5])  # the batch as gathered passes


def test_the_audits_closeness_of_returns_and_bootstraps_is_numpys_isclose():
    """The audit compares each transition's n-step return and bootstrap in plain Python: as np.isclose does, at
    both tolerances it uses, infinities and NaN included."""
    values = [0.0, -0.0, 1.0, -1.0, 1e-7, 1e-6, 2e-5, 0.9, 0.99, 0.99999, 1.00001, 1.0001, 2.99997, 3.0, 1e300,
              -1e300, np.inf, -np.inf, np.nan]
    for rtol, atol in ((1e-5, 1e-5), (1e-5, 1e-7)):
        ours = [[_close(a, b, rtol, atol) for b in values] for a in values]
        assert ours == np.isclose(np.array(values)[:, None], values, rtol=rtol, atol=atol).tolist()


def test_a_batch_gathered_after_its_slots_were_rewritten_is_caught():
    """What an async learner's prefetch did before the draw and the gather became one: slots drawn, a step added
    meanwhile that rewrites one of them, then the drawn transitions gathered from the slots as they are now."""
    ring, rng, indices, drawn, _ = _drawn_batch()
    while (ring.drawn(indices) == drawn).all():
        _step(ring, rng)
    with pytest.raises(RunFailure, match="replay audit: slot"):
        ring.audit.check(indices, drawn, *ring.stack(indices, 1)[:5])


def test_the_records_and_counts_go_through_a_checkpoint():
    ring, rng, indices, drawn, batch = _drawn_batch()
    restored = ReplayAudit(FRAME, np.uint8, 4, 3, 0.9, True, keep=128)
    restored.load_arrays({name: np.asarray(value) for name, value in ring.audit.arrays().items()})
    restored.check(indices, drawn, *batch[:5])
    assert restored.arrays().keys() == ring.audit.arrays().keys()
    for name, value in ring.audit.arrays().items():
        np.testing.assert_array_equal(restored.arrays()[name], value)


# Actors in processes and on Ray are audited in tests/test_actors.py's runs of those modes.
MODES = {
    "plain": [],
    "async": ["--set", "run.async_learner=true"],
    "prefetch": ["--set", "replay.prefetch=true"],
    "async-prefetch": ["--set", "run.async_learner=true", "--set", "replay.prefetch=true"],
    "device-replay": ["--set", "replay.device=accelerator"],
    "prioritized-host": ["--set", "replay.sampler=prioritized"],
    "prioritized-graph": ["--set", "replay.sampler=prioritized", "--set", "replay.device=accelerator"],
    "compressed": ["--set", "replay.compression=zstd"],
}
AUDITED = ["--set", "replay.audit=true", "--set", "learner.n_step=3", "--set", "run.final_eval_episodes=1", "--quiet"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_every_batch_of_a_cartpole_run_is_checked_and_found_as_written_in_each_mode(tmp_path, mode):
    args = [*SMALL_CARTPOLE, "--total-steps", "500", "--learning-starts", "200", *AUDITED, *MODES[mode],
            "--logdir", str(tmp_path), "--run-name", "a"]
    result = train_in_process(*args)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    batch_size = 64  # tests/data/cartpole_small.yaml's (the packaged cartpole.yaml's)
    assert summary["updates"] > 0 and summary["replay_audit_checked"] == summary["updates"] * batch_size


@pytest.mark.slow
@pytest.mark.parametrize("settings", [
    {"replay.compression": "lz4", "replay.prefetch": True, "run.async_learner": True, "replay.sampler": "prioritized"},
    {"replay.device": "accelerator", "replay.sampler": "prioritized"}], ids=["host", "device"])
def test_every_batch_of_a_pong_run_with_stacks_and_episode_ends_is_found_as_written(tmp_path, settings):
    """Stacks of 4 84x84 frames and 3-step returns across games truncated every 100 agent steps."""
    import tfdqn

    overrides = {"run.total_steps": 300, "run.learning_starts": 150, "replay.capacity": 200, "run.log_every": 300,
                 "run.final_eval_episodes": 1, "env.max_episode_frames": 400, "learner.n_step": 3,
                 "replay.audit": True, **settings}
    config = tfdqn.DQNConfig.for_env("Pong", overrides)
    summary = tfdqn.train(config, tmp_path / "run", quiet=True)
    assert summary["updates"] > 0
    assert summary["replay_audit_checked"] == summary["updates"] * config.replay.batch_size
    assert summary["replay_slots_filled"] == 200  # the ring wrapped: 300 steps and 3 final frames in 200 slots


def _start(*args):
    return subprocess.Popen([sys.executable, "-m", "tfdqn.train", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["prefetch-prioritized-compressed", "async-device-prioritized"])
def test_five_sigkills_at_random_moments_leave_a_clean_audit_and_the_counts_of_an_uninterrupted_run(tmp_path, mode):
    """Each run combines modes that checkpoint: prefetch, the host's prioritized sampler and compressed frames (a
    synchronous run, so it repeats bit for bit); the async learner, device replay and the in-graph prioritized
    sampler. Actors in processes and on Ray: tests/test_actors.py and tests/test_ray_cluster.py."""
    settings = {"prefetch-prioritized-compressed": ["--set", "replay.prefetch=true", "--set",
                                                    "replay.sampler=prioritized", "--set", "replay.compression=zstd"],
                "async-device-prioritized": ["--set", "run.async_learner=true", "--set", "replay.device=accelerator",
                                             "--set", "replay.sampler=prioritized"]}[mode]
    args = [*SMALL_CARTPOLE, "--total-steps", "3000", "--learning-starts", "200", "--checkpoint-every", "250",
            "--training-interval", "4", *AUDITED, *settings, "--logdir", str(tmp_path)]  # a quarter of the updates' time
    assert train_in_process(*args, "--run-name", "whole").returncode == 0
    run_dir, rng = tmp_path / "killed", np.random.default_rng(5)
    process, resumed_from = _start(*args, "--run-name", "killed"), 0
    for _ in range(5):
        wait_for_checkpoints(process, run_dir / "checkpoints", count=1, after=resumed_from)  # each resume moves on
        time.sleep(rng.uniform(0.0, 1.0))  # then a random moment
        assert process.poll() is None, process.communicate()[1]  # still training: the audit found nothing
        process.send_signal(signal.SIGKILL)
        process.wait()
        resumed_from = max(checkpoint_steps(run_dir / "checkpoints"), default=0)
        process = _start("--resume", str(run_dir), "--quiet")
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    whole, killed = (json.loads((tmp_path / name / "summary.json").read_text()) for name in ("whole", "killed"))
    for key in ("env_steps", "updates"):
        assert killed[key] == whole[key], key
    # every env step wrote one transition and every game that ended its final frame: none lost or written twice
    assert killed["replay_slots_filled"] == killed["env_steps"] + killed["episodes"]
    resumed_with = int(re.search(r"resumed from env step \d+ \((\d+) updates\)", out).group(1))
    assert killed["replay_audit_checked"] == (killed["updates"] - resumed_with) * 64  # every batch since
    if mode == "prefetch-prioritized-compressed":  # a synchronous mode: the same run, game for game and bit for bit
        assert (run_dir / "episodes.csv").read_text() == (tmp_path / "whole" / "episodes.csv").read_text()
        assert killed["final_eval_returns"] == whole["final_eval_returns"]
        resumed, uninterrupted = (variables(tmp_path / name / "checkpoints" / "ckpt-3000") for name in ("killed", "whole"))
        assert [name for name in uninterrupted if not np.array_equal(resumed[name], uninterrupted[name])] == []

