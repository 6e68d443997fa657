import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdqn.agent.fused_adam import FusedAdam


def _variables(seed):
    rng = np.random.default_rng(seed)
    return [tf.Variable(rng.normal(size=shape).astype(np.float32)) for shape in ((6, 5), (5,), (3, 3, 2, 4))]


def _gradients(step, variables):
    rng = np.random.default_rng(100 + step)
    return [tf.constant(rng.normal(size=v.shape).astype(np.float32) * 3.0) for v in variables]


@pytest.mark.parametrize("jit_compile", [False, True])
def test_fused_steps_equal_keras_adam_steps(jit_compile):
    plain_vars, fused_vars = _variables(0), _variables(0)
    kwargs = dict(learning_rate=1e-2, epsilon=1.5e-4, global_clipnorm=2.0)
    plain, fused = keras.optimizers.Adam(**kwargs), FusedAdam(**kwargs)
    plain.build(plain_vars)
    fused.build(fused_vars)
    fused_step = tf.function(lambda grads: fused.apply(grads, fused_vars), jit_compile=jit_compile)
    for step in range(20):
        plain.apply(_gradients(step, plain_vars), plain_vars)
        fused_step(_gradients(step, fused_vars))
    for a, b in zip(plain_vars + plain.variables, fused_vars + fused.variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert int(fused.iterations.numpy()) == 20


def test_checkpoints_interchange_with_keras_adam(tmp_path):
    """Same slot variables under the same names: a run saved before the switch restores after it."""
    variables = _variables(1)
    plain = keras.optimizers.Adam(1e-2)
    plain.build(variables)
    for step in range(3):
        plain.apply(_gradients(step, variables), variables)
    path = tf.train.Checkpoint(optimizer=plain, variables=variables).write(str(tmp_path / "ckpt"))
    restored_vars = _variables(2)
    fused = FusedAdam(1e-2)
    fused.build(restored_vars)
    tf.train.Checkpoint(optimizer=fused, variables=restored_vars).read(path).assert_consumed()
    for a, b in zip(variables + plain.variables, restored_vars + fused.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_amsgrad_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="amsgrad"):
        FusedAdam(amsgrad=True)
