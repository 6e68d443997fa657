"""tools/beside_dopamine.py on a real tiny Pong run: its training iterations are the games its episodes.csv says
ended in each complete window, set beside the bands docs/dopamine-curves.json holds; bad input is one line, exit 2,
and nothing written. And docs/dopamine-curves.json itself: 5 sorted values per iteration for every agent and game."""

import json
import re
import shutil

import numpy as np
import pytest

from tests.conftest import REPO, main_in_process, run_module

CURVES = REPO / "docs" / "dopamine-curves.json"
AGENTS = ["jax_iqn_cnn", "jax_iqn_impala", "tf_iqn_legacy", "jax_dqn_cnn", "jax_dqn_impala", "jax_rainbow_cnn",
          "jax_rainbow_impala", "tf_rainbow_legacy", "tf_dqn_legacy"]
WINDOW = 200  # --iteration-steps: a few windows in a tiny run, some without a game's end
# Pong games cut at 1,000 frames (250 agent steps): a game ends in most windows, never in the first
TINY_PONG = {"env.id": "Pong", "env.screen_size": 42, "env.max_episode_frames": 1000, "run.total_steps": 1100,
             "replay.capacity": 2000, "run.learning_starts": 300, "run.eval_every": 1000, "run.eval_episodes": 1,
             "run.final_eval_episodes": 1, "run.checkpoint_every": 0, "run.log_every": 1000}


@pytest.fixture(scope="module")
def pong_run(tmp_path_factory):
    import tfdqn
    from tfdqn import config as config_lib

    config = config_lib.resolve_config([], TINY_PONG, None)
    run_dir = tmp_path_factory.mktemp("pong") / "run"
    tfdqn.train(config, run_dir, quiet=True)
    return run_dir, config


def _beside(*args):
    return run_module("tools.beside_dopamine", *args, timeout=120)


def _beside_in_process(*args):
    """The tool's main in this process, for a run the test only reads back (no interpreter start-up of its own);
    its one-line refusals stay in a fresh process (`_beside`), as a user sees them."""
    from tools.beside_dopamine import main

    return main_in_process(main, *args)


