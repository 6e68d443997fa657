"""Evaluation: seeded per (run seed, purpose, env step), never on a seed an earlier evaluation used, on its own
RNG, in one reused env; a hit of the target confirmed on fresh games."""

import json
import math
import time

import numpy as np

from tfdqn import config as config_lib
from tfdqn.agent.agent import make_agent
from tfdqn.config import EnvConfig
from tfdqn.envs.make import make_env
from tfdqn.run.evaluation import Evaluator, run_episodes
from tfdqn.run.evaluation_seeds import FINAL, PERIODIC, EvaluationSeeds, evaluation_seed


def _agent(seed=0, eval_epsilon=0.5):
    config = config_lib.build_config([], {"run.seed": seed, "exploration.eval_epsilon": eval_epsilon})
    _, spec = make_env(config.env, seed=0)
    return config, spec, make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions)


def test_evaluation_seeds_differ_by_purpose_step_and_run_seed():
    seeds = {evaluation_seed(s, purpose, step) for s in (0, 1) for purpose in (PERIODIC, FINAL)
             for step in (0, 5000, 10000)}
    assert len(seeds) == 12 and all(0 <= s < 2**31 for s in seeds)  # ale-py's vector env takes a C int
    assert evaluation_seed(3, PERIODIC, 700) == evaluation_seed(3, PERIODIC, 700)


def test_a_new_evaluation_never_plays_a_seed_an_earlier_one_used_and_the_ledger_resumes_cut_back(tmp_path):
    """A ledger read back on resume holds an evaluation (at env step 300) that happens to use the seed the final
    evaluation at 400 would derive first: the final one derives again, disjoint from every seed before it. Its two
    plays (last network, product) meet the same games; entries after the checkpoint are dropped on resume."""
    from tfdqn.envs.seeds import env_seeds

    clashing = {"purpose": "periodic", "env_steps": 300, "seeds": [evaluation_seed(5, FINAL, 400), 17]}
    later = {"purpose": "periodic", "env_steps": 900, "seeds": [23]}
    path = tmp_path / "evaluation_seeds.json"
    path.write_text(json.dumps([clashing, later]))
    ledger = EvaluationSeeds(5, path, resume_from=500)
    assert ledger.entries == [clashing]  # 900 is past the checkpoint: that evaluation runs again
    base = ledger.base_seed(FINAL, 400, 3)
    assert base == evaluation_seed(5, FINAL, 400, attempt=1) != evaluation_seed(5, FINAL, 400)
    assert set(env_seeds(base, 3)).isdisjoint(clashing["seeds"])
    assert ledger.base_seed(FINAL, 400, 3) == base and len(ledger.entries) == 2  # the product's play: same games
    periodic = ledger.base_seed(PERIODIC, 600, 2)
    assert periodic == evaluation_seed(5, PERIODIC, 600)  # no clash: the seed an uninterrupted run derives
    assert json.loads(path.read_text()) == ledger.entries == [
        clashing, {"purpose": "final", "env_steps": 400, "seeds": env_seeds(base, 3)},
        {"purpose": "periodic", "env_steps": 600, "seeds": env_seeds(periodic, 2)}]


def test_an_evaluation_depends_only_on_where_it_runs_not_on_earlier_ones():
    """A resumed run rebuilds its evaluator: its evaluation at step S must equal the uninterrupted
    run's evaluation at S, whatever evaluations came before (none, after a resume)."""
    config, spec, agent = _agent()
    uninterrupted = Evaluator(config.env, spec, agent.actor, EvaluationSeeds(0), epsilon=0.5, should_stop=lambda: False)
    uninterrupted.evaluate(3, env_steps=1000)
    expected = uninterrupted.evaluate(3, env_steps=2000)
    resumed = Evaluator(config.env, spec, agent.actor, EvaluationSeeds(0), epsilon=0.5, should_stop=lambda: False)
    assert resumed.evaluate(3, env_steps=2000) == expected
    assert resumed.evaluate(3, env_steps=3000) != expected  # another step plays other games
    uninterrupted.close()
    resumed.close()


def test_evaluation_leaves_the_training_rng_and_step_counter_alone():
    config, spec, agent = _agent()
    before = agent.actor.generator.state.numpy().copy(), agent.counters.read()
    env, _ = make_env(config.env, seed=1, evaluation=True)
    returns = run_episodes(env, spec, agent.actor, 2, epsilon=0.5, seed=11)
    assert len(returns) == 2
    np.testing.assert_array_equal(agent.actor.generator.state.numpy(), before[0])
    assert agent.counters.read() == before[1]


