import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdqn.config import LearnerConfig
from tfdqn.agent import flat_call, private_api
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
                 rng.normal(size=(4, 3)).astype(np.float32), np.ones(4, np.float32))
        loss = flat.update(*batch)["td_loss"].numpy()
        assert loss == public.update_function(*batch)["td_loss"].numpy()
    for a, b in zip(flat.online.get_weights() + flat.target.get_weights(),
                    public.online.get_weights() + public.target.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert int(flat.updates.numpy()) == int(public.updates.numpy()) == 5


def _act_like():
    rng = np.random.default_rng(2)
    weights, bias = tf.Variable(rng.normal(size=(3, 4)).astype(np.float32)), tf.Variable(np.zeros(4, np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def act(observation):
        q = observation @ weights + bias
        return {"action": tf.argmax(q, axis=-1, output_type=tf.int32), "q": q}

    return act


def _update_like():
    """A gradient step assigned in the graph, and a counter: what the Learner's update does, in small."""
    weights, steps = tf.Variable(np.ones((3, 1), np.float32)), tf.Variable(0)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([None], tf.float32)])
    def update(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((tf.squeeze(x @ weights, -1) - y) ** 2)
        weights.assign_sub(0.1 * tape.gradient(loss, weights))
        steps.assign_add(1)
        return {"loss": loss}

    return update, [weights, steps]


def _assert_public_equals_flat(public_call_of):
    """`public_call_of(function)` gives a FlatCall on the public path; its outputs and the variables it
    leaves must equal those of the private flat path, to the bit."""
    act = _act_like()
    flat_act, public_act = FlatCall(act), public_call_of(act)
    assert flat_act.private and not public_act.private
    for rows in (1, 4):
        x = np.random.default_rng(rows).normal(size=(rows, 3)).astype(np.float32)
        a, b = flat_act(x), public_act(x)
        for key in ("action", "q"):
            np.testing.assert_array_equal(a[key].numpy(), b[key].numpy())
    (flat_fn, flat_vars), (public_fn, public_vars) = _update_like(), _update_like()
    flat_update, public_update = FlatCall(flat_fn), public_call_of(public_fn)
    rng = np.random.default_rng(3)
    for _ in range(5):
        x, y = rng.normal(size=(8, 3)).astype(np.float32), rng.normal(size=8).astype(np.float32)
        assert flat_update(x, y)["loss"].numpy() == public_update(x, y)["loss"].numpy()
    for a, b in zip(flat_vars, public_vars):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(public_vars[1].numpy()) == 5


def test_the_public_fallback_gives_the_flat_paths_outputs_and_variables():
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "public path")  # a fallback the caller chose is no cause to warn
        _assert_public_equals_flat(lambda function: FlatCall(function, use_private=False))


def test_the_version_check_accepts_the_installed_tensorflow_and_rejects_others():
    assert private_api.verified(tf.__version__, *flat_call.TF_VERIFIED)
    for version in ("3.99", "2.99.0", "2.22.0rc0", "2.15.1"):
        assert not private_api.verified(version, *flat_call.TF_VERIFIED), version
    assert flat_call._call_flat_has_its_shape() and flat_call._eager_tensor_takes_numpy()
    assert flat_call._direct_call_works()


def _public_by_version(monkeypatch, function):
    with monkeypatch.context() as patch:
        patch.setattr(flat_call, "TF_VERSION", "3.99.0")
        return FlatCall(function)


def test_an_unverified_tensorflow_takes_the_public_path_with_one_warning(monkeypatch):
    """Two FlatCalls made under a made-up TensorFlow version: one warning, and the flat path's results."""
    monkeypatch.setattr(private_api, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _assert_public_equals_flat(lambda function: _public_by_version(monkeypatch, function))
    oldest, newest = flat_call.TF_VERIFIED
    assert [(w.category, str(w.message)) for w in caught if "public path" in str(w.message)] == [(RuntimeWarning, (
        "FlatCall: TensorFlow 3.99.0 is not among the versions ConcreteFunction._call_flat, its function call or "
        f"EagerTensor was verified with ({oldest} to {newest}); using the slower public path, tf.convert_to_tensor, "
        "concrete(*tensors)"))]


def test_a_private_method_of_another_shape_takes_the_public_path(monkeypatch):
    monkeypatch.setattr(private_api, "_warned", set())
    monkeypatch.setattr(flat_call, "_call_flat_has_its_shape", lambda: False)
    with pytest.warns(RuntimeWarning, match=r"TensorFlow .* has no ConcreteFunction._call_flat, its function call or EagerTensor of"):
        call = FlatCall(_act_like())
    assert not call.private and call(np.ones((1, 3), np.float32))["q"].shape == (1, 4)


def test_a_private_tensor_maker_of_another_shape_takes_the_public_path(monkeypatch, request):
    monkeypatch.setattr(private_api, "_warned", set())
    flat_call._eager_tensor_takes_numpy.cache_clear()  # probed once per process: probe the maker set below
    request.addfinalizer(flat_call._eager_tensor_takes_numpy.cache_clear)  # and the real one after
    monkeypatch.setattr(flat_call, "_EagerTensor", lambda value, device, dtype: tf.constant(value, tf.float32))
    with pytest.warns(RuntimeWarning, match="EagerTensor of the expected shape"):
        call = FlatCall(_act_like())
    assert not call.private and call(np.ones((1, 3), np.float32))["q"].shape == (1, 4)


def test_a_function_call_of_another_shape_takes_the_public_path(monkeypatch):
    monkeypatch.setattr(private_api, "_warned", set())
    monkeypatch.setattr(flat_call, "_direct_call_works", lambda: False)
    with pytest.warns(RuntimeWarning, match="its function call or EagerTensor of the expected shape"):
        call = FlatCall(_act_like())
    assert not call.private and call(np.ones((1, 3), np.float32))["q"].shape == (1, 4)


def test_under_a_gradient_tape_or_inside_a_graph_the_call_is_tensorflows_own():
    """Where a tape may watch, gradients flow through the flat call as through the public one; inside a
    tf.function the flat call builds the same graph op."""
    weights = tf.Variable([[1.0], [2.0]])
    function = tf.function(lambda x: {"y": x @ weights}, input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    flat = FlatCall(function)
    assert flat.private
    x = np.array([[3.0, 4.0]], np.float32)
    with tf.GradientTape() as tape:
        y = flat(x)["y"]
    np.testing.assert_array_equal(tape.gradient(y, weights).numpy(), [[3.0], [4.0]])
    outer = tf.function(lambda x: flat(x)["y"] * 2, input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    np.testing.assert_array_equal(outer(x).numpy(), [[22.0]])
    np.testing.assert_array_equal(flat(x)["y"].numpy(), [[11.0]])


def test_the_graph_gets_its_own_copy_of_a_numpy_argument_on_the_current_device():
    """The caller may overwrite its array as soon as the call returns (the loop reuses its buffers), even
    where the graph hands its input straight back; a device scope is honoured as tf.convert_to_tensor
    honours it."""
    echo = FlatCall(tf.function(lambda x: {"x": tf.identity(x)},
                                input_signature=[tf.TensorSpec([None], tf.uint8)]))
    assert echo.private
    storage = np.zeros(256, np.uint8)
    aligned = storage[-storage.ctypes.data % 64:][:64]  # at a 64-byte boundary: a tensor may share its memory
    aligned[:] = np.arange(64)
    for array in (aligned, np.arange(128, dtype=np.uint8)[::2]):  # contiguous or not
        expected = array.copy()
        out = echo(array)["x"]
        array[:] = 255
        np.testing.assert_array_equal(out.numpy(), expected)
    with tf.device("/CPU:0"):
        assert echo(np.zeros(3, np.uint8))["x"].device.endswith("/device:CPU:0")
