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
