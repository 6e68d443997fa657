"""A small act on one intra-op thread (`tfdqn.agent.intra_op`), chosen by its rows alone."""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf

from tfdqn import config as config_lib
from tfdqn.agent import intra_op, private_api
from tfdqn.agent.agent import SERIAL_ACT_FLOPS, build_network, make_agent, serial_rows
from tfdqn.agent.flat_call import FlatCall
from tfdqn.telemetry.flops import forward_flops

NO_CAP = 1_000_000  # TensorFlow's per-thread default


def _raise(message):
    raise RuntimeError(message)


def test_a_call_on_one_thread_sees_the_cap_and_the_cap_before_comes_back_also_where_it_raises():
    assert intra_op.available() and intra_op.current() == NO_CAP
    assert intra_op.on_one_thread(intra_op.current) == 1
    assert intra_op.current() == NO_CAP
    with pytest.raises(RuntimeError, match="inside"):
        intra_op.on_one_thread(_raise, "inside")
    assert intra_op.current() == NO_CAP
    # Nested: the inner call restores the outer cap, not the default.
    assert intra_op.on_one_thread(lambda: (intra_op.on_one_thread(intra_op.current), intra_op.current())) == (1, 1)


def _atari(**overrides):
    return config_lib.build_config([config_lib.CONFIG_DIR / "atari.yaml"], overrides)


@pytest.mark.parametrize("kind, rows", [("nature_cnn", 1), ("impala", 0)])
def test_only_acts_under_the_flop_bound_run_on_one_thread_and_only_compiled_on_a_cpu(kind, rows):
    network = build_network(_atari(**{"network.kind": kind}), (4, 84, 84), np.uint8, 4, seed=0)
    per_row = forward_flops(network, 1)
    assert rows * per_row < SERIAL_ACT_FLOPS <= (rows + 1) * per_row
    assert serial_rows(network, compiled_on_cpu=True) == rows and serial_rows(network, compiled_on_cpu=False) == 0


def test_the_agents_act_takes_the_rule_and_bfloat16_acting_without_xla_does_not():
    shape = (4, 84, 84)
    assert make_agent(_atari(), shape, np.uint8, 4).actor.act.serial_rows == 1
    mixed = make_agent(_atari(**{"compute.mixed_precision": True}), shape, np.uint8, 4).actor
    assert mixed.act.serial_rows == mixed.act_with_epsilon.serial_rows == 0


def _q_function(network):
    return tf.function(lambda frames: network(frames, training=False), jit_compile=True, autograph=False,
                       input_signature=[tf.TensorSpec([None, 4, 84, 84], tf.uint8)])


