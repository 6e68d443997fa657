"""The env seeds of a run's evaluations, each evaluation's disjoint from those of every evaluation before it.

An evaluation's base seed is derived from the run's seed, its purpose and the env step it runs at; env i of its
vector env resets with `env_seed(base, i)`. Hashing makes a clash between two evaluations unlikely, not impossible,
so the ledger checks: where a new evaluation would reuse a seed, it derives again with an attempt count. A
confirmation or the final evaluation therefore meets games that selected nothing. The final evaluation's two plays
(the last network, then the product) share one entry, so both meet the same games.

With a path, the ledger is kept there (`evaluation_seeds.json`), cut back to the checkpoint on resume as the CSV
logs are, and summary.json lists it: which seeds each evaluation used.
"""

from __future__ import annotations

import json
import pathlib

from tfdqn.atomic import write_json
from tfdqn.envs.seeds import derive_seed, env_seeds

PERIODIC, FINAL, CONFIRMATION = 1, 2, 3  # an evaluation's purpose: the seed streams stay apart
PURPOSES = {PERIODIC: "periodic", FINAL: "final", CONFIRMATION: "confirmation"}
FILE = "evaluation_seeds.json"


def evaluation_seed(seed: int, purpose: int, env_steps: int, attempt: int = 0) -> int:
    """A 31-bit base seed (env 0 of a vector evaluation is reset with it, and ale-py's vector env takes a
    non-negative C int); `attempt` > 0 derives another where the first would reuse a seed."""
    return derive_seed(seed, purpose, env_steps, *([attempt] if attempt else []), bits=31)


class EvaluationSeeds:
    """The ledger of one run's evaluation seeds: `entries`, in the order the evaluations ran, each
    {"purpose", "env_steps", "seeds"} (the seeds env 0, 1, ... reset with)."""

    def __init__(self, run_seed: int, path: pathlib.Path | None = None, resume_from: int | None = None):
        self._run_seed, self._path = run_seed, path
        kept = json.loads(path.read_text()) if path is not None and resume_from is not None and path.exists() else []
        self.entries = [entry for entry in kept if entry["env_steps"] <= resume_from]
        self._used = {seed for entry in self.entries for seed in entry["seeds"]}
        self._save()

    def base_seed(self, purpose: int, env_steps: int, num_envs: int) -> int:
        """The base seed of the evaluation of `purpose` at `env_steps` on `num_envs` envs: the one it already has,
        else a new one whose envs' seeds no earlier evaluation used."""
        name = PURPOSES[purpose]
        for entry in self.entries:
            if (entry["purpose"], entry["env_steps"], len(entry["seeds"])) == (name, env_steps, num_envs):
                return entry["seeds"][0]
        attempt = 0
        while True:
            base = evaluation_seed(self._run_seed, purpose, env_steps, attempt)
            seeds = env_seeds(base, num_envs)
            if len(set(seeds)) == num_envs and self._used.isdisjoint(seeds):
                break
            attempt += 1
        self.entries.append({"purpose": name, "env_steps": env_steps, "seeds": seeds})
        self._used.update(seeds)
        self._save()
        return base

    def _save(self) -> None:
        if self._path is not None:
            write_json(self._path, self.entries)