def test_each_complete_window_is_the_mean_of_the_games_that_ended_in_it_beside_dopamine(pong_run, tmp_path):
    from tfdqn.bench.runkey import recipe_hash

    run_dir, config = pong_run
    result = _beside_in_process(str(run_dir), "--agent", "jax_rainbow_cnn", "--agent", "tf_dqn_legacy",
                     "--iteration-steps", str(WINDOW), "--out", str(tmp_path / "beside.json"),
                     "--table", str(tmp_path / "beside.md"), "--plot", str(tmp_path / "beside"))
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "beside.json").read_text())
    [run] = record["runs"]
    assert (run_dir / "episodes.csv").read_text().startswith("env_steps,return,length\n")
    ends, returns, _ = np.loadtxt(run_dir / "episodes.csv", delimiter=",", skiprows=1, ndmin=2).T
    # every window that ends before the newest game does is complete, and only those are reported
    complete = [i for i in range(int(ends.max()) // WINDOW + 1) if (i + 1) * WINDOW < ends.max()]
    assert complete and [p["iteration"] for p in run["iterations"]] == complete
    assert {p["episodes"] == 0 for p in run["iterations"]} == {True, False}  # windows with games and without
    assert config.run.total_steps > (complete[-1] + 1) * WINDOW  # the run played on in a window left out
    for point in run["iterations"]:
        ended_in = (ends > point["iteration"] * WINDOW) & (ends <= (point["iteration"] + 1) * WINDOW)
        assert point["env_steps_end"] == (point["iteration"] + 1) * WINDOW
        assert point["episodes"] == ended_in.sum()
        assert point["return_mean"] == (pytest.approx(returns[ended_in].mean()) if ended_in.any() else None)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (run["game"], run["seed"], run["env_id"]) == ("Pong", config.run.seed, "Pong")
    assert run["config_hash"] == recipe_hash(config) and run["code"] == summary["code"]
    assert "env.noop_max 30 (Dopamine: 0)" in run["protocol_differences"]
    assert record["command"].startswith("python -m tools.beside_dopamine ") and record["code"]["tfdqn_version"]
    # Dopamine's bands are docs/dopamine-curves.json's values, and each mean sits among them as NumPy counts
    published = json.loads(CURVES.read_text())["curves"]
    for agent in ("jax_rainbow_cnn", "tf_dqn_legacy"):
        bands = record["dopamine"]["agents"][agent]
        assert len(bands) == 40
        for band, values in zip(bands, published[agent]["Pong"]):
            assert (band["min"], band["median"], band["max"]) == (np.min(values), np.median(values), np.max(values))
    assert record["dopamine"]["commit"] == json.loads(CURVES.read_text())["source"]["commit"]
    compared = [p for p in run["iterations"] if p["return_mean"] is not None]
    assert len(record["comparison"]) == 2 * len(compared)
    for row in record["comparison"]:
        values = np.array(published[row["agent"]]["Pong"][0])  # every window here ends in Dopamine's iteration 0
        assert row["dopamine_iteration"] == 0
        mean = row["return_mean"]
        assert (row["below"], row["above"]) == ((mean < values).sum(), (mean > values).sum())
        assert row["sits"] == ("below all 5" if row["below"] == 5 else "above all 5" if row["above"] == 5 else "within")
    table = (tmp_path / "beside.md").read_text()
    rows = [line for line in table.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) == len(complete) and "jax_rainbow_cnn" in table and f"seed {config.run.seed}" in table
    assert table in result.stdout
    assert (tmp_path / "beside.png").stat().st_size > 0
    assert "Pong: training returns" in (tmp_path / "beside.svg").read_text()  # the SVG keeps its text


def test_bad_input_is_one_line_with_exit_2_and_nothing_written(pong_run, tmp_path):
    run_dir, _ = pong_run
    out = tmp_path / "out.json"
    empty = tmp_path / "empty"
    empty.mkdir()
    breakout = tmp_path / "breakout"  # the same run, said to be Breakout's
    shutil.copytree(run_dir, breakout, ignore=shutil.ignore_patterns("checkpoints", "*.tfevents.*"))
    saved = (breakout / "config.yaml").read_text()
    (breakout / "config.yaml").write_text(saved.replace("id: Pong\n", "id: Breakout\n", 1))
    cases = [([str(empty), "--agent", "jax_rainbow_cnn"], [str(empty), "episodes.csv"]),
             ([str(run_dir), "--agent", "full_rainbow"], ["full_rainbow", "jax_rainbow_cnn"]),
             ([str(run_dir), str(breakout), "--agent", "jax_rainbow_cnn"], ["Breakout, Pong", "one game"])]
    for args, named in cases:
        result = _beside(*args, "--out", str(out), "--table", str(tmp_path / "t.md"), "--plot", str(tmp_path / "p"))
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "allowed:" in result.stderr
        assert all(name in result.stderr for name in named), result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["breakout", "empty"]


def test_the_dopamine_curves_hold_five_sorted_values_per_iteration_and_their_source():
    data = json.loads(CURVES.read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", data["source"]["commit"]) and data["source"]["repo"].endswith("dopamine")
    assert data["iteration_agent_steps"] == 250_000 and data["iterations"] == [0, 39]
    assert sorted(data["curves"]) == sorted(AGENTS) and data["games"] == ["Breakout", "Pong"]
    family_agents = [agent for family in data["source"]["files"].values() for agent in family["agents"]]
    assert sorted(family_agents) == sorted(AGENTS)  # every agent's file is named
    for agent, games in data["curves"].items():
        assert sorted(games) == data["games"], agent
        for game, iterations in games.items():
            assert len(iterations) == 40, (agent, game)
            for values in iterations:
                assert len(values) == 5 and values == sorted(values), (agent, game)
    protocol = data["source"]["protocol"]
    assert protocol["repeat_action_probability"]["value"] == 0.25
    assert protocol["max_steps_per_episode"]["value"] == 27000
    assert protocol["max_num_frames_per_episode"]["value"] == 100_000  # the v5 path's cap, which binds first
    assert all(fact.get("where") for fact in protocol.values())
