import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdqn.agent import fused_adam, private_api
from tfdqn.agent.fused_adam import FusedAdam


def _variables(seed):
    rng = np.random.default_rng(seed)
    return [tf.Variable(rng.normal(size=shape).astype(np.float32)) for shape in ((6, 5), (5,), (3, 3, 2, 4))]


def _gradients(step, variables):
    rng = np.random.default_rng(100 + step)
    return [tf.constant(rng.normal(size=v.shape).astype(np.float32) * 3.0) for v in variables]


KWARGS = dict(learning_rate=1e-2, epsilon=1.5e-4, global_clipnorm=2.0)


def _stepped(optimizer, jit_compile=False, steps=20):
    """The variables and slots after `steps` steps of `optimizer` on fixed gradients, as arrays."""
    variables = _variables(0)
    optimizer.build(variables)
    step = tf.function(lambda grads: optimizer.apply(grads, variables), jit_compile=jit_compile)
    for i in range(steps):
        step(_gradients(i, variables))
    assert int(optimizer.iterations.numpy()) == steps
    return [v.numpy() for v in variables + optimizer.variables]


def _assert_close(a, b):
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def _runs_the_fused_kernel(optimizer):
    variables = _variables(0)
    graph = tf.function(lambda grads: optimizer.apply(grads, variables)).get_concrete_function(
        _gradients(0, variables)).graph
    return "ResourceApplyAdam" in {op.type for op in graph.get_operations()}


@pytest.mark.parametrize("jit_compile", [False, True])
def test_fused_steps_equal_keras_adam_steps(jit_compile):
    fused = FusedAdam(**KWARGS)
    _assert_close(_stepped(keras.optimizers.Adam(**KWARGS)), _stepped(fused, jit_compile))
    assert fused.private and _runs_the_fused_kernel(FusedAdam(**KWARGS))


@pytest.mark.parametrize("jit_compile", [False, True])
def test_the_public_fallback_steps_equal_the_fused_and_keras_adam_steps(jit_compile):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "public path")  # a fallback the caller chose is no cause to warn
        public = FusedAdam(**KWARGS, use_private=False)
        public_state = _stepped(public, jit_compile)
    assert not public.private and not _runs_the_fused_kernel(FusedAdam(use_private=False))
    _assert_close(public_state, _stepped(keras.optimizers.Adam(**KWARGS), jit_compile))
    _assert_close(public_state, _stepped(FusedAdam(**KWARGS), jit_compile))


def test_the_version_check_accepts_the_installed_keras_and_rejects_others():
    assert private_api.verified(keras.__version__, *fused_adam.KERAS_VERIFIED)
    for version in ("3.99", "4.0.0", "3.16.0.dev2026", "2.15.0"):
        assert not private_api.verified(version, *fused_adam.KERAS_VERIFIED), version
    assert fused_adam._internals_have_their_shape()
    optimizer, variables = FusedAdam(), _variables(0)
    assert not fused_adam._slots_have_their_shape(optimizer, variables)  # no slots before build
    optimizer.build(variables)
    assert fused_adam._slots_have_their_shape(optimizer, variables)


def test_an_unverified_keras_takes_keras_adams_step_with_one_warning(monkeypatch):
    monkeypatch.setattr(fused_adam, "KERAS_VERSION", "3.99.0")
    monkeypatch.setattr(private_api, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimizers = [FusedAdam(**KWARGS) for _ in range(3)]
        state = _stepped(optimizers[0])
    assert not any(optimizer.private for optimizer in optimizers)
    oldest, newest = fused_adam.KERAS_VERIFIED
    assert [(w.category, str(w.message)) for w in caught if "public path" in str(w.message)] == [(RuntimeWarning, (
        f"FusedAdam: Keras 3.99.0 is not among the versions {fused_adam._INTERNALS} was verified with "
        f"({oldest} to {newest}); using the slower public path, Keras Adam.update_step"))]
    monkeypatch.setattr(fused_adam, "KERAS_VERSION", keras.__version__)
    _assert_close(state, _stepped(FusedAdam(**KWARGS)))
    _assert_close(state, _stepped(keras.optimizers.Adam(**KWARGS)))


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
