"""--track: a real offline Weights & Biases run holding the config and the scalars TensorBoard holds, and a
one-line error where wandb is not installed."""

import os

import pytest

from tests import wandb_records
from tests.conftest import TINY, run_module, train_in_process
from tfdqn.telemetry.tensorboard import read_events, read_scalars
from tfdqn.telemetry.tracking import STEP_METRIC, wandb_run_id

WANDB_OWN = {"_step", "_runtime", "_timestamp", STEP_METRIC}


def _offline():
    return {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}


@pytest.fixture
def offline_wandb_here(monkeypatch):
    """W&B offline in this process, for runs trained here (no TensorFlow start-up each); after the test its
    service stops and the variables it exported for child processes (WANDB_SERVICE) are gone again."""
    for key, value in _offline().items():
        monkeypatch.setenv(key, value)
    before = dict(os.environ)
    yield
    import wandb

    wandb.teardown()
    os.environ.clear()
    os.environ.update(before)


@pytest.mark.slow
def test_a_tracked_run_sends_its_config_and_every_tensorboard_scalar_and_goes_on_when_resumed(tmp_path,
                                                                                            offline_wandb_here):
    first = train_in_process(*TINY, "--total-steps", "1000", "--track", "--wandb-project", "tests",
                             "--logdir", str(tmp_path), "--run-name", "tracked")
    assert first.returncode == 0, first.stderr
    run_dir = tmp_path / "tracked"
    resumed = train_in_process("--resume", str(run_dir), "--total-steps", "1500", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    logs = sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    assert [log.name for log in logs] == [f"run-{wandb_run_id(run_dir)}.wandb"] * 2  # one W&B run, twice
    config = wandb_records.config(logs[0])
    assert config["learner"]["learning_rate"] == 0.0023 and config["tracking"]["wandb_project"] == "tests"
    rows = wandb_records.history(logs[0]) + wandb_records.history(logs[1])
    events = read_events(run_dir)
    scalar_tags = {tag for tag in events.Tags()["tensors"]
                   if events.SummaryMetadata(tag).plugin_data.plugin_name == "scalars"}
    assert {key for row in rows for key in row} - WANDB_OWN == scalar_tags and "charts/episode_return" in scalar_tags
    tensorboard = read_scalars(run_dir, "losses/td_loss")
    sent = [(row[STEP_METRIC], row["losses/td_loss"]) for row in rows if "losses/td_loss" in row]
    assert [step for step, _ in sent] == [step for step, _ in tensorboard] and sent[-1][0] == 1500
    assert [value for _, value in sent] == pytest.approx([value for _, value in tensorboard], rel=1e-6)


def test_without_wandb_installed_track_is_one_line_naming_the_extra(tmp_path):
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['wandb'] = None  # as if not installed\n")
    env = {**os.environ, "PYTHONPATH": f"{hide}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = run_module("tfdqn.train", *TINY, "--track", "--logdir", str(tmp_path / "runs"), env=env, timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert 'needs the wandb package, which is not installed; allowed: pip install "tfdqn[wandb]"' in result.stderr
    assert not (tmp_path / "runs").exists()
