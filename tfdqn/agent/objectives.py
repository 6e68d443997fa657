"""The per-sample loss of each head kind: what the learner minimises (weighted by importance weights)
and what prioritized replay uses as priority.

Each takes the online output at the actions taken, the target network's output at the next actions
(chosen by the learner: double DQN or not), the summed rewards and the discounts gamma * bootstrap, and
returns (loss [B], priority signal [B]): |TD error| for the Huber loss (Schaul et al. 2016), the
per-sample loss itself for C51 and QR-DQN (as Rainbow uses its KL; Hessel et al. 2018).
"""

from __future__ import annotations

import tensorflow as tf

from tfdqn.agent import losses
from tfdqn.agent.munchausen import munchausen_target


def _at(values: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
    """values[b, actions[b]] for [B, A] or [B, A, K] values."""
    return tf.gather(values, actions, axis=1, batch_dims=1)


class HuberObjective:
    """DQN: Huber loss on r + discount * Q_target(s', a') - Q(s, a) (Mnih et al. 2015)."""

    reads_target_now = False  # Munchausen's also reads the target network at s

    def __init__(self, delta: float):
        self._delta = delta

    def __call__(self, online, action, reward, discount, target_next, next_action):
        y = tf.stop_gradient(reward + discount * _at(target_next, next_action))
        td_error = y - _at(online, action)
        return losses.huber(td_error, self._delta), tf.abs(td_error)


class CategoricalObjective:
    """C51: cross-entropy to the target distribution projected on the support (Bellemare et al. 2017)."""

    reads_target_now = False  # Munchausen's also reads the target network at s

    def __init__(self, num_atoms: int, v_min: float, v_max: float):
        self._support = (num_atoms, v_min, v_max)

    def __call__(self, online, action, reward, discount, target_next, next_action):
        support = losses.categorical_support(*self._support)
        target = losses.categorical_projection(tf.nn.softmax(_at(target_next, next_action)), reward, discount, support)
        loss = losses.categorical_loss(_at(online, action), target)
        return loss, loss


class QuantileObjective:
    """QR-DQN: quantile Huber loss (kappa 1) to r + discount * target quantiles (Dabney et al. 2018); IQN's, where
    the online quantiles are at the sampled `fractions` (Dabney, Ostrovski et al. 2018)."""

    reads_target_now = False  # Munchausen's also reads the target network at s

    def __call__(self, online, action, reward, discount, target_next, next_action, fractions=None):
        target = reward[:, None] + discount[:, None] * _at(target_next, next_action)
        loss = losses.quantile_huber_loss(_at(online, action), target, kappa=1.0, fractions=fractions)
        return loss, loss


class MunchausenObjective:
    """M-DQN: Huber loss to Munchausen's target (`munchausen.munchausen_target`), which reads the target network at
    s as well as at s' and needs no next action (its soft value averages over the target's policy). M-IQN
    (`quantile`): the quantile Huber loss to the target's quantiles, each given the same soft backup."""

    reads_target_now = True

    def __init__(self, delta: float, tau: float, alpha: float, clip: float, quantile: bool = False):
        self._delta, self._tau, self._alpha, self._clip, self._quantile = delta, tau, alpha, clip, quantile

    def __call__(self, online, action, reward, discount, target_next, next_action, target_now=None, legal_now=None,
                 legal_next=None, fractions=None, q_next=None):
        y = tf.stop_gradient(munchausen_target(target_next, target_now, action, reward, discount, self._tau,
                                               self._alpha, self._clip, legal_next, legal_now, q_next))
        if self._quantile:
            loss = losses.quantile_huber_loss(_at(online, action), y, kappa=1.0, fractions=fractions)
            return loss, loss
        td_error = y - _at(online, action)
        return losses.huber(td_error, self._delta), tf.abs(td_error)


def make_objective(config):
    """The objective `learner.loss` (and `learner.munchausen`) names; IQN's is QR-DQN's at sampled fractions."""
    if config.munchausen:
        return MunchausenObjective(config.huber_delta, config.munchausen_tau, config.munchausen_alpha,
                                   config.munchausen_clip, quantile=config.loss == "implicit_quantile")
    if config.loss == "categorical":
        return CategoricalObjective(config.num_atoms, config.v_min, config.v_max)
    if config.loss in ("quantile", "implicit_quantile"):
        return QuantileObjective()
    return HuberObjective(config.huber_delta)
