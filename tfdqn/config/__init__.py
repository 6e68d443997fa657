"""A run's configuration: typed, frozen and validated once. `schema` holds the dataclasses and their field
docs, `values` reads one value as its field's type, `files` reads and writes YAML config files, `validation`
checks every rule, `resolution` layers defaults, files, preset and --set with each value's origin, and
`presets` holds the DQN-family recipes with their sources. The packaged YAML files live in `tfdqn/configs/`."""

from tfdqn.config.schema import (ActorsConfig, ComputeConfig, DQNConfig, EnvConfig, EnvKwargs, ExplorationConfig,
                                 LearnerConfig, NetworkConfig, ReplayConfig, RunConfig, TrackingConfig, field_docs,
                                 field_type, interval_fraction)
from tfdqn.config.values import convert, not_a, parse_set, parse_value
from tfdqn.config.files import CONFIG_DIR, annotated_yaml, read_yaml, save, to_dict, to_yaml
from tfdqn.config.validation import validate
from tfdqn.config.resolution import (COMPRESSION_RULE, HELD_NOISE_RULE, IMAGE_RULE, IMAGE_XLA_RULE, NOISY_RULE,
                                     build_config, default_config_file, derived_settings, resolve_config)

__all__ = [
    "DQNConfig", "EnvConfig", "ReplayConfig", "NetworkConfig", "LearnerConfig", "ComputeConfig", "ExplorationConfig",
    "RunConfig", "ActorsConfig", "TrackingConfig", "EnvKwargs", "field_docs", "field_type",
    "convert", "not_a", "parse_set", "parse_value",
    "CONFIG_DIR", "annotated_yaml", "read_yaml", "save", "to_dict", "to_yaml",
    "interval_fraction", "validate",
    "COMPRESSION_RULE", "HELD_NOISE_RULE", "IMAGE_RULE", "IMAGE_XLA_RULE", "NOISY_RULE",
    "build_config", "default_config_file", "derived_settings", "resolve_config",
]
