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
    assert len(seeds) == 12 and all(0 <= s < 2**32 for s in seeds)
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


def test_every_env_of_a_vector_evaluation_plays_its_share():
    """7 episodes on 3 envs: 2, 2 and 3 games, however short some envs' games are."""
    from tfdqn.envs.vector import make_vector_env
    from tfdqn.run.evaluation import run_vector_episodes

    config, spec, agent = _agent()
    vector, _ = make_vector_env(config.env, 3, seed=0)
    returns = run_vector_episodes(vector, spec, agent.actor, 7, epsilon=1.0, seed=5)
    vector.close()
    assert len(returns) == 7 and all(r >= 1 for r in returns)
