"""Losses of the distributional DQN variants as pure TF functions of tensors (batch-major).

Per-sample losses come back as [B] float32 so the caller can weight them by importance weights and use
them as priorities. Every function is free of Python control flow on tensor values, so it traces under
`tf.function(jit_compile=True, autograph=False)`; inputs are cast to float32 (e.g. from bfloat16).
"""

import tensorflow as tf


def _f32(x) -> tf.Tensor:
    return tf.cast(x, tf.float32)


def huber(td_error, delta) -> tf.Tensor:
    """Elementwise Huber loss (Huber 1964): 0.5 x^2 for |x| <= delta, else delta (|x| - 0.5 delta).

    Written as Keras's `huber` writes it (so a DQN update computes what it computed before the distributional
    heads came); a [B] TD error gives [B] losses.
    """
    x = _f32(td_error)
    abs_x, delta = tf.abs(x), _f32(delta)
    return tf.where(abs_x <= delta, 0.5 * tf.square(x), delta * abs_x - 0.5 * tf.square(delta))


def categorical_support(num_atoms: int, v_min: float, v_max: float) -> tf.Tensor:
    """The C51 support (Bellemare et al. 2017): `num_atoms` evenly spaced returns from v_min to v_max."""
    return tf.linspace(tf.constant(v_min, tf.float32), tf.constant(v_max, tf.float32), num_atoms)


def categorical_projection(target_probabilities, reward, discount, support) -> tf.Tensor:
    """C51's projection of the target distribution onto the support (Bellemare et al. 2017, Algorithm 1).

    Tz_j = clip(reward + discount z_j, v_min, v_max) and atom i receives
    sum_j p_j clip(1 - |Tz_j - z_i| / dz, 0, 1): linear interpolation onto the two neighbouring atoms,
    all of p_j when Tz_j lies on an atom. `discount` is gamma^m times 0/1 (0 at termination puts all
    mass on clip(reward)). The support must be evenly spaced (`categorical_support`).
    target_probabilities [B, N], reward [B], discount [B], support [N] -> [B, N].
    """
    p = _f32(target_probabilities)
    z = _f32(support)
    dz = z[1] - z[0]
    tz = tf.clip_by_value(_f32(reward)[:, None] + _f32(discount)[:, None] * z[None, :], z[0], z[-1])
    # weights[b, i, j]: share of source atom j's mass that lands on atom i.
    weights = tf.clip_by_value(1.0 - tf.abs(tz[:, None, :] - z[None, :, None]) / dz, 0.0, 1.0)
    return tf.reduce_sum(weights * p[:, None, :], axis=-1)


def categorical_loss(logits, target_probabilities) -> tf.Tensor:
    """C51 cross-entropy (Bellemare et al. 2017): -sum_i target_i log softmax(logits)_i, per sample.

    The target is a constant (stop_gradient), so the gradient w.r.t. logits is softmax - target.
    logits [B, N], target_probabilities [B, N] -> [B].
    """
    target = tf.stop_gradient(_f32(target_probabilities))
    return -tf.reduce_sum(target * tf.nn.log_softmax(_f32(logits), axis=-1), axis=-1)


def categorical_q(logits, support) -> tf.Tensor:
    """Q-values of a C51 head: the expected return sum_i softmax(logits)_i z_i. [..., N] -> [...]."""
    return tf.reduce_sum(tf.nn.softmax(_f32(logits), axis=-1) * _f32(support), axis=-1)


def quantile_midpoints(num_quantiles) -> tf.Tensor:
    """QR-DQN's quantile midpoints (Dabney et al. 2018): tau_hat_i = (2 i + 1) / (2 N), i = 0..N-1."""
    n = tf.cast(num_quantiles, tf.float32)
    return (2.0 * tf.range(n) + 1.0) / (2.0 * n)


def quantile_huber_loss(quantiles, target_quantiles, kappa=1.0, fractions=None) -> tf.Tensor:
    """QR-DQN's quantile Huber loss (Dabney et al. 2018, eq. 10 and Algorithm 1), and IQN's (Dabney, Ostrovski et
    al. 2018, eq. 3) where each sample's `fractions` [B, N] were drawn.

    With u_ij = target_j - quantile_i, rho_ij = |tau_i - 1{u_ij < 0}| huber(u_ij, kappa) / kappa, tau_i the
    quantile midpoint (2 i + 1) / 2N or the fraction drawn; the loss is sum_i mean_j rho_ij (sum over the N
    predicted quantiles, mean over the N' targets). Targets are constants (stop_gradient).
    quantiles [B, N], target_quantiles [B, N'] -> [B].
    """
    theta = _f32(quantiles)
    target = tf.stop_gradient(_f32(target_quantiles))
    kappa = _f32(kappa)
    u = target[:, None, :] - theta[:, :, None]  # [B, N, N']
    tau = (quantile_midpoints(tf.shape(theta)[1])[None, :] if fractions is None else _f32(fractions))[:, :, None]
    rho = tf.abs(tau - tf.cast(u < 0.0, tf.float32)) * huber(u, kappa) / kappa
    return tf.reduce_sum(tf.reduce_mean(rho, axis=2), axis=1)


def quantile_q(quantiles) -> tf.Tensor:
    """Q-values of a QR-DQN head: the mean of its quantiles. [..., N] -> [...]."""
    return tf.reduce_mean(_f32(quantiles), axis=-1)
