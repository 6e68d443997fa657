"""A trained policy outside training: exported as a folder that plain TensorFlow loads, and loaded back
as an object that acts on NumPy observations.

A policy folder (`export_policy`) holds:
  saved_model.pb, variables/   a SavedModel whose `serving_default` signature takes `observation` (the
                               actor's input: uint8 frame stacks [batch, stack, height, width], oldest
                               frame first, for Atari; float32 [batch, *shape] otherwise; any batch size)
                               and returns the greedy `action` (int32) and `q_values` (float32); the
                               network's own preprocessing (scaling, layout) is inside the graph
  network.keras                the same network for `keras.models.load_model` (tfdqn's layers must be
                               registered: import tfdqn.agent.networks first)
A distributional head (C51, QR-DQN) exports its expected Q as `q_values`, and noisy layers their mean
weights, so the signature is the same for every head.
  config.yaml, policy.json     the run's config (its env settings) and what the SavedModel takes and
                               which checkpoint it came from
  policy.tflite                with `tfdqn export --format litert`: the same signature for LiteRT (builtin
                               ops only; `policy-int8.tflite` too with --quantize int8), which
                               `load_policy` runs without TensorFlow; policy.json's `litert` reports how
                               its actions and Q-values match the network's on observations from play
The network always computes in float32, also for a run trained with mixed precision, so the folder runs
on any device; such a run's bfloat16 actor may then break near-ties differently.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import time

import keras
import numpy as np
import tensorflow as tf

from tfdqn import __version__
from tfdqn import config as config_lib
from tfdqn.agent.heads import head_spec
from tfdqn.agent.legal_actions import masked_q
from tfdqn.agent.networks import make_network
from tfdqn.agent.observation_encoder import encode, input_specs, legal_actions
from tfdqn.atomic import write_json
from tfdqn.envs.make import EnvSpec, make_env
from tfdqn.envs.observation_layout import ObservationLayout
from tfdqn.errors import RunFailure, UserError
from tfdqn.policy.litert_export import write_litert
from tfdqn.policy.locate import POLICY_FILE, NetworkLocation, locate_network
from tfdqn.policy.numpy_policy import NumpyPolicy
from tfdqn.run.checkpoint import restore_online, write_failure

KERAS_FILE = "network.keras"


def default_policy_dir(run_dir: pathlib.Path, checkpoint: str | int) -> pathlib.Path:
    """`policy-latest`, `policy-best` or `policy-STEP` inside the run folder: never `policy`, the run's product."""
    return pathlib.Path(run_dir) / f"policy-{checkpoint}"


def env_spec(config: config_lib.DQNConfig) -> EnvSpec:
    """The spec of the config's env (its shapes size the network), from an env made and closed again."""
    env, spec = make_env(config.env, seed=config.run.seed)
    env.close()
    return spec


def build_network(config: config_lib.DQNConfig, spec: EnvSpec) -> keras.Model:
    """The config's Q-network computing in float32, whatever precision the run trained in."""
    return make_network(config.network.kind, spec.observation_shape, spec.frame_dtype, spec.num_actions,
                        config.network.hidden_sizes, dtype_policy="float32",
                        head=head_spec(config.network, config.learner), conv_padding=config.network.conv_padding,
                        layout=spec.layout)


def restore_weights(location: NetworkLocation, network: keras.Model) -> int:
    """Load the weights at `location` into `network` (built from the config there); returns the env step
    they were saved at. A policy folder's are its SavedModel's, the graph that is deployed (not network.keras,
    its copy for Keras)."""
    if location.is_policy:
        weights = [variable.numpy() for variable in load_saved_model(location.path).network_variables]
        if [w.shape for w in weights] != [tuple(w.shape) for w in network.weights]:
            raise UserError(f"policy folder {location.path}: its SavedModel's variables do not fit the network its "
                            f"config.yaml builds; allowed: a folder tfdqn export wrote whole (export the run again)")
        network.set_weights(weights)
        return json.loads((location.path / POLICY_FILE).read_text())["env_steps"]
    return restore_online(location.checkpoints, network, location.checkpoint)


