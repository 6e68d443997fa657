"""`load_policy` and the Python API: NumPy in and out, a run folder and its export agree, `import tfdqn`
stays light, and the Python API example of docs/guide/getting-started.md runs as written."""

import contextlib
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO
from tfdqn import load_policy


def doc_blocks(page: str, heading: str, language: str) -> list[str]:
    """The fenced `language` code blocks of the section `## heading` of `page` (README.md or a docs page)."""
    text = (REPO / page).read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


def _python(code: str, cwd, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)})


def _observations(count: int) -> np.ndarray:
    return np.random.default_rng(0).normal(0, 0.5, size=(count, 4)).astype(np.float32)


@pytest.mark.slow
def test_a_run_folder_and_its_export_give_the_same_actions_and_q_values(cartpole_run):
    run_dir, _ = cartpole_run
    from_run, from_export = load_policy(run_dir), load_policy(run_dir / "policy")
    batch = _observations(16)
    assert from_run.env_steps == from_export.env_steps == 1500 and from_run.env_id == "CartPole-v1"
    np.testing.assert_allclose(from_run.q_values(batch), from_export.q_values(batch), rtol=1e-6)
    np.testing.assert_array_equal(from_run.act(batch), from_export.act(batch))
    assert from_run.act(batch).shape == (16,) and from_run.q_values(batch).shape == (16, 2)
    assert from_run.act(batch[3]) == from_run.act(batch)[3]  # one observation: a scalar action
    assert from_run.q_values(batch[3].tolist()).shape == (2,)  # lists and float64 are taken too


@pytest.mark.slow
def test_epsilon_draws_uniform_actions_from_the_seed_and_bad_shapes_are_named(cartpole_run):
    policy = load_policy(cartpole_run[0] / "policy", seed=5)
    batch = _observations(4000)
    actions = policy.act(batch, epsilon=1.0)
    assert actions.dtype == np.int32 and 0.45 < actions.mean() < 0.55
    np.testing.assert_array_equal(actions, load_policy(cartpole_run[0] / "policy", seed=5).act(batch, epsilon=1.0))
    with pytest.raises(ValueError, match=r"shape \(2, 3\) do not fit this policy; allowed: \(4\) or \(batch, 4\)"):
        policy.act(np.zeros((2, 3)))


def test_import_tfdqn_does_not_import_tensorflow(tmp_path):
    result = _python("import sys, tfdqn; tfdqn.DQNConfig; print(sorted(m for m in ('tensorflow', 'keras') "
                     "if m in sys.modules), tfdqn.__version__)", tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("[] 0."), result.stderr


def test_for_env_is_the_config_the_command_line_runs():
    from tfdqn import DQNConfig
    from tfdqn import config as config_lib

    config = DQNConfig.for_env("Breakout", {"run.total_steps": "1e4", "replay.capacity": 5000})
    assert config == config_lib.resolve_config([], {"env.id": "Breakout", "run.total_steps": 10_000,
                                                    "replay.capacity": 5000})
    assert config.network.kind == "nature_cnn" and config.run.total_steps == 10_000


@pytest.mark.slow
def test_the_readme_python_api_example_runs_as_written_and_its_callback_example_after_it(tmp_path, monkeypatch):
    """The callback example trains the example's config again in the same folder: a second run, a folder of
    its own. Both run as written, as a script's module code, in this process (TensorFlow started already) from
    `tmp_path`; an exception from either fails the test as a script's exit code would."""
    example, callback = doc_blocks("docs/guide/getting-started.md", "Python API", "python")
    monkeypatch.chdir(tmp_path)
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compile(f"{example}\n{callback}", "getting-started.md", "exec"), {"__name__": "__main__"})
    final, game = re.search(r"^final evaluation (\S+), this game (\d+)$", stdout.getvalue(), re.MULTILINE).groups()
    assert 1 <= int(game) <= 500 and 1 <= float(final) <= 500
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 2 and all((run / "policy" / "saved_model.pb").is_file() for run in runs)
