"""The Python API's run folders: a fresh default name, a clear refusal of a used folder, and what a resume
continues. Its errors name the Python arguments, not the command line's flags."""

from __future__ import annotations

import pathlib

from tfdqn import config as config_lib
from tfdqn.errors import UserError
from tfdqn.run.run_dir import (choose_run_dir, default_run_name, finished_summary, holds_files, load_run_config,
                               refuse_if_held)


def _fresh_default(logdir: str, config: config_lib.DQNConfig) -> pathlib.Path:
    """The command line's default name (env, seed, start second), with -2, -3, ... where it is taken."""
    base = default_run_name(config)
    for name in [base, *(f"{base}-{n}" for n in range(2, 1000))]:
        if not holds_files(pathlib.Path(logdir) / name):
            return choose_run_dir(logdir, name, config)
    raise UserError(f"logdir {logdir!r} holds runs {base} to {base}-999; allowed: another logdir")


def prepare_run(config, run_dir, logdir: str, resume: bool) -> tuple[pathlib.Path, config_lib.DQNConfig, dict | None]:
    """(run folder, config to train, the summary of a resumed run that already ended, else None)."""
    if resume:
        return _resumed(config, run_dir)
    if config is None:
        raise UserError("config = None; allowed: a DQNConfig (DQNConfig.for_env(...)), or resume=True with a run_dir")
    if run_dir is None:
        return _fresh_default(logdir, config), config, None
    run_dir = pathlib.Path(run_dir)
    if holds_files(run_dir):
        refuse_if_held(run_dir)
        raise UserError(f"run_dir {str(run_dir)!r} already exists and is not empty; allowed: another run_dir, "
                        f"run_dir=None for a fresh one, or resume=True to continue its run")
    return choose_run_dir(str(run_dir.parent), run_dir.name, config), config, None


def _resumed(config, run_dir) -> tuple[pathlib.Path, config_lib.DQNConfig, dict | None]:
    if run_dir is None:
        raise UserError("resume=True with run_dir = None; allowed: the run folder to continue")
    run_dir = pathlib.Path(run_dir)
    total_steps = None if config is None else config.run.total_steps
    saved = load_run_config(run_dir, total_steps, resume="resume=True with run_dir", steps="config.run.total_steps")
    if config is not None and config != saved:
        ours, theirs = config_lib.to_dict(config), config_lib.to_dict(saved)
        keys = [f"{section}.{name}" for section in ours for name in ours[section]
                if ours[section][name] != theirs[section][name]]
        raise UserError(f"resume=True: config differs from the run's own in {', '.join(keys)}; allowed: the run's "
                        f"config (config=None takes it), with only run.total_steps changed")
    finished = finished_summary(run_dir, saved.run.total_steps)
    if finished is None:
        refuse_if_held(run_dir)
    return run_dir, saved, finished