def load_saved_model(path: pathlib.Path):
    """The policy folder's SavedModel, or a one-line error naming the folder where it does not load (a file
    truncated or missing: TensorFlow then raises any of several errors)."""
    try:
        return tf.saved_model.load(str(path))
    except Exception as error:  # noqa: BLE001  (OpError, ValueError, IndexError, OSError, ... by TensorFlow's whim)
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise UserError(f"policy folder {path}: its SavedModel (saved_model.pb and variables/) does not load "
                        f"({type(error).__name__}: {first_line}); allowed: a folder tfdqn export wrote whole (export "
                        f"the run again)") from None


def restore_network(location: NetworkLocation) -> tuple[config_lib.DQNConfig, EnvSpec, keras.Model, int]:
    """The config at `location`, its env spec, the float32 network with its weights, and their env step."""
    config = config_lib.build_config([location.config_file], {})
    spec = env_spec(config)
    network = build_network(config, spec)
    return config, spec, network, restore_weights(location, network)


def serving_function(network: keras.Model, spec: EnvSpec,
                     masked: bool = True) -> tf.types.experimental.GenericFunction:
    """observation -> {"action": greedy action, "q_values"}: the graph an export saves and a run's
    policy calls, so both act alike. It takes observations as the env gives them (images [H, W, C] where
    the env's are; one input per part of a Dict or Tuple, and `action_mask`, where frames are byte-encoded) and
    turns them into the layout the network was trained on. The action is the best legal one where the env
    gives a mask and `masked` (the run's `env.mask_actions`)."""
    if spec.layout is not None:
        return _encoded_serving_function(network, spec.layout, masked)
    shape = spec.env_observation_shape
    observation = tf.TensorSpec([None, *shape], tf.as_dtype(spec.frame_dtype), name="observation")
    # [..., H, W, C] -> [..., C, H, W]
    order = [0, *range(1, len(shape) - 2), len(shape), len(shape) - 2, len(shape) - 1]

    @tf.function(input_signature=[observation], autograph=False)
    def serve(observation):
        if spec.env_channels_last:
            observation = tf.transpose(observation, order)
        q_values = network(observation, training=False)
        return {"action": tf.argmax(q_values, axis=-1, output_type=tf.int32), "q_values": q_values}

    return serve


def _encoded_serving_function(network: keras.Model, layout, masked: bool) -> tf.types.experimental.GenericFunction:
    @tf.function(input_signature=[input_specs(layout)], autograph=False)
    def serve(inputs):
        frames = encode(layout, inputs)
        q_values = network(frames, training=False)
        choose = masked_q(q_values, legal_actions(layout, frames)) if masked and layout.mask else q_values
        return {"action": tf.argmax(choose, axis=-1, output_type=tf.int32), "q_values": q_values}

    return serve


def export_policy(network: keras.Model, config: config_lib.DQNConfig, spec: EnvSpec, out: pathlib.Path,
                  run_dir: pathlib.Path, checkpoint: str | int, env_steps: int,
                  litert: tuple[str, int] | None = None) -> dict:
    """Write the policy folder `out` for `network`'s weights (the module docstring lists its files);
    returns {"policy_dir", "export_seconds", "export_bytes"} (and "litert", its parity report, where asked).
    `litert` = (quantize, observations): also policy.tflite, and policy-int8.tflite for "int8", checked on
    that many observations from play (`litert_export`).

    The folder is built beside `out` and renamed into place, so a reader finds the previous folder or
    the new one whole, never a part; an existing `out` that is not a policy folder is refused, never
    replaced."""
    started = time.perf_counter()
    out = pathlib.Path(out)
    if out.exists() and not (out / POLICY_FILE).is_file():
        raise UserError(f"{out} exists and is not a policy folder (no {POLICY_FILE}); allowed: a new folder "
                        f"or a policy folder to replace")
    build = out.with_name(out.name + ".tmp")
    shutil.rmtree(build, ignore_errors=True)  # left by an export that was killed
    try:
        portable = build_network(config, spec)
        portable.set_weights(network.get_weights())
        module = tf.Module()
        # The SavedModel's variables, held as TensorFlow's own, not through the Keras model: TensorFlow's LiteRT
        # converter freezes only those it finds, and finds none inside a Keras 3 model (it then read NaN
        # Q-values); holding both would save every weight twice
        module.network_variables = [weight.value for weight in portable.weights]
        serve = serving_function(portable, spec, config.env.mask_actions)
        tf.saved_model.save(module, str(build), signatures={"serving_default": serve})
        portable.save(build / KERAS_FILE)
        config_lib.save(config, build / "config.yaml")
        lite = {} if litert is None else {"litert": write_litert(build, serve, portable, config, spec, *litert,
                                                                   seed=config.run.seed)}
        write_json(build / POLICY_FILE, {
            "env_id": spec.env_id, "observation_shape": list(spec.env_observation_shape),
            "observation_dtype": np.dtype(spec.frame_dtype).name, "num_actions": spec.num_actions,
            "action_meanings": list(spec.action_meanings) if spec.action_meanings else None,
            "observation_layout": spec.layout.to_config() if spec.layout is not None else None,
            "run_dir": str(run_dir), "checkpoint": checkpoint, "env_steps": env_steps, "tfdqn_version": __version__,
            **lite})
        _replace_folder(build, out)
    except (OSError, tf.errors.OpError) as error:
        shutil.rmtree(build, ignore_errors=True)
        raise RunFailure(f"policy folder {out} could not be written ({write_failure(error)}); the run's checkpoints "
                         f"are intact: python -m tfdqn.export exports them") from None
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return {"policy_dir": str(out), "export_seconds": round(time.perf_counter() - started, 3), "export_bytes": size,
            **lite}


