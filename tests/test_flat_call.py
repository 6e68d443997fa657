import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdqn.config import LearnerConfig
from tfdqn.agent.flat_call import FlatCall
from tfdqn.agent.learner import Learner


def _scaled_sum():
    calls = tf.Variable(0)

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([], tf.float32)])
    def scaled_sum(x, scale):
        calls.assign_add(1)
        return {"sum": tf.reduce_sum(x, axis=-1) * scale}

    return scaled_sum, calls


def test_traces_once_on_first_use_and_matches_the_public_call():
    function, calls = _scaled_sum()
    flat = FlatCall(function)
    assert function.experimental_get_tracing_count() == 0  # nothing traced until it is needed
    for rows in (1, 5, 3):
        x = np.arange(2 * rows, dtype=np.float32).reshape(rows, 2)
        np.testing.assert_array_equal(flat(x, 2.0)["sum"].numpy(), function(x, tf.constant(2.0))["sum"].numpy())
    assert function.experimental_get_tracing_count() == 1 and int(calls.numpy()) == 6


def test_trace_now_traces_without_running():
    function, calls = _scaled_sum()
    FlatCall(function).trace()
    assert function.experimental_get_tracing_count() == 1 and int(calls.numpy()) == 0


@pytest.mark.parametrize("args, message", [
    ((np.ones((2, 3), np.float32), 1.0), r"scaled_sum: got float32 \[2, 3\], allowed is float32 \[None, 2\]"),
    ((np.ones((2, 2), np.float64), 1.0), r"got float64 \[2, 2\], allowed is float32 \[None, 2\]"),
    ((np.ones((2, 2), np.float32), np.ones(2, np.float32)), r"got float32 \[2\], allowed is float32 \[\]"),
])
def test_refuses_a_wrong_dtype_or_shape_by_name_and_runs_nothing(args, message):
    function, calls = _scaled_sum()
    with pytest.raises(ValueError, match=message):
        FlatCall(function)(*args)
    assert int(calls.numpy()) == 0


def test_refuses_a_wrong_argument_count_and_a_function_without_signature():
    function, _ = _scaled_sum()
    with pytest.raises(TypeError, match="scaled_sum takes 2 arguments, got 1"):
        FlatCall(function)(np.ones((1, 2), np.float32))
    with pytest.raises(ValueError, match="needs an input_signature"):
        FlatCall(tf.function(lambda x: x))


def _learner():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,), dtype="float32")
    online = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    target = keras.models.clone_model(online)
    return Learner(online, target, LearnerConfig(target_update_period=2, learning_rate=0.01), (3,), np.float32)


def test_flat_updates_leave_the_weights_the_public_call_leaves():
    flat, public = _learner(), _learner()
    rng = np.random.default_rng(1)
    for _ in range(5):
        batch = (rng.normal(size=(4, 3)).astype(np.float32), rng.integers(0, 2, 4).astype(np.int32),
                 rng.normal(size=4).astype(np.float32), np.ones(4, np.float32),
                 rng.normal(size=(4, 3)).astype(np.float32))
        loss = flat.update(*batch)["td_loss"].numpy()
        assert loss == public.update_function(*batch)["td_loss"].numpy()
    for a, b in zip(flat.online.get_weights() + flat.target.get_weights(),
                    public.online.get_weights() + public.target.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert int(flat.updates.numpy()) == int(public.updates.numpy()) == 5
