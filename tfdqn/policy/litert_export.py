"""A policy for LiteRT: the serving graph (observation -> greedy action, Q-values) converted with TensorFlow's
LiteRT converter to builtin ops only (no Flex ops, which the LiteRT runtime lacks), in float32 and, on
request, int8 (weights and activations quantized on observations from real play), each checked against
the float32 Keras network on other observations from real play: how often the greedy actions agree and the
largest Q-value difference (`policy.json`'s `litert`)."""

from __future__ import annotations

import contextlib
import itertools
import os
import pathlib
import sys
import tempfile
import warnings

import keras
import numpy as np
import tensorflow as tf

from tfdqn import config as config_lib
from tfdqn.agent.legal_actions import masked_q_numpy
from tfdqn.envs.make import EnvSpec, make_env
from tfdqn.errors import RunFailure, UserError
from tfdqn.policy.litert import LITERT_FILES, QUANTIZE, LiteRTPolicy
from tfdqn.run.evaluation import play_steps

PLAY_EPSILON = 0.1  # random actions while collecting observations, so they cover more than one trajectory


def play_observations(config: config_lib.DQNConfig, spec: EnvSpec, network: keras.Model, count: int,
                      seed: int) -> np.ndarray:
    """[count, *observation_shape] network inputs met by playing the env with `network`'s greedy action
    (a random one with probability PLAY_EPSILON), as the actor stacks them: both among the legal actions where
    the env gives a mask, as training plays. An env that raises while played fails the export in one line."""
    env, _ = make_env(config.env, seed=seed)
    rng = np.random.default_rng(seed)

    def choose(observation: np.ndarray) -> int:
        q_values = network(observation, training=False).numpy()
        legal = spec.layout.legal(observation) if spec.layout is not None else None
        greedy = int(np.argmax(q_values if legal is None else masked_q_numpy(q_values, legal)))
        if rng.random() >= PLAY_EPSILON:
            return greedy
        return int(rng.integers(spec.num_actions)) if legal is None else int(rng.choice(np.flatnonzero(legal[0])))

    observations = np.empty((count, *spec.observation_shape), spec.frame_dtype)
    try:
        for i, (observation, _) in enumerate(itertools.islice(play_steps(env, spec, choose, seed), count)):
            observations[i] = observation[0]
    except (UserError, RunFailure):
        raise
    except Exception as error:  # the env's own failure, of any type: its first line says what went wrong
        first_line = (str(error).strip().splitlines() or [""])[0]
        raise RunFailure(f"env {spec.env_id} raised {type(error).__name__} ({first_line}) while the export played "
                         f"it for the LiteRT model's observations; the policy folder is left as it was") from None
    finally:
        env.close()
    return observations


@contextlib.contextmanager
def native_stderr_quiet():
    """File descriptor 2 into a discarded file while the block runs: TensorFlow's converter writes its C++ log
    lines there directly (past Python's sys.stderr), and its deprecation notices too, dozens a conversion."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def convert(serve: tf.types.experimental.GenericFunction, network: keras.Model, quantize: str = "none",
            representative: np.ndarray | None = None) -> bytes:
    """`serve` (`saved_model.serving_function` of `network`) as a LiteRT flatbuffer of builtin ops only; int8
    calibrates its activations on `representative` observations. The converter freezes the variables it finds
    on the object it is given: handed the Keras model, it finds none of Keras 3's and leaves READ_VARIABLE
    ops that fail at run time, so it is handed the network's TensorFlow variables themselves."""
    holder = tf.Module()
    holder.network_variables = [weight.value for weight in network.weights]
    converter = tf.lite.TFLiteConverter.from_concrete_functions([serve.get_concrete_function()], holder)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantize == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if not isinstance(representative, dict):
            representative = {"observation": representative}
        count = len(next(iter(representative.values())))  # inputs by name: the model orders them its own way
        converter.representative_dataset = lambda: ({name: value[i:i + 1] for name, value in representative.items()}
                                                    for i in range(count))
    try:
        with native_stderr_quiet():  # the converter's own log lines and warnings: not the user's business
            return converter.convert()
    except Exception as error:  # the converter raises its own types; its first line says what failed
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise UserError(f"the policy cannot be converted to LiteRT with builtin ops only: {first_line}; allowed: "
                        f"--format savedmodel") from None


def _env_inputs(spec: EnvSpec, observations: np.ndarray):
    """Observations as tfdqn stores them, as the LiteRT model takes them: images as the env gives them, or one
    array per part of byte frames (`ObservationLayout.frame_inputs`)."""
    return spec.layout.frame_inputs(observations) if spec.layout is not None else spec.as_env_gives(observations)


def parity(model: bytes, network: keras.Model, spec: EnvSpec, observations: np.ndarray) -> dict:
    """How the LiteRT model's greedy actions and Q-values match the float32 network's on `observations` (as
    tfdqn stores them; the model takes them as the env gives them)."""
    with native_stderr_quiet():  # the runtime's line on the delegate it made
        q_values = LiteRTPolicy(model, "", 0, layout=spec.layout).outputs(_env_inputs(spec, observations))["q_values"]
    ours = np.concatenate([network(part, training=False).numpy() for part in np.array_split(observations, 100)
                           if len(part)])
    return {"observations": len(observations),
            "action_agreement": float(np.mean(q_values.argmax(-1) == ours.argmax(-1))),
            "max_abs_q_difference": float(np.max(np.abs(q_values - ours))),
            "q_range": [float(ours.min()), float(ours.max())]}


def write_litert(build: pathlib.Path, serve, network: keras.Model, config: config_lib.DQNConfig, spec: EnvSpec,
                 quantize: str, observations: int, seed: int) -> dict:
    """policy.tflite (and policy-int8.tflite where asked) in the policy folder being built, with their
    parity report: calibration and parity observations come from two plays with different seeds."""
    if quantize not in QUANTIZE:
        raise UserError(f"--quantize {quantize!r}; allowed: {', '.join(QUANTIZE)}")
    if quantize == "int8" and spec.layout is not None:  # its int8 model agreed with the network on half the actions
        raise UserError(f"--quantize int8 takes a policy of Box observations; {spec.env_id}'s are "
                        f"{spec.layout.nesting} parts; allowed: --quantize none (float32 LiteRT)")
    checked = play_observations(config, spec, network, observations, seed)
    report = {}
    for kind in ("float32", *(["int8"] if quantize == "int8" else [])):
        calibration = play_observations(config, spec, network, min(observations, 500), seed + 1) \
            if kind == "int8" else None
        model = convert(serve, network, "int8" if kind == "int8" else "none",
                        None if calibration is None else _env_inputs(spec, calibration))
        (build / LITERT_FILES[kind]).write_bytes(model)
        report[kind] = {"file": LITERT_FILES[kind], "bytes": len(model), **parity(model, network, spec, checked)}
    return {"play_seed": seed, "play_epsilon": PLAY_EPSILON, **report}