def export_checkpoint(location: NetworkLocation, out: pathlib.Path | None = None,
                      litert: tuple[str, int] | None = None) -> dict:
    """Export the run's checkpoint at `location` as a policy folder (`out`, default `default_policy_dir`);
    returns `export_policy`'s report with the run folder, the checkpoint and its env step. Only the network the
    run's product holds is exported into its `policy` folder (`locate.product_checkpoint`)."""
    out = pathlib.Path(out) if out is not None else default_policy_dir(location.path, location.checkpoint)
    config, spec, network, env_steps = restore_network(location)
    report = export_policy(network, config, spec, out, location.path, location.checkpoint, env_steps, litert)
    return {"run_dir": str(location.path), "checkpoint": location.checkpoint, "env_steps": env_steps, **report}


def _replace_folder(build: pathlib.Path, out: pathlib.Path) -> None:
    """Sync every file of `build` to disk, then rename it to `out`. A previous `out` is renamed aside
    first and deleted after (a folder cannot be renamed over a full one): between the two renames,
    an instant, there is no `out`."""
    for path in build.rglob("*"):
        if path.is_file():
            descriptor = os.open(path, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
    old = out.with_name(out.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        out.replace(old)
    build.replace(out)
    shutil.rmtree(old, ignore_errors=True)


class Policy(NumpyPolicy):
    """A SavedModel's signature (or a run's network through the same serving graph) as a `NumpyPolicy`."""

    def __init__(self, function, holder, env_id: str, env_steps: int, seed: int | None = None, layout=None):
        self._function = function  # a concrete function: observation (or its parts) -> {"action", "q_values"}
        self._holder = holder  # owns the function's variables, which must live as long as it is called
        spec = tf.nest.flatten(function.structured_input_signature)[0]  # `observation` (with no layout)
        shape, dtype = (((layout.width,), np.uint8) if layout is not None
                        else (spec.shape[1:], spec.dtype.as_numpy_dtype))
        super().__init__(tuple(shape), dtype, int(function.structured_outputs["q_values"].shape[-1]), env_id, env_steps,
                         seed, layout)

    def outputs(self, batch) -> dict:
        inputs = batch if isinstance(batch, dict) else {"observation": batch}
        outputs = self._function(**{name: tf.constant(value) for name, value in inputs.items()})
        return {name: value.numpy() for name, value in outputs.items()}


def load_policy(path, checkpoint: str | int = "latest", seed: int | None = None) -> Policy:
    """The policy of a run folder (its checkpoint "latest", "best" or an env step) or of a policy folder
    written by the export (its SavedModel, as plain TensorFlow would load it)."""
    location = locate_network(path, None if checkpoint == "latest" else checkpoint, what="path", flag="checkpoint")
    if location.is_policy:
        loaded = load_saved_model(location.path)
        about = json.loads((location.path / POLICY_FILE).read_text())
        layout = about.get("observation_layout")
        return Policy(loaded.signatures["serving_default"], loaded, about["env_id"], about["env_steps"], seed,
                      None if layout is None else ObservationLayout.from_config(layout))
    config, spec, network, env_steps = restore_network(location)
    function = serving_function(network, spec, config.env.mask_actions).get_concrete_function()
    return Policy(function, network, spec.env_id, env_steps, seed, spec.layout)