def test_a_stop_request_ends_the_evaluation_early():
    config, spec, agent = _agent()
    env, _ = make_env(EnvConfig(id="CartPole"), seed=1, evaluation=True)
    assert run_episodes(env, spec, agent.actor, 5, epsilon=0.0, seed=1, should_stop=lambda: True) == []


def test_games_played_side_by_side_are_the_games_each_env_plays_alone():
    """A vector evaluation's env i is seeded env_seeds(seed, n)[i]: greedy, its game is the one a lone
    env with that seed plays, so batching changes the cost of an evaluation, not its result."""
    from tfdqn.envs.seeds import env_seeds
    from tfdqn.envs.vector import make_vector_env
    from tfdqn.run.evaluation import run_vector_episodes

    config, spec, agent = _agent()
    vector, _ = make_vector_env(config.env, 4, seed=0)
    together = run_vector_episodes(vector, spec, agent.actor, 4, epsilon=0.0, seed=21)
    vector.close()
    alone = []
    for env_seed in env_seeds(21, 4):
        env, _ = make_env(config.env, seed=env_seed, evaluation=True)
        alone += run_episodes(env, spec, agent.actor, 1, epsilon=0.0, seed=int(env_seed))
        env.close()
    assert sorted(together) == sorted(alone) and len(together) == 4


def _stop_after(calls: int):
    """A should_stop that answers True from its `calls`-th question on (one question per vector step)."""
    asked = []

    def should_stop() -> bool:
        asked.append(1)
        return len(asked) > calls

    return should_stop


def test_an_evaluation_cut_after_its_first_game_is_discarded_and_keeps_nothing(tmp_path):
    """Random CartPole games end at different steps: the uncut evaluation tells when its shortest game
    ended (its return is its length), so a stop one step later cuts it after at least one whole game.
    The hook then writes no charts/eval_return, no evaluations.csv row, and leaves best.json as it was."""
    import math
    import time

    from tfdqn.run.checkpoint import BestCheckpoint
    from tfdqn.run.clock import RunClock
    from tfdqn.run.csv_log import EVALUATIONS_HEADER, CsvLog
    from tfdqn.run.hooks import EvaluationHook
    from tfdqn.telemetry.tensorboard import Logger, read_scalars

    config, spec, agent = _agent(eval_epsilon=1.0)
    whole = Evaluator(config.env, spec, agent.actor, EvaluationSeeds(0), epsilon=1.0, should_stop=lambda: False)
    returns = whole.evaluate(4, env_steps=1000)
    whole.close()
    assert len(returns) == 4 and min(returns) < max(returns)
    best = BestCheckpoint(tmp_path / "checkpoints", agent.online)
    best.offer(500, [3.0])
    before = (tmp_path / "checkpoints" / "best.json").read_bytes()
    cut = Evaluator(config.env, spec, agent.actor, EvaluationSeeds(0), epsilon=1.0, should_stop=_stop_after(int(min(returns)) + 1))
    logger = Logger(tmp_path / "run")
    log = CsvLog(tmp_path / "evaluations.csv", EVALUATIONS_HEADER)
    confirmations = CsvLog(tmp_path / "confirmations.csv", EVALUATIONS_HEADER)
    EvaluationHook(1000, cut, 4, logger, best, (log, confirmations), RunClock(agent.counters.run_seconds, time.time()),
                   math.inf)(1000)
    log.close()
    confirmations.close()
    logger.close()
    cut.close()
    assert read_scalars(tmp_path / "run", "charts/eval_return") == []
    assert (tmp_path / "evaluations.csv").read_text() == EVALUATIONS_HEADER + "\n"
    assert (tmp_path / "checkpoints" / "best.json").read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == sorted(
        ["best.json", *(p.name for p in (tmp_path / "checkpoints").glob("best-500.*"))])


