"""Legal-action masks inside the graphs: the learner's target takes the max (double DQN: online's argmax) over the
next state's legal actions, as a NumPy reference computes it, for the Huber and the C51 objective, with random
masks and terminations; act never takes a masked action, at any epsilon."""

import functools

import gymnasium
import numpy as np
import pytest
import tensorflow as tf

from tests.test_losses import np_projection, np_softmax
from tfdqn.agent.actor import Actor
from tfdqn.agent.heads import HeadSpec, distribution_model
from tfdqn.agent.learner import Learner
from tfdqn.agent.legal_actions import masked_q_numpy
from tfdqn.agent.networks import make_network
from tfdqn.agent.observation_encoder import legal_actions
from tfdqn.config import ExplorationConfig, LearnerConfig
from tfdqn.envs.observation_layout import make_layout

ACTIONS = 5
LAYOUT = make_layout(gymnasium.spaces.Dict({"action_mask": gymnasium.spaces.MultiBinary(ACTIONS),
                                            "cell": gymnasium.spaces.Discrete(12)}), ACTIONS, "observation:action_mask")
LEGAL = functools.partial(legal_actions, LAYOUT)


def _frames(rng, count):
    """Frames of random cells and masks, some masks empty (every action legal) and many with one legal action."""
    masks = rng.random((count, ACTIONS)) < rng.choice([0.0, 0.2, 0.6], size=(count, 1))
    return np.stack([LAYOUT.encode({"cell": int(rng.integers(12)), "action_mask": mask}, {}) for mask in masks])


def _network(seed, head=HeadSpec()):
    return make_network("mlp", (LAYOUT.width,), np.uint8, ACTIONS, (16,), seed=seed, head=head, layout=LAYOUT)


def _batch(seed, size=32):
    rng = np.random.default_rng(seed)
    bootstrap = np.where(rng.random(size) < 0.3, 0.0, 1.0).astype(np.float32)  # terminations
    return (_frames(rng, size), rng.integers(0, ACTIONS, size).astype(np.int32),
            rng.normal(size=size).astype(np.float32), bootstrap, _frames(rng, size), np.ones(size, np.float32))


def _next_action(learner, next_frames, legal):
    q = (learner.online(next_frames) if learner._config.double_dqn else learner.target(next_frames)).numpy()
    chosen = masked_q_numpy(q, legal).argmax(axis=1)
    assert (chosen != q.argmax(axis=1)).any(), "the masks must change some choice for the test to mean anything"
    return chosen


@pytest.mark.parametrize("double", [False, True])
def test_the_huber_target_maximises_over_legal_next_actions_as_numpy_does(double):
    config = LearnerConfig(double_dqn=double, gamma=0.9, max_grad_norm=0.0)
    learner = Learner(_network(1), _network(2), config, (LAYOUT.width,), np.uint8, legal=LEGAL)
    observation, action, reward, bootstrap, next_frames, weight = _batch(3)
    rows = np.arange(len(action))
    next_action = _next_action(learner, next_frames, LAYOUT.legal(next_frames))
    y = reward + 0.9 * bootstrap * learner.target(next_frames).numpy()[rows, next_action]
    error = y - learner.online(observation).numpy()[rows, action]
    huber = np.where(np.abs(error) <= 1.0, 0.5 * error**2, np.abs(error) - 0.5)
    metrics = learner.update(observation, action, reward, bootstrap, next_frames, weight)
    assert float(metrics["td_loss"]) == pytest.approx(huber.mean(), rel=1e-5)
    np.testing.assert_allclose(metrics["priority"].numpy(), np.abs(error), rtol=1e-5, atol=1e-6)


def test_the_c51_target_takes_the_distribution_of_the_best_legal_next_action():
    head = HeadSpec(loss="categorical", outputs=11, v_min=-3.0, v_max=3.0)
    config = LearnerConfig(loss="categorical", num_atoms=11, v_min=-3.0, v_max=3.0, gamma=0.9, max_grad_norm=0.0)
    learner = Learner(_network(4, head), _network(5, head), config, (LAYOUT.width,), np.uint8, legal=LEGAL)
    observation, action, reward, bootstrap, next_frames, weight = _batch(6)
    rows = np.arange(len(action))
    next_action = _next_action(learner, next_frames, LAYOUT.legal(next_frames))
    target = distribution_model(learner.target)(next_frames).numpy()[rows, next_action]
    projected = np_projection(np_softmax(target), reward, 0.9 * bootstrap, np.linspace(-3.0, 3.0, 11))
    online = distribution_model(learner.online)(observation).numpy()[rows, action]
    expected = -(projected * np.log(np_softmax(online))).sum(axis=1)
    metrics = learner.update(observation, action, reward, bootstrap, next_frames, weight)
    assert float(metrics["td_loss"]) == pytest.approx(expected.mean(), rel=1e-4)


@pytest.mark.parametrize("epsilon", [0.0, 0.5, 1.0])
def test_act_never_takes_a_masked_action_at_any_epsilon(epsilon):
    exploration = ExplorationConfig(epsilon_start=epsilon, epsilon_end=epsilon, epsilon_decay_steps=1)
    actor = Actor(_network(7), ACTIONS, exploration, (LAYOUT.width,), np.uint8, seed=3, legal=LEGAL)
    frames = _frames(np.random.default_rng(8), 4000)
    legal = LAYOUT.legal(frames)
    for actions in (actor.act(frames).numpy(), actor.act_with_epsilon(frames, tf.constant(epsilon)).numpy()):
        assert legal[np.arange(len(frames)), actions].all()
    if epsilon == 1.0:  # random draws are uniform over the legal actions: rows with all five legal
        counts = np.bincount(actions[legal.all(axis=1)], minlength=ACTIONS)
        assert counts / counts.sum() == pytest.approx([1 / ACTIONS] * ACTIONS, abs=0.04)
