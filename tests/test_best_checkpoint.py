"""The best checkpoint: kept only when the mean evaluation return improves, written last-marker-first,
kept by the pruning of newer checkpoints and across a resume; and the deployment page's "Use a trained agent"
commands, run as written on a real run, evaluate the same games `load_policy` plays."""

import importlib
import json
import shlex

import gymnasium
import numpy as np
import pytest

import tfdqn
from tests.conftest import main_in_process
from tests.test_policy import doc_blocks
from tfdqn.agent.agent import make_agent
from tfdqn.agent.networks import make_network
from tfdqn.config import DQNConfig
from tfdqn.evaluate import main as evaluate_main
from tfdqn.replay.ring import ReplayRing
from tfdqn.run.checkpoint import BestCheckpoint, Checkpointer, restore_online
from tfdqn.run.markers import read_best
from tfdqn.telemetry.tensorboard import read_scalars

# One env and an update per step (as tests/data/cartpole_small.yaml), so evaluations fall on 500, 1000, ...
RUN = {"run.num_envs": 1, "run.training_interval": 1, "run.env_steps_per_round": 1, "compute.update_jit_compile": False,
       "run.total_steps": 2000, "run.learning_starts": 500, "run.checkpoint_every": 1000, "run.eval_every": 500,
       "run.eval_episodes": 2, "run.log_every": 500, "run.final_eval_episodes": 2, "run.seed": 3}


def _network(seed: int):
    network = make_network("mlp", (4,), np.float32, 2, (8,))
    for variable in network.weights:
        variable.assign(np.random.default_rng(seed).normal(size=variable.shape))
    return network


def test_only_a_better_mean_return_is_kept_and_the_older_best_is_deleted(tmp_path):
    network = _network(0)
    best = BestCheckpoint(tmp_path, network)
    assert best.record is None and best.offer(100, [5.0, 7.0])
    network.weights[0].assign(network.weights[0] * 2)
    assert not best.offer(200, [6.0, 6.0])  # a tie is not better
    assert best.offer(300, [9.0, 8.0])
    assert json.loads((tmp_path / "best.json").read_text()) == {"env_steps": 300, "return_mean": 8.5,
                                                                 "returns": [9.0, 8.0]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best-300.data-00000-of-00001", "best-300.index",
                                                         "best.json"]
    restored = _network(1)
    assert restore_online(tmp_path, restored, "best") == 300
    for kept, loaded in zip(network.weights, restored.weights):
        np.testing.assert_array_equal(kept.numpy(), loaded.numpy())


def test_the_best_survives_pruning_and_a_resume(tmp_path):
    agent = make_agent(DQNConfig(), (4,), np.float32, 2)
    checkpointer = Checkpointer(tmp_path, agent, ReplayRing(1000, (4,), np.float32))
    BestCheckpoint(tmp_path, agent.online).offer(1000, [50.0])
    (tmp_path / "best-500.index").write_bytes(b"left by a save that was killed")
    for step in (1000, 2000, 3000):
        checkpointer.save(step, {})
    names = {p.name for p in tmp_path.iterdir()}
    assert {"best.json", "best-1000.index", "best-1000.data-00000-of-00001"} <= names
    assert "best-500.index" not in names and "ckpt-1000.index" not in names
    resumed = BestCheckpoint(tmp_path, agent.online)  # what a resumed run builds
    assert resumed.record["env_steps"] == 1000 and not resumed.offer(4000, [40.0])
    assert resumed.offer(1000, [60.0])  # resumed from before its best, and better at the same step
    assert read_best(tmp_path) == {"env_steps": 1000, "return_mean": 60.0, "returns": [60.0]}
    assert restore_online(tmp_path, make_network("mlp", (4,), np.float32, 2, (256, 256)), "best") == 1000


def _greedy_returns(policy, episodes: int, seed: int) -> list[float]:
    """Whole CartPole games played by `policy` in a plain gymnasium env reset with `seed`, as evaluate does."""
    env = gymnasium.make("CartPole-v1")
    observation, _ = env.reset(seed=seed)
    returns, total = [], 0.0
    while len(returns) < episodes:
        observation, reward, terminated, truncated, _ = env.step(policy.act(observation))
        total += reward
        if terminated or truncated:
            returns.append(total)
            total, (observation, _) = 0.0, env.reset()
    return returns


@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("evaluated") / "run"
    tfdqn.train(tfdqn.DQNConfig.for_env("CartPole", RUN), run_dir, quiet=True)
    return run_dir


