import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdqn.agent.noisy import NoisyDense, acting_noise

P, Q = 6, 4


def _layer(**kwargs):
    layer = NoisyDense(Q, **{"seed": 1, "noise_seed": 2, **kwargs})
    layer.build((None, P))
    return layer


def _f(x):
    return np.sign(x) * np.sqrt(np.abs(x))


def _inputs():
    return tf.constant(np.random.default_rng(0).normal(size=(3, P)).astype(np.float32))


def _draws(generator_seed=2):
    """f(eps_in), f(eps_out) by hand: one draw of P + Q from a generator seeded as the layer's (outside XLA
    on CPU Keras's draw is Philox, the algorithm the layer names)."""
    eps = keras.random.normal((P + Q,), seed=keras.random.SeedGenerator(generator_seed)).numpy()
    return _f(eps[:P].astype(np.float64)), _f(eps[P:].astype(np.float64))


def test_initial_weights_are_seeded_and_in_range():
    a, b, c = _layer(), _layer(), _layer(seed=7)
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert not np.array_equal(a.kernel_mu.numpy(), c.kernel_mu.numpy())
    assert not np.array_equal(a.kernel_mu.numpy()[0], a.bias_mu.numpy())
    bound = 1 / np.sqrt(P)
    for mu in (a.kernel_mu, a.bias_mu):
        assert np.all(np.abs(mu.numpy()) <= bound) and np.abs(mu.numpy()).max() > bound / 2
    for sigma in (a.kernel_sigma, a.bias_sigma):
        np.testing.assert_allclose(sigma.numpy(), 0.5 / np.sqrt(P), rtol=1e-6)


def test_evaluation_uses_the_means_and_training_draws_fresh_noise():
    layer, x = _layer(), _inputs()
    expected = x.numpy() @ layer.kernel_mu.numpy() + layer.bias_mu.numpy()
    for training in (False, None):  # NumPy's and TensorFlow's matmuls may round apart by an ulp
        np.testing.assert_allclose(layer(x, training=training).numpy(), expected, rtol=1e-6, atol=1e-6)
    assert not np.allclose(layer(x, training=True), layer(x, training=True))


@pytest.mark.parametrize("jit_compile", [False, True])
def test_graph_draws_fresh_noise_per_call_without_retracing(jit_compile):
    layer, x, traces = _layer(), _inputs(), []

    @tf.function(jit_compile=jit_compile, autograph=False)
    def twice(x):
        traces.append(1)
        return layer(x, training=True), layer(x, training=True), layer(x, training=False)

    outputs = [twice(x) for _ in range(3)]
    assert len(traces) == 1
    noisy = [o.numpy() for first, second, _ in outputs for o in (first, second)]
    assert len({o.tobytes() for o in noisy}) == len(noisy)
    expected = x.numpy() @ layer.kernel_mu.numpy() + layer.bias_mu.numpy()
    np.testing.assert_allclose(outputs[-1][2], expected, rtol=1e-5, atol=1e-6)


def _noisy_matrix_output(layer, x, f_in, f_out):
    """The layer's output in NumPy (float64) for noise f(eps_in), f(eps_out), through the noisy matrix."""
    mu, sigma = layer.kernel_mu.numpy().astype(np.float64), layer.kernel_sigma.numpy().astype(np.float64)
    return (x.numpy().astype(np.float64) @ (mu + sigma * np.outer(f_in, f_out)) + layer.bias_mu.numpy()
            + layer.bias_sigma.numpy() * f_out)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_graph_traced_to_act_reads_the_held_noise_until_it_is_redrawn(jit_compile):
    """hold_acting_noise: the layer's first draw is held; a graph traced inside acting_noise() computes with it
    (the noisy matrix of that draw, in NumPy) and draws nothing; redraw_acting_noise holds the stream's next
    draw; other graphs still draw on every call."""
    layer, x, traces = _layer(hold_acting_noise=True), _inputs(), []

    @tf.function(jit_compile=jit_compile, autograph=False)
    def act(x):
        traces.append(1)
        with acting_noise():
            return layer(x, training=True)

    f_in, f_out = _draws()
    state = layer.seed_generator.state.numpy().copy()
    first, second = act(x).numpy(), act(x).numpy()
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(layer.seed_generator.state.numpy(), state)  # acting drew nothing
    np.testing.assert_allclose(first, _noisy_matrix_output(layer, x, f_in, f_out), rtol=1e-5, atol=1e-6)
    layer.redraw_acting_noise()
    held = layer.acting_noise.numpy().astype(np.float64)
    redrawn = act(x).numpy()
    assert not np.allclose(redrawn, first) and len(traces) == 1
    np.testing.assert_allclose(redrawn, _noisy_matrix_output(layer, x, held[:P], held[P:]), rtol=1e-5, atol=1e-6)
    assert not np.allclose(layer(x, training=True), layer(x, training=True))  # outside acting_noise: per call


