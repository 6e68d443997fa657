"""`--param KEY=DIST`: a config key and the distribution a study samples it from.

DIST is `loguniform:LOW:HIGH`, `uniform:LOW:HIGH`, `int:LOW:HIGH` or `choice:A,B,...`; a value reaches
the trial's run as `--set KEY=VALUE`, so the config reads and checks it as it reads any `--set`.
"""

from __future__ import annotations

import dataclasses
import math

from tfdqn import config as config_lib
from tfdqn.errors import UserError

KINDS = ("loguniform", "uniform", "int", "choice")
KINDS_BY_TYPE = {int: ("int", "choice"), float: KINDS}  # what a key of each type can be sampled from
ALLOWED = "KEY=DIST with DIST one of loguniform:LOW:HIGH, uniform:LOW:HIGH, int:LOW:HIGH, choice:A,B,..."


@dataclasses.dataclass(frozen=True)
class Param:
    key: str              # a config key, e.g. learner.learning_rate
    kind: str             # one of KINDS
    low: float = 0.0      # loguniform, uniform, int: the range, both ends included
    high: float = 0.0
    choices: tuple = ()   # choice: the values, as --set text

    def suggest(self, trial):
        """This parameter's value for an Optuna trial, named by its key."""
        if self.kind == "loguniform":
            return trial.suggest_float(self.key, self.low, self.high, log=True)
        if self.kind == "uniform":
            return trial.suggest_float(self.key, self.low, self.high)
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high))
        return trial.suggest_categorical(self.key, list(self.choices))

    def ends(self) -> list:
        """The values at the ends of the range (every choice), which the config must accept."""
        return list(self.choices) if self.kind == "choice" else [self.low, self.high]


def _number(text: str, whole: bool):
    value = config_lib.convert(config_lib.parse_value(text), int if whole else float)
    if value is None or (not whole and not math.isfinite(value)):
        raise ValueError(text)
    return value


def parse_param(text: str) -> Param:
    """`KEY=DIST` as a Param, or a one-line error naming the text and what is allowed."""
    key, sep, dist = text.partition("=")
    kind, _, rest = dist.partition(":")
    key = key.strip()
    if sep and key not in config_lib.field_docs():
        raise UserError(f"--param {text!r}: {key!r} is not a config key; allowed: the keys python -m tfdqn.train "
                        f"--help lists, such as learner.learning_rate")
    if not sep or kind not in KINDS or not rest:
        raise UserError(f"--param {text!r} is not KEY=DIST; allowed: {ALLOWED}")
    kinds = KINDS_BY_TYPE.get(config_lib.field_type(key), ("choice",))
    if kind not in kinds:
        raise UserError(f"--param {text!r}: {key} takes {config_lib.field_type(key).__name__} values; allowed: "
                        f"{', '.join(kinds)}")
    if kind == "choice":
        choices = tuple(part.strip() for part in rest.split(","))
        if "" in choices or len(set(choices)) < 2:
            raise UserError(f"--param {text!r} needs two or more different choices; allowed: choice:A,B,...")
        return Param(key, kind, choices=choices)
    bounds = rest.split(":")
    try:
        low, high = (_number(part, whole=kind == "int") for part in bounds) if len(bounds) == 2 else (None, None)
    except ValueError:
        low = high = None
    if low is None or not low < high or (kind == "loguniform" and low <= 0):
        allowed = {"loguniform": "0 < LOW < HIGH", "uniform": "LOW < HIGH", "int": "integers LOW < HIGH"}[kind]
        raise UserError(f"--param {text!r} has no valid range; allowed: {kind}:LOW:HIGH with {allowed}")
    return Param(key, kind, low, high)


def parse_params(texts: list[str]) -> list[Param]:
    params = [parse_param(text) for text in texts]
    keys = [param.key for param in params]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise UserError(f"--param {repeated[0]} is given twice; allowed: one distribution per config key")
    return params


def as_set(key: str, value) -> str:
    """`KEY=VALUE` for `--set`, the value written so that it reads back as itself."""
    return f"{key}={value!r}" if isinstance(value, float) else f"{key}={value}"
