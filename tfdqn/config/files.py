"""Config files: YAML read into dotted keys (with `extends`, beside the file or packaged), and the resolved config
written back as YAML (config.yaml, `--print-config`)."""

from __future__ import annotations

import dataclasses
import importlib.resources
import pathlib

import yaml

from tfdqn.atomic import atomic_write
from tfdqn.config.schema import DQNConfig, EnvKwargs, field_docs
from tfdqn.errors import UserError

# The YAML configs ship inside the package, so a non-editable install finds them from any folder.
CONFIG_DIR = pathlib.Path(str(importlib.resources.files("tfdqn") / "configs"))


def _flatten(path: pathlib.Path, data: dict) -> dict:
    """YAML sections to dotted keys; a section that is not a mapping is reported with its file."""
    flat = {}
    for section, fields in data.items():
        if section == "extends":
            continue
        if not isinstance(fields, dict):
            raise UserError(f"config file {path}: section {section!r} is {fields!r}, expected a mapping of keys")
        flat.update({f"{section}.{key}": value for key, value in fields.items()})
    return flat


def _extended_file(path: pathlib.Path, name) -> pathlib.Path:
    if not isinstance(name, str) or not name:
        raise UserError(f"config file {path}: extends = {name!r}; allowed: a YAML file name such as base.yaml")
    beside = path.parent / name
    packaged = CONFIG_DIR / name
    return beside if beside.exists() or not packaged.exists() else packaged


def _load(path: pathlib.Path) -> dict:
    """A config file's YAML mapping, or a one-line error naming the file."""
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UserError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"config file {path} cannot be read: {e.__class__.__name__}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UserError(f"config file {path} is not valid YAML{where}") from None
    data = data or {}
    if not isinstance(data, dict):
        raise UserError(f"config file {path} holds {type(data).__name__}, expected a mapping of sections")
    return data


def read_yaml(path: pathlib.Path, _seen: tuple = ()) -> dict:
    """A config file's dotted keys, after those of the file it `extends`: a file of that name beside
    it, or else the packaged one (so a copied config still finds `base.yaml`)."""
    path = pathlib.Path(path)
    if path in _seen:
        raise UserError(f"config file {path} extends itself")
    data = _load(path)
    flat = {}
    if "extends" in data:
        flat.update(read_yaml(_extended_file(path, data["extends"]), _seen + (path,)))
    flat.update(_flatten(path, data))
    return flat


def own_keys(path: pathlib.Path) -> dict:
    """A config file's own dotted keys, not those of the file it extends."""
    path = pathlib.Path(path)
    return _flatten(path, _load(path))


def to_dict(config: DQNConfig) -> dict:
    """Nested plain data (tuples as lists) for config.yaml and the TensorBoard hyperparameter table."""
    data = dataclasses.asdict(config)
    for section in data.values():
        for k, v in section.items():
            if isinstance(v, EnvKwargs):
                section[k] = v.as_dict()
            elif isinstance(v, tuple):
                section[k] = list(v)
    return data


def to_yaml(config: DQNConfig) -> str:
    """The config as YAML, sections and keys in declaration order (config.yaml)."""
    return yaml.safe_dump(to_dict(config), sort_keys=False)


def annotated_yaml(config: DQNConfig, sources: dict) -> str:
    """The config as YAML with each key's doc and where its value came from (`--print-config`)."""
    docs, lines = field_docs(), []
    for section, fields in to_dict(config).items():
        lines.append(f"{section}:")
        for name, value in fields.items():
            key = f"{section}.{name}"
            text = yaml.safe_dump({name: value}, default_flow_style=True, width=1_000).strip()[1:-1]
            lines.append(f"  {text}  # {docs[key]} [{sources.get(key, 'default')}]")
    return "\n".join(lines) + "\n"


def save(config: DQNConfig, path: pathlib.Path) -> None:
    """Write the resolved config so that `--config path` reproduces the run."""
    atomic_write(path, to_yaml(config))