def test_held_noise_is_checkpointed_but_not_a_weight(tmp_path):
    model = keras.Sequential([keras.Input((P,)), NoisyDense(Q, noise_seed=2, hold_acting_noise=True)])
    layer = model.layers[0]
    assert len(model.weights) == 4 and all(layer.acting_noise is not w for w in model.weights)
    assert any(layer.acting_noise is v for v in model.variables)
    path = tf.train.Checkpoint(online=model).write(str(tmp_path / "ckpt"))
    saved = layer.acting_noise.numpy().copy()
    layer.redraw_acting_noise()
    tf.train.Checkpoint(online=model).read(path).assert_consumed()
    np.testing.assert_array_equal(layer.acting_noise.numpy(), saved)


def test_noise_is_factorised():
    layer = _layer()
    for var, value in ((layer.kernel_mu, 0.0), (layer.bias_mu, 0.0), (layer.kernel_sigma, 1.0), (layer.bias_sigma, 1.0)):
        var.assign(np.full(var.shape, value, np.float32))
    out = layer(tf.constant(np.vstack([np.eye(P), np.zeros((1, P))]), tf.float32), training=True).numpy()
    bias, kernel = out[-1], out[:-1] - out[-1]
    assert np.linalg.matrix_rank(kernel, tol=1e-5) == 1
    f_in, f_out = _draws()
    np.testing.assert_allclose(kernel, np.outer(f_in, f_out), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias, f_out, rtol=1e-6)


