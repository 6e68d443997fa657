"""The config a command line or `DQNConfig.for_env` runs, resolved once in layers (defaults, files, preset,
--set), each value keeping where it came from, then the conditional defaults derived in one place."""

from __future__ import annotations

import dataclasses
import pathlib

from tfdqn.config.files import CONFIG_DIR, own_keys, read_yaml
from tfdqn.config.presets import preset_settings
from tfdqn.config.schema import DQNConfig, section_type
from tfdqn.config.validation import held_noise_allowed, validate
from tfdqn.config.values import ENV_KWARG, RENAMED, apply_value


def build_config(files: list, overrides: dict, sources: dict | None = None) -> DQNConfig:
    """Defaults, then each file in order, then the overrides; validated once. `sources`, where given,
    is filled with the origin of every key set (for `--print-config`)."""
    layers = [{key: (raw, f"file {pathlib.Path(path).name}") for key, raw in read_yaml(path).items()} for path in files]
    return _build([*layers, {key: (raw, SET) for key, raw in overrides.items()}], sources)


def _build(layers: list[dict], sources: dict | None = None, check: bool = True) -> DQNConfig:
    """Defaults, then each layer (key -> (raw value, origin)) in order; validated once (unless not `check`)."""
    values = {s.name: {f.name: getattr(getattr(DQNConfig(), s.name), f.name)
                       for f in dataclasses.fields(section_type(s.name))}
              for s in dataclasses.fields(DQNConfig)}
    for layer in layers:
        for key, (raw, origin) in layer.items():
            apply_value(values, key, raw)
            if sources is not None:
                sources["env.kwargs" if key.startswith(ENV_KWARG) else RENAMED.get(key, key)] = origin
    config = DQNConfig(**{name: section_type(name)(**fields) for name, fields in values.items()})
    if check:
        validate(config)
    return config


def default_config_file(env_name: str) -> pathlib.Path:
    """An env's own tuned file where one ships (lunarlander.yaml for LunarLander-v3), else atari.yaml
    for ALE games and the classic-control file (cartpole.yaml) for every other env."""
    from tfdqn.envs.make import is_atari_id, resolve_env_id  # envs import the config's dataclasses

    env_id = resolve_env_id(env_name)
    own = CONFIG_DIR / f"{env_id.split('/')[-1].rsplit('-v', 1)[0].lower()}.yaml"
    if own.name not in ("base.yaml", "atari.yaml") and own.exists():
        return own
    return CONFIG_DIR / ("atari.yaml" if is_atari_id(env_id) else "cartpole.yaml")


# Where a value can come from, in the order the layers apply; `--print-config` shows each key's.
SET = "--set or a flag"
NOISY_RULE = ("rule: noisy nets explore by their noise, so epsilon is 0 unless --set or a --config file sets it "
              "(Fortunato et al. 2018; Dopamine's full Rainbow agent acts so)")
HELD_NOISE_RULE = ("rule: noisy nets that the trainer acts with itself (actors.kind inline, compute.act_device auto) "
                   "hold their acting noise between updates unless --set, a --config file or the preset sets "
                   "network.noise_refresh (Fortunato et al. 2018 section 3.1; an act call then costs about 1.45 "
                   "plain ones instead of 1.8: docs/experiments/performance.md)")
COMPRESSION_RULE = ("rule: Atari frames are compressed with lz4 in the host replay unless --set or a --config file "
                    "sets replay.compression (about 14 times less memory, the same run bit for bit: "
                    "docs/experiments/replay.md)")
IMAGE_XLA_RULE = ("rule: a convolutional network's update runs without XLA unless --set or a --config file sets "
                  "compute.update_jit_compile (the generic config's XLA is for its MLP; on a CPU the trainer's XLA "
                  "update of the Nature CNN took 23 to 26 times as long: docs/bench-networks-xla.md)")
IMAGE_RULE = ("rule: an env that observes uint8 images gets network.kind auto, a CNN their size fits, unless --set "
              "or a --config file sets network.kind (the generic config's mlp is for vector observations)")