@pytest.mark.slow
def test_the_best_checkpoint_is_the_best_evaluation_and_evaluates_by_step(evaluated_run, capsys):
    evaluations = read_scalars(evaluated_run, "charts/eval_return")
    assert [step for step, _ in evaluations] == [500, 1000, 1500, 2000]
    best = json.loads((evaluated_run / "checkpoints" / "best.json").read_text())
    step, mean = max(evaluations, key=lambda e: e[1])  # the first of equal means
    assert best["env_steps"] == step and best["return_mean"] == pytest.approx(mean)
    assert evaluate_main([str(evaluated_run), "--checkpoint", "1000", "--episodes", "2", "--seed", "7"]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert report["checkpoint_env_steps"] == 1000
    assert report["returns"] == _greedy_returns(tfdqn.load_policy(evaluated_run, checkpoint=1000), 2, seed=7)


@pytest.mark.slow
def test_the_readme_commands_run_as_written_and_agree_with_load_policy(evaluated_run):
    """Each `python -m MODULE ARGS` line runs as `MODULE.main(ARGS)`, what `python -m` runs (`sys.exit(main())`), in
    this process: the reports are read back, and three TensorFlow start-ups are spared."""
    [commands] = doc_blocks("docs/guide/deployment.md", "Use a trained agent", "bash")
    reports = {}
    for line in commands.strip().splitlines():
        program, flag, module, *args = shlex.split(line.replace("runs/RUN", str(evaluated_run)))
        assert (program, flag) == ("python", "-m"), line
        result = main_in_process(importlib.import_module(module).main, *args)
        assert result.returncode == 0, f"{line}: {result.stderr}"
        reports[line] = json.loads(result.stdout.strip().splitlines()[-1])
    best = json.loads((evaluated_run / "checkpoints" / "best.json").read_text())["env_steps"]

    exported = reports["python -m tfdqn.export runs/RUN --checkpoint best"]
    assert exported["policy_dir"] == str(evaluated_run / "policy-best") and exported["env_steps"] == best
    assert json.loads((evaluated_run / "policy-best" / "policy.json").read_text())["checkpoint"] == "best"

    by_best = reports["python -m tfdqn.evaluate runs/RUN --checkpoint best --episodes 5"]
    assert by_best["checkpoint_env_steps"] == best
    assert by_best["returns"] == _greedy_returns(tfdqn.load_policy(evaluated_run, checkpoint="best"), 5, 12345)

    exported_policy = reports["python -m tfdqn.evaluate runs/RUN/policy --episodes 5"]
    assert exported_policy["checkpoint_env_steps"] == best  # the run's product, exported when it ended
    assert exported_policy["returns"] == _greedy_returns(tfdqn.load_policy(evaluated_run / "policy"), 5, 12345)


@pytest.mark.slow
def test_an_export_never_replaces_the_runs_product_with_another_network(evaluated_run, capsys):
    """`policy/` is the product the run chose (its best-evaluated network). Exporting the newest checkpoint goes
    beside it, `--out` onto it is refused in one line, and the default export writes the product's own network
    (to add LiteRT to the folder a user deploys)."""
    from tfdqn.export import main as export_main

    product = evaluated_run / "policy"
    before = {path.relative_to(product): path.read_bytes() for path in product.rglob("*") if path.is_file()}
    assert export_main([str(evaluated_run), "--checkpoint", "latest"]) == 0
    assert json.loads(capsys.readouterr().out)["policy_dir"] == str(evaluated_run / "policy-latest")
    assert export_main([str(evaluated_run), "--checkpoint", "latest", "--out", str(product)], prog="tfdqn export") == 2
    assert capsys.readouterr().err.strip() == (
        f"tfdqn export: error: --out {product} is the run's product, which only its own network is exported into; "
        "allowed: another --out, or no --checkpoint (the product's network)")
    assert {path.relative_to(product): path.read_bytes() for path in product.rglob("*") if path.is_file()} == before
    assert export_main([str(evaluated_run)]) == 0
    report = json.loads(capsys.readouterr().out)
    best = json.loads((evaluated_run / "checkpoints" / "best.json").read_text())["env_steps"]
    assert report["policy_dir"] == str(product) and report["checkpoint"] == "best" and report["env_steps"] == best
    observations = np.random.default_rng(2).normal(0, 0.5, size=(16, 4)).astype(np.float32)
    np.testing.assert_array_equal(tfdqn.load_policy(product).q_values(observations),
                                  tfdqn.load_policy(evaluated_run, checkpoint="best").q_values(observations))
