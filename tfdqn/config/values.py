"""One value from a YAML file, `--set KEY=VALUE` or a numeric flag, read as its field's type, or refused in one
line naming the value and what is allowed."""

from __future__ import annotations

import difflib

import yaml

from tfdqn.config.schema import EnvKwargs, field_docs, field_type
from tfdqn.errors import UserError


# What each field type accepts, with examples, for the one-line error of a config key or a numeric flag.
_KINDS = {bool: ("true or false", ""), int: ("an integer", " such as 50000, 5e4 or 50_000"),
          float: ("a number", " such as 0.001 or 1e-3"), str: ("a string", ""),
          tuple: ("a list of integers", " such as [256, 256]"),
          EnvKwargs: ("a mapping of names to YAML scalars or lists", " such as {continuous: false}")}


def not_a(expected: type, value) -> str:
    """`'ten' is not an integer; allowed: an integer such as ...`: the error of a value `convert` refused."""
    kind, examples = _KINDS[expected]
    return f"{value!r} is not {kind}; allowed: {kind}{examples}"


def convert(value, expected):
    """`value` (from YAML, `--set` or a flag) as the type `expected`, or None where it is not one of
    those: `1e5` and `50_000` are integers, as a YAML file or `--set` would give them."""
    if expected is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif expected is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                number = float(value.replace("_", ""))
            except ValueError:
                number = None
            if number is not None and number.is_integer():
                return int(number)
    elif expected is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif expected is str:
        if isinstance(value, str):
            return value
    elif expected is EnvKwargs:
        if isinstance(value, dict) and all(isinstance(k, str) and k and _plain(v) for k, v in value.items()):
            return EnvKwargs.of(value)
    elif expected is tuple:
        if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return tuple(value)
        if isinstance(value, str):
            try:
                return tuple(int(v) for v in value.strip("[]() ").split(",") if v.strip())
            except ValueError:
                pass
    return None


def _plain(value) -> bool:
    """A value env.kwargs may hold: a YAML scalar, or a list (or tuple) of them."""
    scalar = (type(None), bool, int, float, str)
    return isinstance(value, scalar) or (isinstance(value, (list, tuple)) and all(isinstance(v, scalar) for v in value))


def _coerce(key: str, value, expected):
    """Convert a YAML or `--set` value to the field's type, or name the value and what is allowed."""
    converted = convert(value, expected)
    if converted is None:
        raise UserError(f"config key {key} = {not_a(expected, value)}")
    return converted


def _unknown_key(key: str) -> UserError:
    """The closest key, else the keys of the section named (not all ~80 on one line), else the sections."""
    keys = list(field_docs())
    close = difflib.get_close_matches(key, keys, n=1)
    section = key.partition(".")[0]
    in_section = [k for k in keys if k.startswith(f"{section}.")]
    if close:
        hint = f"; did you mean {close[0]}?"
    elif in_section:
        hint = f"; allowed keys in {section}: {', '.join(k.partition('.')[2] for k in in_section)}"
    else:
        sections = ", ".join(dict.fromkeys(k.partition(".")[0] for k in keys))
        hint = f"; allowed: section.key with a section of {sections} (tfdqn train --help lists every key)"
    return UserError(f"unknown config key {key!r}{hint}")


# Keys renamed since a release: a saved run's config.yaml or an old command line still reads.
RENAMED = {"run.update_every": "run.env_steps_per_round"}


ENV_KWARG = "env.kwargs."  # --set env.kwargs.NAME=VALUE sets one keyword argument


def apply_value(values: dict[str, dict], key: str, raw) -> None:
    """Set `values[section][name]` (the plain fields of a config being built) to the field's type of `raw`; a
    renamed key sets its new name, `env.kwargs.NAME` one keyword argument."""
    if key.startswith(ENV_KWARG) and len(key) > len(ENV_KWARG):
        if not _plain(raw):
            raise UserError(f"config key {key} = {raw!r} is not a YAML scalar or a list of them; allowed: a value "
                            f"such as false, 0.5, red or [1, 2]")
        values["env"]["kwargs"] = EnvKwargs.of({**values["env"]["kwargs"].as_dict(), key[len(ENV_KWARG):]: raw})
        return
    section, _, name = RENAMED.get(key, key).partition(".")
    if section not in values or name not in values[section]:
        raise _unknown_key(key)
    values[section][name] = _coerce(key, raw, field_type(f"{section}.{name}"))


def parse_value(raw: str):
    """A command-line value read as a YAML scalar (1e-4, true, [64, 64]), as `--set` and every flag read it."""
    try:
        return yaml.safe_load(raw) if raw.strip() else raw
    except yaml.YAMLError:
        return raw


def parse_set(items: list[str]) -> dict:
    """`--set a.b=c` items to a dict of `parse_value` values."""
    overrides = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set {item!r} is not of the form key=value")
        overrides[key.strip()] = parse_value(raw)
    return overrides