def resolve_config(files: list, overrides: dict, preset: str | None = None, sources: dict | None = None) -> DQNConfig:
    """The config a command line runs, resolved once. Layers, each value keeping its origin: the defaults, the
    config files (`files`; none: the packaged one for the env), the preset's settings for the env's kind
    (`tfdqn.config.presets`: its recipe, or an adaptation saying why), then `overrides` (--set and the flags). Then the
    conditional defaults, in `derived_settings`, from what the layers resolved and who set it, never from which
    layers happen to name a key. `sources` (optional) receives each key's origin."""
    from tfdqn.envs.names import is_atari_name  # envs import the config's dataclasses

    given = [pathlib.Path(f) for f in files]
    paths = given or [default_config_file(str(overrides.get("env.id") or DQNConfig().env.id))]
    files_layers = [{key: (raw, f"file {path.name}") for key, raw in read_yaml(path).items()} for path in paths]
    set_layer = {key: (raw, SET) for key, raw in overrides.items()}
    env_id = _build([*files_layers, set_layer], check=False).env.id  # a rule across keys may need the preset's
    preset_layer = preset_settings(preset, is_atari_name(env_id)) if preset else {}
    layers = [*files_layers, preset_layer, set_layer]
    # The user's own keys: --set, the flags and the files given (their own keys, not those they extend).
    user = set(overrides).union(*(own_keys(path) for path in given))
    layers.append(derived_settings(_build(layers), env_id, user, set(preset_layer)))
    return _build(layers, sources)


def derived_settings(layered: DQNConfig, env_id: str, user: set, preset: set) -> dict:
    """The conditional defaults, in one place: key -> (value, the rule that sets it).
    - What the env id implies (`tfdqn.envs.names.implied_settings`: ALE v5's sticky actions and frame skip),
      for every key that neither the user nor the preset sets.
    - Noisy nets => epsilon 0 (`NOISY_RULE`), unless the user sets an epsilon key. A preset never sets both
      (tests/test_preset_sources.py): its epsilon would be dead, as DER.gin's is in Dopamine.
    - Noisy nets that the trainer acts with itself => acting noise held between updates (`HELD_NOISE_RULE`),
      unless the user or the preset sets network.noise_refresh (der cites Dopamine's per-call noise).
    - Atari frames in a host replay => lz4 (`COMPRESSION_RULE`), unless the user sets replay.compression: the
      codec that decodes fastest (docs/bench-replay.md), so the loop barely waits on it.
    - uint8 image observations of any other env => network.kind auto (`IMAGE_RULE`), unless the user or the
      preset sets it: the generic config (cartpole.yaml) names the MLP for vector observations; and a CNN
      there => the update without XLA (`IMAGE_XLA_RULE`), unless the user or the preset sets it: the generic
      config's XLA update suits its MLP and is tens of times slower for a CNN on a CPU."""
    from tfdqn.envs.names import implied_settings, is_atari_name, observes_images, resolve_env_id

    derived = {key: (value, f"implied by env {env_id}") for key, value in implied_settings(env_id).items()
               if key not in user | preset}
    epsilon = ("exploration.epsilon_start", "exploration.epsilon_end")
    if layered.network.noisy and not user & set(epsilon):
        derived.update({key: (0.0, NOISY_RULE) for key in epsilon})
    if held_noise_allowed(layered) and "network.noise_refresh" not in user | preset:
        derived["network.noise_refresh"] = ("update", HELD_NOISE_RULE)
    if is_atari_name(env_id) and layered.replay.device == "host" and "replay.compression" not in user:
        derived["replay.compression"] = ("lz4", COMPRESSION_RULE)
    if not is_atari_name(env_id) and observes_images(resolve_env_id(env_id), layered.env.kwargs.as_dict()):
        derived.update(_image_settings(layered, user | preset))
    return derived


def _image_settings(layered: DQNConfig, chosen: set) -> dict:
    """`IMAGE_RULE` and `IMAGE_XLA_RULE` for an env of uint8 images, each where the key is not in `chosen`
    (the keys the user or the preset sets)."""
    derived = {}
    if layered.network.kind == "mlp" and "network.kind" not in chosen:
        derived["network.kind"] = ("auto", IMAGE_RULE)
    convolutional = derived.get("network.kind", (layered.network.kind,))[0] != "mlp"
    if convolutional and layered.compute.update_jit_compile and "compute.update_jit_compile" not in chosen:
        derived["compute.update_jit_compile"] = (False, IMAGE_XLA_RULE)
    return derived
