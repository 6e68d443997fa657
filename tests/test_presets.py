"""`--preset`: each recipe's settings with their sources, adapted to vector observations, and a short
real Atari run for each."""

import json
import subprocess
import sys

import pytest

import tfdqn
from tests.conftest import REPO, SMALL_CARTPOLE
from tfdqn import config as config_lib
from tfdqn.config.presets import PRESETS, preset_settings


PRINT_EVERY_PRESET = """
import sys
from tfdqn.config.presets import PRESETS, preset_settings
from tfdqn.train import main
for preset in PRESETS:
    print("=== " + preset, flush=True)
    assert main(["--env", "Pong", "--preset", preset, "--print-config"]) == 0
"""


def test_print_config_exits_0_for_each_preset_on_pong_and_names_each_values_source():
    result = subprocess.run([sys.executable, "-c", PRINT_EVERY_PRESET], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    printed = dict(part.split("\n", 1) for part in result.stdout.split("=== ")[1:])
    assert list(printed) == list(PRESETS)
    for preset, text in printed.items():
        lines = text.splitlines()
        n_step = _key_line(lines, "learner.n_step")
        assert n_step.endswith(f"[{preset_settings(preset, True)['learner.n_step'][1]}]")
        assert "(Hessel et al. 2018 use 3)" in n_step
        assert all("  # " in line and line.endswith("]") for line in lines if line.startswith("  "))
        differences = [line for line in lines if line.startswith("#  - ")]
        assert differences == [f"#  - {d.line()}" for d in PRESETS[preset].differences]
    der, drq = printed["der"].splitlines(), printed["drq_eps"].splitlines()
    for key in ("exploration.epsilon_start", "exploration.epsilon_end"):  # noisy nets: the rule says why
        assert _key_line(der, key).startswith(f"  {key.split('.')[1]}: 0.0  #") and f"[{config_lib.NOISY_RULE}]" in \
            _key_line(der, key)
    assert _key_line(der, "network.noisy_sigma0").startswith("  noisy_sigma0: 0.1  #")
    assert "jax/networks.py:504" in _key_line(der, "network.noisy_sigma0")
    for key, value in [("env.fire_on_reset", "false"), ("exploration.epsilon_delay_steps", "1600"),
                       ("network.conv_padding", "same"), ("env.noop_max", "116")]:
        assert _key_line(drq, key).startswith(f"  {key.split('.')[1]}: {value}  #")
    assert "dqn_agent.py:171" in _key_line(drq, "exploration.epsilon_delay_steps")


def _key_line(lines: list, key: str) -> str:
    """The line of `key` in --print-config's YAML (the section's line comes first)."""
    section, name = key.split(".")
    start = lines.index(f"{section}:")
    return next(line for line in lines[start:] if line.startswith(f"  {name}:"))


def test_presets_adapt_to_vector_observations_and_overrides_win():
    sources = {}
    rainbow = config_lib.resolve_config([], {"env.id": "CartPole", "learner.n_step": 5}, "rainbow", sources)
    assert (rainbow.learner.loss, rainbow.network.noisy, rainbow.replay.sampler) == ("categorical", True, "prioritized")
    assert (rainbow.learner.v_min, rainbow.learner.v_max) == (-100.0, 100.0)  # unclipped CartPole returns
    assert sources["learner.v_max"].startswith("preset adapted: unclipped returns")
    assert rainbow.learner.learning_rate == config_lib.resolve_config([], {"env.id": "CartPole"}).learner.learning_rate
    assert rainbow.learner.n_step == 5 and sources["learner.n_step"] == "--set or a flag"
    drq = config_lib.resolve_config([], {"env.id": "CartPole"}, "drq_eps", sources)
    assert drq.learner.augment_pad == 0 and sources["learner.augment_pad"].startswith("preset adapted: vector")
    pong = config_lib.resolve_config([], {"env.id": "Pong"}, "drq_eps")
    assert (pong.learner.augment_pad, pong.learner.augment_intensity, pong.env.repeat_action_probability) == (4, 0.05, 0.0)


def test_noisy_nets_explore_without_epsilon_unless_told_otherwise():
    noisy = config_lib.resolve_config([], {"env.id": "CartPole", "network.noisy": True})
    assert (noisy.exploration.epsilon_start, noisy.exploration.epsilon_end) == (0.0, 0.0)
    told = config_lib.resolve_config([], {"env.id": "CartPole", "network.noisy": True, "exploration.epsilon_start": 0.5})
    assert told.exploration.epsilon_start == 0.5


def test_an_unknown_preset_and_a_shift_on_vector_observations_are_one_line_errors(tmp_path, run_cmd):
    result = run_cmd("tfdqn.train", "--env", "CartPole", "--preset", "dqn++", "--print-config")
    assert result.returncode == 2 and result.stderr.strip() == (
        "python -m tfdqn.train: error: --preset 'dqn++' is not a preset; "
        "allowed: rainbow, der, drq_eps, munchausen, iqn, atari_cpu, iqn_impala_cpu")
    result = run_cmd("tfdqn.train", *SMALL_CARTPOLE, "--preset", "drq_eps", "--set", "learner.augment_pad=4",
                     "--logdir", str(tmp_path), "--run-name", "r")
    error = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(error) == 1 and "learner.augment_pad = 4 needs image observations" in error[0]
    assert not (tmp_path / "r").exists()  # refused before anything is written


@pytest.mark.parametrize("preset, record, config_hash", [("atari_cpu", "bench-atari-pong.json", "4d8151fbd8"),
                                                        ("iqn_impala_cpu", "sweep-breakout.json", "48788f9e2b")])
def test_tfdqns_own_presets_are_the_recipes_their_sweeps_recorded_value_by_value(preset, record, config_hash):
    """The source of tfdqn's own presets is a recorded run (docs/experiments/atari.md): every key of the preset's
    resolved config equals that run's, so the preset trains the recipe whose results docs/ report."""
    from tfdqn.bench.runkey import recipe, recipe_differences, recipe_hash

    run = next(run for run in json.loads((REPO / "docs" / record).read_text())["runs"]
               if run["config_hash"] == config_hash)
    config = config_lib.resolve_config([], {"env.id": run["game"], "run.target_return": run["target"],
                                            "run.total_steps": run["config"]["run"]["total_steps"]}, preset)
    assert recipe_differences(recipe(config), run["config"]) == []
    assert recipe_hash(config) == config_hash


SHORT_PONG = {"env.id": "Pong", "run.total_steps": 120, "run.learning_starts": 100, "replay.capacity": 1000,
              "run.final_eval_episodes": 1, "env.max_episode_frames": 200, "run.log_every": 120,
              "run.checkpoint_every": 0, "run.eval_episodes": 1}  # the periodic evaluation at the last step: one game
# (ten would make a vector env of ten Pongs and compile the act for their batch: seconds of CPU per preset)


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_each_preset_trains_a_short_atari_run(tmp_path, preset):
    config = config_lib.resolve_config([], SHORT_PONG, preset)
    summary = tfdqn.train(config, tmp_path / preset, quiet=True)
    assert summary["updates"] == int(20 / config.run.training_interval) and summary["final_eval_episodes"] == 1
    assert config.learner.n_step == {"rainbow": 3, "der": 10, "drq_eps": 10, "munchausen": 1, "iqn": 3,
                                     "atari_cpu": 3, "iqn_impala_cpu": 3}[preset]


@pytest.mark.slow
def test_the_impala_network_trains_a_short_atari_run_in_place_of_the_nature_cnn(tmp_path):
    """With DrQ(epsilon)'s augmentation, dueling head and 10-step targets."""
    config = config_lib.resolve_config([], {**SHORT_PONG, "network.kind": "impala"}, "drq_eps")
    summary = tfdqn.train(config, tmp_path / "impala", quiet=True)
    assert summary["updates"] == 20 and summary["final_eval_episodes"] == 1
