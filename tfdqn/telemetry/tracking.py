"""Weights & Biases tracking (`tracking.wandb`, `--track`): the resolved config, and every scalar the run
writes to TensorBoard under the same tag, against `env_steps` as TensorBoard plots them.

Scalars are logged with `env_steps` as their step metric rather than as W&B's own step, which must only
grow: a resumed run repeats the env steps after its checkpoint, and W&B would drop those rows. A run
folder keeps one W&B run id, so a resumed run goes on in the same W&B run.
"""

from __future__ import annotations

import hashlib
import pathlib
import re

from tfdqn import config as config_lib

STEP_METRIC = "env_steps"


def wandb_run_id(run_dir: pathlib.Path) -> str:
    """The run folder's name (W&B ids allow letters, digits, '-' and '_') and a hash of its full path."""
    path = str(pathlib.Path(run_dir).resolve())
    name = re.sub(r"[^A-Za-z0-9_-]", "-", pathlib.Path(path).name)[:48]
    return f"{name}-{hashlib.sha1(path.encode()).hexdigest()[:8]}"


class WandbRun:
    """One W&B run per run folder, written under `<run>/wandb`; `scalars` takes what `Logger.scalars` takes."""

    def __init__(self, config: config_lib.DQNConfig, run_dir: pathlib.Path):
        import wandb

        self._run = wandb.init(project=config.tracking.wandb_project, name=pathlib.Path(run_dir).name,
                               id=wandb_run_id(run_dir), resume="allow", dir=str(run_dir),
                               config=config_lib.to_dict(config),
                               settings=wandb.Settings(silent=True, console="off"))
        self._run.define_metric(STEP_METRIC)
        self._run.define_metric("*", step_metric=STEP_METRIC)

    def scalars(self, step: int, values: dict) -> None:
        row = {tag: float(value) for tag, value in values.items() if value is not None}
        if row:
            self._run.log({**row, STEP_METRIC: step})

    def close(self) -> None:
        self._run.finish()


def make_tracker(config: config_lib.DQNConfig, run_dir: pathlib.Path) -> WandbRun | None:
    """The run's tracker, where `tracking.wandb` asks for one."""
    return WandbRun(config, run_dir) if config.tracking.wandb else None
