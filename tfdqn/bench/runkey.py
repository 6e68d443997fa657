"""RunKey: a benchmark run named by the exact recipe it trains (a short hash of its resolved config) and its seed.

Every benchmark subcommand names its run folders and its record entries by this key, so a run is never read
back, resumed or recorded under another recipe's label: a changed `--set`, `--target`, `--total-steps`, preset
meaning or default is a new hash and a new folder. The seed is left out of the hash (it is the key's other
half); the config holds no output paths.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib

from tfdqn import config as config_lib
from tfdqn.errors import UserError

HASH_CHARS = 10  # 40 bits: a clash among a record's recipes is out of reach


# Keys added to the config since runs were first recorded, with the value that trains as before they existed: a
# key at that value is left out of the hash, so a recorded run keeps its hash when a release adds a key.
ADDED_KEYS = {"exploration.epsilon_delay_steps": 0, "network.conv_padding": "valid", "learner.target_update_phase": 0,
              "replay.memory_budget_gib": 0.0, "replay.prefetch": False, "env.kwargs": {},
              "env.action_mask": "auto", "env.mask_actions": True, "learner.munchausen": False,
              "learner.munchausen_tau": 0.03, "learner.munchausen_alpha": 0.9, "learner.munchausen_clip": -1.0,
              "learner.num_tau_samples": 64, "learner.num_tau_prime_samples": 64, "learner.num_quantile_samples": 32,
              "learner.quantile_embedding_dim": 64, "network.noise_refresh": "call", "run.confirm_episodes": 0,
              "env.max_episode_steps": 27_000,  # every recorded env has a time limit of its own or short games
              "actors.ray_placement_timeout": 300.0}
# Keys that change how a run stores or checks its data, never what it trains: the same seed gives the same run bit
# for bit (tests/test_atari.py holds replay.compression to it, tests/test_replay_audit.py replay.audit). Left out of
# every hash, so such runs share a record.
OUTSIDE_RECIPE = ("replay.compression", "replay.audit")


def recipe(config: config_lib.DQNConfig, without: tuple[str, ...] = ()) -> dict:
    """The resolved config as plain data, less the seed (and the keys `without`), the added keys at their
    former behaviour (`ADDED_KEYS`) and the keys `OUTSIDE_RECIPE`: what makes two runs the same experiment."""
    data = config_lib.to_dict(config)
    former = [key for key, value in ADDED_KEYS.items() if _value(data, key) == value]
    for key in ("run.seed", *without, *former, *OUTSIDE_RECIPE):
        section, name = key.split(".")
        del data[section][name]
    return data


def recipe_differences(ours: dict, theirs: dict, without: tuple[str, ...] = ()) -> list[str]:
    """`key theirs -> ours` for each key whose value differs between two recipes (`recipe()` dicts, or recorded
    runs' configs), less the seed and the keys `without`, as `recipe()` leaves them out; a key that one of them
    lacks counts at its former value (`ADDED_KEYS`)."""
    flat = [{f"{section}.{name}": value for section, fields in data.items() for name, value in fields.items()}
            for data in (ours, theirs)]
    keys = sorted((set(flat[0]) | set(flat[1])) - {*OUTSIDE_RECIPE, "run.seed", *without})
    values = [(key, *(side.get(key, ADDED_KEYS.get(key)) for side in flat)) for key in keys]
    return [f"{key} {theirs_value} -> {mine}" for key, mine, theirs_value in values if mine != theirs_value]


def _value(data: dict, key: str):
    section, name = key.split(".")
    return data[section][name]


def recipe_hash(config: config_lib.DQNConfig, without: tuple[str, ...] = ()) -> str:
    """The recipe's short hash: SHA-256 of its canonical JSON (sorted keys), as hex. `without=("env.id",)` gives
    the hash a suite of games shares."""
    text = json.dumps(recipe(config, without), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_CHARS]


@dataclasses.dataclass(frozen=True)
class RunKey:
    label: str  # what a reader sees first: the game and the preset
    config_hash: str
    seed: int

    @classmethod
    def of(cls, label: str, config: config_lib.DQNConfig) -> RunKey:
        return cls(label, recipe_hash(config), config.run.seed)

    @property
    def folder_name(self) -> str:
        return f"{self.label}-{self.config_hash}-seed{self.seed}"


def check_folder(run_dir: pathlib.Path, key: RunKey) -> None:
    """Refuse a run folder whose saved config is another recipe or seed than `key`'s, in one line naming both
    hashes: its checkpoints and summary must never be read or resumed as this recipe's."""
    saved = run_dir / "config.yaml"
    if not saved.is_file():
        return
    try:
        config = config_lib.build_config([saved], {})
    except UserError as error:
        raise UserError(f"run folder {run_dir} holds a config this tfdqn cannot read ({error}); allowed: move "
                        f"the folder away or use another --logdir") from None
    found = RunKey.of(key.label, config)
    if (found.config_hash, found.seed) != (key.config_hash, key.seed):
        raise UserError(f"run folder {run_dir} holds recipe {found.config_hash} seed {found.seed}, not recipe "
                        f"{key.config_hash} seed {key.seed}; allowed: move the folder away or use another --logdir")
