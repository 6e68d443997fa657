"""Evaluation: seeded per (run seed, purpose, env step), on its own RNG, in one reused env."""

import numpy as np

from tfdqn import config as config_lib
from tfdqn.agent.agent import make_agent
from tfdqn.config import EnvConfig
from tfdqn.envs.make import make_env
from tfdqn.run.evaluation import FINAL, PERIODIC, Evaluator, evaluation_seed, run_episodes


def _agent(seed=0, eval_epsilon=0.5):
    config = config_lib.build_config([], {"run.seed": seed, "exploration.eval_epsilon": eval_epsilon})
    _, spec = make_env(config.env, seed=0)
    return config, spec, make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions)


def test_evaluation_seeds_differ_by_purpose_step_and_run_seed():
    seeds = {evaluation_seed(s, purpose, step) for s in (0, 1) for purpose in (PERIODIC, FINAL)
             for step in (0, 5000, 10000)}
    assert len(seeds) == 12 and all(0 <= s < 2**31 for s in seeds)  # ale-py's vector env takes a C int
    assert evaluation_seed(3, PERIODIC, 700) == evaluation_seed(3, PERIODIC, 700)


def test_an_evaluation_depends_only_on_where_it_runs_not_on_earlier_ones():
    """A resumed run rebuilds its evaluator: its evaluation at step S must equal the uninterrupted
    run's evaluation at S, whatever evaluations came before (none, after a resume)."""
    config, spec, agent = _agent()
    uninterrupted = Evaluator(config.env, spec, agent.actor, seed=0, epsilon=0.5, should_stop=lambda: False)
    uninterrupted.evaluate(3, env_steps=1000)
    expected = uninterrupted.evaluate(3, env_steps=2000)
    resumed = Evaluator(config.env, spec, agent.actor, seed=0, epsilon=0.5, should_stop=lambda: False)
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
    whole = Evaluator(config.env, spec, agent.actor, seed=0, epsilon=1.0, should_stop=lambda: False)
    returns = whole.evaluate(4, env_steps=1000)
    whole.close()
    assert len(returns) == 4 and min(returns) < max(returns)
    best = BestCheckpoint(tmp_path / "checkpoints", agent.online)
    best.offer(500, [3.0])
    before = (tmp_path / "checkpoints" / "best.json").read_bytes()
    cut = Evaluator(config.env, spec, agent.actor, seed=0, epsilon=1.0, should_stop=_stop_after(int(min(returns)) + 1))
    logger = Logger(tmp_path / "run")
    log = CsvLog(tmp_path / "evaluations.csv", EVALUATIONS_HEADER)
    EvaluationHook(1000, cut, 4, logger, best, log, RunClock(agent.counters.run_seconds, time.time()), math.inf)(1000)
    log.close()
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