# Run where TensorFlow's pool has its default threads (the suite's processes have one: tests/conftest.py). It
# builds its own network rather than import this module's helpers: that import would load tests/conftest.py,
# whose TF_NUM_INTRAOP_THREADS=1 would make the pool one thread again.
_MODES = """
import json
import numpy as np
import tensorflow as tf
from tfdqn import config as config_lib
from tfdqn.agent import intra_op
from tfdqn.agent.agent import build_network
from tfdqn.agent.flat_call import FlatCall
network = build_network(config_lib.build_config([config_lib.CONFIG_DIR / "atari.yaml"], {}), (4, 84, 84), np.uint8,
                        4, seed=0)
function = tf.function(lambda frames: network(frames, training=False), jit_compile=True, autograph=False,
                       input_signature=[tf.TensorSpec([None, 4, 84, 84], tf.uint8)])
batch = np.random.default_rng(0).integers(0, 256, (1, 4, 84, 84), dtype=np.uint8)
pool, one = function(tf.constant(batch)).numpy(), intra_op.on_one_thread(function, tf.constant(batch)).numpy()
modes = {"close": bool(np.allclose(pool, one, 1e-5, 1e-6)), "differ": not np.array_equal(pool, one)}
for serial_rows in (1, 0):  # a batch of one row within serial_rows, then above it
    got = FlatCall(function, serial_rows=serial_rows)(batch).numpy()
    modes[serial_rows] = {"pool": np.array_equal(got, pool), "one": np.array_equal(got, one)}
print(json.dumps({"threads": tf.config.threading.get_intra_op_parallelism_threads(), "modes": modes,
                  "cap after": intra_op.current()}))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: the pool has one thread, as the cap")
def test_a_call_within_serial_rows_computes_as_on_one_thread_and_one_above_as_the_pool():
    """At batch 1 the Nature CNN's compiled forward pass splits its work otherwise on two threads than on one, so
    its Q-values differ in their last bits: a call matches the mode serial_rows selects, bit for bit, not the other."""
    env = {key: value for key, value in os.environ.items() if key != "TF_NUM_INTRAOP_THREADS"}
    result = subprocess.run([sys.executable, "-c", _MODES], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.splitlines()[-1])
    assert figures["threads"] == 0 and figures["cap after"] == NO_CAP  # 0: TensorFlow's default, a thread per core
    if not figures["modes"]["differ"]:
        pytest.skip("this CPU computes the two modes alike, bit for bit, so they cannot be told apart")
    assert figures["modes"] == {"close": True, "differ": True, "1": {"pool": False, "one": True},
                                "0": {"pool": True, "one": False}}


def test_an_unverified_tensorflow_acts_on_the_pool_with_one_warning(monkeypatch):
    monkeypatch.setattr(private_api, "_warned", set())
    monkeypatch.setattr(intra_op, "TF_VERSION", "3.99.0")
    intra_op.available.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            calls = [FlatCall(_q_function(build_network(_atari(), (4, 84, 84), np.uint8, 4, seed=0)), serial_rows=1)
                     for _ in range(2)]
        assert [call.serial_rows for call in calls] == [0, 0]
        assert [str(w.message) for w in caught if "intra-op" in str(w.message)] == [
            "one intra-op thread: TensorFlow 3.99.0 is not among the versions SetPerThreadMaxParallelism in "
            f"libtensorflow_framework was verified with ({intra_op.TF_VERIFIED[0]} to {intra_op.TF_VERIFIED[1]}); "
            "using the slower public path, the intra-op pool for every act call"]
    finally:
        intra_op.available.cache_clear()


# A fresh process, so nothing is cached: every fence is asked under versions outside its verified list, with
# ctypes.CDLL wrapped to note each library opened (and then open it as before).
_LOOK_FIRST = """
import ctypes, json, warnings
opened = []
real = ctypes.CDLL
ctypes.CDLL = lambda name, *args, **kwargs: (opened.append(str(name)), real(name, *args, **kwargs))[1]
import numpy as np
import tensorflow as tf
from tfdqn.agent import flat_call, fused_adam, intra_op
intra_op.TF_VERSION = flat_call.TF_VERSION = "3.99.0"
fused_adam.KERAS_VERSION = "4.99.0"
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    available = intra_op.available()
    call = flat_call.FlatCall(tf.function(lambda x: x + 1, input_signature=[tf.TensorSpec([None], tf.float32)]),
                              serial_rows=1)
    adam = fused_adam.FusedAdam(1e-3)
    adam.build([tf.Variable(np.ones(3, np.float32))])
probes = [flat_call._direct_call_works, flat_call._eager_tensor_takes_numpy, intra_op._functions]
print(json.dumps({"available": available, "flat private": call.private, "adam private": adam.private,
                  "opened": opened, "probed": [probe.cache_info().misses for probe in probes],
                  "warnings": sorted(str(w.message).split(":")[0] for w in caught if "public path" in str(w.message))}))
"""


def test_an_unverified_version_opens_no_library_and_runs_no_probe_before_taking_the_public_path():
    result = subprocess.run([sys.executable, "-c", _LOOK_FIRST], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.splitlines()[-1])
    assert figures == {"available": False, "flat private": False, "adam private": False, "opened": [],
                       "probed": [0, 0, 0], "warnings": ["FlatCall", "FusedAdam", "one intra-op thread"]}
