"""Munchausen RL's target (Vieillard, Pietquin and Geist 2020, eq. 2 with the log-policy clipped as in their
Atari runs), one pure function of the target network's Q-values, so a NumPy twin can check it.

pi is the softmax of the target network's Q at temperature tau, and tau * log pi is computed as
q - max q - tau * logsumexp((q - max q) / tau), which never overflows:

    y = r + alpha * clip(tau * log pi(a | s), l0, 0) + discount * sum over a' of pi(a' | s') (q(s', a') - tau log pi(a' | s'))

One step only: an n-step return would need a log-policy term for every step's action, which no source defines, so
the config refuses `learner.n_step` above 1 with this target. Where the env gives legal-action masks, pi is over the
legal actions of each state only. The same function gives M-IQN's target quantiles from the target network's
quantiles.
"""

from __future__ import annotations

import tensorflow as tf

from tfdqn.agent.legal_actions import masked_q


def scaled_log_policy(q_values: tf.Tensor, tau: float, legal: tf.Tensor | None = None) -> tf.Tensor:
    """[B, A]: tau * log softmax(q / tau), over the legal actions where `legal` is given (the others' values
    are then meaningless and must be masked by the caller)."""
    q_values = tf.convert_to_tensor(q_values)
    if legal is not None:
        q_values = masked_q(q_values, legal)
    centred = q_values - tf.reduce_max(q_values, axis=-1, keepdims=True)
    return centred - tau * tf.reduce_logsumexp(centred / tau, axis=-1, keepdims=True)


def munchausen_target(target_next: tf.Tensor, target_now: tf.Tensor, action: tf.Tensor, reward: tf.Tensor,
                      discount: tf.Tensor, tau: float, alpha: float, clip: float,
                      legal_next: tf.Tensor | None = None, legal_now: tf.Tensor | None = None,
                      q_next: tf.Tensor | None = None) -> tf.Tensor:
    """[B] targets: the reward, alpha times the clipped scaled log-policy of the action taken at s, and the
    discounted soft value of s' (`discount` is gamma^n times 0 where the episode terminated).

    M-IQN: where the target network gives quantiles [B, A, N] (at s' and s), pi is the softmax of their mean (the
    Q) and each quantile j of s' gets the soft backup sum over a' of pi(a' | s') (z_j(s', a') - tau log pi(a' | s')),
    as the reference code's M-IQN: [B, N] targets. `q_next`, where given, is the Q that pi(. | s') is read from
    instead of the mean of `target_next` (M-IQN's, at fractions drawn apart from those that evaluate)."""
    quantiles = len(target_next.shape) == 3
    per_quantile = (lambda x: x[..., None]) if quantiles else (lambda x: x)  # noqa: E731
    expected = (lambda z: tf.reduce_mean(z, axis=-1)) if quantiles else (lambda q: q)  # noqa: E731
    log_pi_now = scaled_log_policy(expected(target_now), tau, legal_now)
    bonus = tf.clip_by_value(tf.gather(log_pi_now, action, axis=1, batch_dims=1), clip, 0.0)
    log_pi_next = scaled_log_policy(expected(target_next) if q_next is None else q_next, tau, legal_next)
    soft = per_quantile(tf.exp(log_pi_next / tau)) * (target_next - per_quantile(log_pi_next))
    if legal_next is not None:
        soft = tf.where(per_quantile(legal_next), soft, tf.zeros_like(soft))
    return per_quantile(reward + alpha * bonus) + per_quantile(discount) * tf.reduce_sum(soft, axis=1)