def test_every_env_of_a_vector_evaluation_plays_its_share():
    """7 games on 3 envs: env i counts its first (7 + i) // 3 games (2, 2, 3), however short the other
    envs' games are; the returns are exactly those games', in the order they ended."""
    from tfdqn.envs.vector import make_vector_env
    from tfdqn.run.evaluation import run_vector_episodes

    config, spec, agent = _agent()
    vector, _ = make_vector_env(config.env, 3, seed=0)
    ended = []  # (env, return) of every game any env finished, in order
    step = vector.step

    def recording_step(actions):
        result = step(actions)
        ended.extend((i, game_return) for i, game_return, _ in result.games)
        return result

    vector.step = recording_step
    returns = run_vector_episodes(vector, spec, agent.actor, 7, epsilon=1.0, seed=5)
    vector.close()
    share = [(7 + i) // 3 for i in range(3)]
    counted = [(i, r) for n, (i, r) in enumerate(ended) if [e for e, _ in ended[:n]].count(i) < share[i]]
    assert returns == [r for _, r in counted]
    assert [[e for e, _ in counted].count(i) for i in range(3)] == share == [2, 2, 3]


def _hook_parts(tmp_path, agent, config, spec, confirm_episodes, target):
    from tfdqn.run.checkpoint import BestCheckpoint
    from tfdqn.run.clock import RunClock
    from tfdqn.run.csv_log import EVALUATIONS_HEADER, CsvLog
    from tfdqn.run.hooks import EvaluationHook
    from tfdqn.telemetry.tensorboard import Logger

    folder = tmp_path / f"confirm{confirm_episodes}"
    folder.mkdir(parents=True)
    evaluator = Evaluator(config.env, spec, agent.actor, EvaluationSeeds(0, folder / "evaluation_seeds.json"),
                          epsilon=1.0, should_stop=lambda: False)
    logs = tuple(CsvLog(folder / name, EVALUATIONS_HEADER) for name in ("evaluations.csv", "confirmations.csv"))
    hook = EvaluationHook(1000, evaluator, 2, Logger(folder / "tb"), BestCheckpoint(folder / "checkpoints",
                          agent.online), logs, RunClock(agent.counters.run_seconds, time.time()), target,
                          confirm_episodes)
    return folder, hook, evaluator, logs


def test_a_hit_counts_only_when_fresh_games_confirm_it_and_the_confirmation_is_what_picks_the_best(tmp_path):
    """Random CartPole play: two-game evaluations vary widely, and the best of eight reaches a target that 30 fresh
    games of the same network do not. With confirmations that hit stays a hit (the run goes on), its confirmation
    (its own seeds, none an evaluation used) is what best.json keeps; without, the same evaluation ends the run."""
    from tfdqn.run.csv_log import read_rows

    config, spec, agent = _agent(eval_epsilon=1.0)
    steps = range(1000, 9000, 1000)
    plain_folder, plain, plain_evaluator, plain_logs = _hook_parts(tmp_path, agent, config, spec, 0, math.inf)
    for step in steps:
        plain(step)
    means = [row["return_mean"] for row in read_rows(plain_folder / "evaluations.csv", "env_steps,s,return_mean,std")]
    target = max(means)  # reached by the luckiest two-game evaluation
    lucky = steps[means.index(target)]
    confirming_folder, confirming, evaluator, logs = _hook_parts(tmp_path, agent, config, spec, 30, target)
    unconfirming_folder, unconfirming, unconfirming_evaluator, unconfirming_logs = _hook_parts(
        tmp_path / "plain", agent, config, spec, 0, target)
    for step in steps:
        confirming(step)
        if not unconfirming.ends_run:
            unconfirming(step)
    for log in (*plain_logs, *logs, *unconfirming_logs):
        log.close()
    for each in (plain_evaluator, evaluator, unconfirming_evaluator):
        each.close()
    assert unconfirming.reached_target and len((unconfirming_folder / "evaluations.csv").read_text().splitlines()) \
        == 1 + steps.index(lucky) + 1  # ended at the lucky evaluation
    [confirmation] = read_rows(confirming_folder / "confirmations.csv", "env_steps,s,return_mean,std")
    assert confirmation["env_steps"] == lucky and confirmation["return_mean"] < target
    assert not confirming.reached_target  # the run would have gone on
    best = json.loads((confirming_folder / "checkpoints" / "best.json").read_text())
    assert best["env_steps"] != lucky or len(best["returns"]) == 30  # the lucky two games picked nothing
    ledger = json.loads((confirming_folder / "evaluation_seeds.json").read_text())
    [confirmed_seeds] = [entry["seeds"] for entry in ledger if entry["purpose"] == "confirmation"]
    assert len(confirmed_seeds) == 16 and set(confirmed_seeds).isdisjoint(
        {seed for entry in ledger if entry["purpose"] == "periodic" for seed in entry["seeds"]})