def test_noise_seed_fixes_the_noise_sequence():
    x = _inputs()
    layers = _layer(), _layer(seed=9), _layer(noise_seed=3)  # sigma is the same for all three
    noise = [[layer(x, training=True).numpy() - layer(x).numpy() for _ in range(3)] for layer in layers]
    np.testing.assert_allclose(noise[0], noise[1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(noise[0][0], noise[0][1])
    assert not np.allclose(noise[0], noise[2])


def test_noise_state_is_a_variable_but_not_a_weight_and_is_checkpointed(tmp_path):
    model = keras.Sequential([keras.Input((P,)), NoisyDense(Q, noise_seed=2)])
    layer = model.layers[0]
    state = layer.seed_generator.state
    assert all(state is not w for w in model.weights) and len(model.weights) == 4
    assert any(state is v for v in model.variables)
    x = _inputs()
    path = tf.train.Checkpoint(online=model).write(str(tmp_path / "ckpt"))
    after_save = model(x, training=True).numpy()
    model(x, training=True)
    tf.train.Checkpoint(online=model).read(path).assert_consumed()
    np.testing.assert_array_equal(model(x, training=True).numpy(), after_save)


def test_config_round_trips():
    layer = NoisyDense(Q, activation="relu", sigma0=0.3, seed=4, noise_seed=5, name="noisy", dtype="mixed_bfloat16",
                       hold_acting_noise=True)
    for copy in (NoisyDense.from_config(layer.get_config()), keras.layers.deserialize(keras.layers.serialize(layer))):
        assert isinstance(copy, NoisyDense)
        assert copy.get_config() == layer.get_config()
        assert (copy.units, copy.sigma0, copy.seed, copy.noise_seed, copy.name) == (Q, 0.3, 4, 5, "noisy")
        assert copy.hold_acting_noise is True
        assert copy.activation is keras.activations.relu and copy.dtype_policy.name == "mixed_bfloat16"


def test_mixed_bfloat16_computes_in_bfloat16_with_float32_variables():
    layer = _layer(dtype="mixed_bfloat16")
    for training in (True, False):
        assert layer(_inputs(), training=training).dtype == tf.bfloat16
    assert {v.dtype for v in layer.weights} == {"float32"}


def test_training_gradients_reach_means_and_sigmas():
    layer = _layer()
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(_inputs(), training=True) ** 2)
    gradients = tape.gradient(loss, layer.trainable_variables)
    assert len(gradients) == 4 and all(np.abs(g.numpy()).sum() > 0 for g in gradients)




def test_training_output_and_gradients_match_the_noisy_matrix_in_numpy():
    layer, x = _layer(), _inputs()
    with tf.GradientTape() as tape:
        y = layer(x, training=True)
        loss = tf.reduce_sum(y ** 2)
    grads = dict(zip(("kernel_mu", "kernel_sigma", "bias_mu", "bias_sigma"),
                     tape.gradient(loss, [layer.kernel_mu, layer.kernel_sigma, layer.bias_mu, layer.bias_sigma])))
    f_in, f_out = _draws()
    mu, sigma = layer.kernel_mu.numpy().astype(np.float64), layer.kernel_sigma.numpy().astype(np.float64)
    noise = np.outer(f_in, f_out)
    xs = x.numpy().astype(np.float64)
    expected = xs @ (mu + sigma * noise) + layer.bias_mu.numpy() + layer.bias_sigma.numpy() * f_out
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-6)
    dy = 2 * expected  # d sum(y^2) / dy
    np.testing.assert_allclose(grads["kernel_mu"], xs.T @ dy, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads["kernel_sigma"], (xs.T @ dy) * noise, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads["bias_mu"], dy.sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads["bias_sigma"], dy.sum(0) * f_out, rtol=1e-4, atol=1e-5)


def test_acting_never_forms_the_noisy_weight_matrix():
    """Only the variables' own reads may be p x units: no noise matrix, no mu + sigma * noise."""
    layer = _layer()
    graph = tf.function(lambda x: layer(x, training=True), autograph=False).get_concrete_function(
        tf.TensorSpec([1, P], tf.float32)).graph
    full = [op for op in graph.get_operations() if op.type not in ("ReadVariableOp", "Identity", "IdentityN", "Cast")
            for out in op.outputs if out.shape.rank == 2 and out.shape.as_list() == [P, Q]]
    assert full == [], [op.type for op in full]



def test_a_compiled_batch_1_call_ends_each_product_in_its_bias_add():
    """Under XLA on CPU a matrix-vector product followed by an add is one fused kernel, faster than the
    product alone: the noisy layer gives both of its products their bias so both fuse."""
    layer = NoisyDense(64, seed=1, noise_seed=2)
    layer.build((None, 256))
    call = tf.function(lambda x: layer(x, training=True), jit_compile=True)
    hlo = call.experimental_get_compiler_ir(tf.zeros([1, 256]))(stage="optimized_hlo")
    entry = hlo[hlo.index("\nENTRY"):]
    fused = [line for line in entry.splitlines() if "kind=kOutput" in line]
    assert len(fused) == 2 and " dot(" not in entry, entry


def test_a_traced_update_through_a_noisy_relu_layer_passes_grappler_without_errors():
    """Grappler's remapper once rewrote MatMul + BiasAdd + Add + Relu here into a graph TensorFlow's TFG
    passes rejected, logged as "has an empty op name"; its log goes to the process's stderr."""
    script = textwrap.dedent("""
        import numpy as np, tensorflow as tf
        from tfdqn.agent.noisy import NoisyDense
        layer = NoisyDense(32, activation="relu", seed=1, noise_seed=2)
        layer.build((None, 64))
        x = tf.constant(np.ones((8, 64), np.float32))

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(layer(x, training=True) ** 2)
            return tape.gradient(loss, layer.trainable_variables)

        print(float(step()[0].numpy().sum()))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "tfg_optimizer" not in done.stderr and "empty op name" not in done.stderr, done.stderr
