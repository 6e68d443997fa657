"""The run folder and the checks made before anything is written into it (no TensorFlow needed), for the
command line and for the Python API (`prepare_run`, whose errors name its arguments, not the flags)."""

from __future__ import annotations

import datetime
import json
import os
import pathlib

from tfdqn import config as config_lib
from tfdqn.errors import UserError
from tfdqn.run.lock import refuse_if_held
from tfdqn.run.markers import complete_steps


def default_run_name(config: config_lib.DQNConfig) -> str:
    """The env, the seed and this second: `CartPole-s0-20261126-211645`."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{config.env.id.replace('/', '_')}-s{config.run.seed}-{stamp}"


def holds_files(folder: pathlib.Path) -> bool:
    """Whether `folder` is a used run folder: one that exists and is not empty (a new run never writes there)."""
    return folder.is_dir() and any(folder.iterdir())


def choose_run_dir(logdir: str, run_name: str | None, config: config_lib.DQNConfig) -> pathlib.Path:
    """A new run folder's path (not created yet): an existing non-empty one is refused so no checkpoint
    is overwritten (naming the process that writes it, if one does), and the nearest existing parent
    must be a writable folder."""
    if run_name is None:
        run_name = default_run_name(config)
    if not run_name or "/" in run_name or run_name in (".", ".."):
        raise UserError(f"--run-name {run_name!r} is not a folder name; allowed: a name without '/'")
    run_dir = pathlib.Path(logdir) / run_name
    if holds_files(run_dir):
        refuse_if_held(run_dir)
        raise UserError(f"run folder {run_dir} already exists and is not empty; allowed: a new --run-name")
    existing = run_dir.absolute()
    while not existing.exists():
        existing = existing.parent
    if not (existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)):
        raise UserError(f"--logdir {logdir!r} is not writable ({existing} is not a writable folder); "
                        f"allowed: a writable folder")
    return run_dir


def make_run_dir(run_dir: pathlib.Path) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"run folder {run_dir} cannot be made ({error.strerror}); allowed: a writable folder") from None


def load_run_config(run_dir: pathlib.Path, total_steps=None, resume: str = "--resume",
                    steps: str = "--total-steps") -> config_lib.DQNConfig:
    """A run folder's saved config, optionally extended to `total_steps` (a number or `--set`-style
    text such as 1e5); refused without a checkpoint. `resume` and `steps` name the caller's own arguments
    in its errors (the command line's flags, or the Python API's)."""
    if not (run_dir / "config.yaml").is_file():
        raise UserError(f"{resume} {str(run_dir)!r} is not a run folder (no config.yaml); allowed: a folder "
                        f"written by tfdqn.train")
    saved = complete_steps(run_dir / "checkpoints")
    if not saved:
        raise UserError(f"{resume} {str(run_dir)!r} holds no complete checkpoint; allowed: a run folder that "
                        f"saved at least one checkpoint")
    overrides = {"run.total_steps": total_steps} if total_steps is not None else {}
    config = config_lib.build_config([run_dir / "config.yaml"], overrides)
    # A run ends at the first vector step at or past total_steps, so a checkpoint may lie up to
    # one collect's steps - 1 past it; a smaller --total-steps would have ended the run before that checkpoint.
    least = saved[0] - config.steps_per_collect + 1
    if total_steps is not None and config.run.total_steps < least:
        raise UserError(f"{steps} {config.run.total_steps} is before the newest checkpoint (env step "
                        f"{saved[0]}); allowed with {resume}: {steps} >= {least}")
    return config


def finished_summary(run_dir: pathlib.Path, total_steps: int) -> dict | None:
    """The summary of a run that ended by itself (no `stopped_by`) at `total_steps` or at its target return,
    else None: resuming that run would only repeat its final evaluation and rewrite its files."""
    summary = read_summary(run_dir)
    done = summary is not None and "stopped_by" not in summary and (
        summary.get("env_steps", 0) >= total_steps or summary.get("reached_target", False))
    return summary if done else None


def read_summary(run_dir: pathlib.Path) -> dict | None:
    """The run's summary.json as written at its end or at a stop signal, or None where it has none."""
    try:
        summary = json.loads((pathlib.Path(run_dir) / "summary.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return summary if isinstance(summary, dict) else None


def _fresh_default(logdir: str, config: config_lib.DQNConfig) -> pathlib.Path:
    """The command line's default name (env, seed, start second), with -2, -3, ... where it is taken."""
    base = default_run_name(config)
    for name in [base, *(f"{base}-{n}" for n in range(2, 1000))]:
        if not holds_files(pathlib.Path(logdir) / name):
            return choose_run_dir(logdir, name, config)
    raise UserError(f"logdir {logdir!r} holds runs {base} to {base}-999; allowed: another logdir")


def prepare_run(config, run_dir, logdir: str, resume: bool) -> tuple[pathlib.Path, config_lib.DQNConfig, dict | None]:
    """`tfdqn.train`'s run: (run folder, config to train, the summary of a resumed run that already ended, else
    None)."""
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
