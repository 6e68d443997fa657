"""A study in a database any worker can join (Optuna's RDB storage): SQLite in the study's folder by
default, or any URL Optuna takes (PostgreSQL through psycopg), and the loop each worker runs.

Workers share the study through the database alone: each asks it for a trial, runs it, and writes the
result back, until the study holds `trials` finished trials (complete or pruned). A worker's heartbeat
marks its running trial every few seconds; a trial whose worker was killed stops beating and is marked
failed by the next worker that looks, and failed trials do not count, so a restarted worker carries the
study on to `trials`.
"""

from __future__ import annotations

import pathlib
import time

from tfdqn.errors import UserError

HEARTBEAT_SECONDS = 5
GRACE_HEARTBEATS = 4  # a running trial that missed this many heartbeats is marked failed
SQLITE_LOCK_SECONDS = 60  # how long a worker waits for another's write to the SQLite file


def storage_url(storage: str | None, logdir: pathlib.Path, study: str) -> str:
    """The study's database URL: `sqlite:///<logdir>/<study>.db` by default; `postgresql://` URLs use psycopg
    (version 3), the driver the `tune` extra installs."""
    if storage is None:
        logdir.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{logdir / (study + '.db')}"
    if storage.startswith("postgresql://"):
        return "postgresql+psycopg://" + storage.removeprefix("postgresql://")
    return storage


def open_storage(url: str, heartbeat: float = HEARTBEAT_SECONDS):
    import optuna
    import sqlalchemy.exc

    engine = {"connect_args": {"timeout": SQLITE_LOCK_SECONDS}} if url.startswith("sqlite") else {}
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs=engine, heartbeat_interval=heartbeat,
                                          grace_period=GRACE_HEARTBEATS * heartbeat)
    except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as error:
        first = (str(error).strip().splitlines() or [error.__class__.__name__])[0]
        raise UserError(f"--storage {url!r} cannot be opened ({first}); allowed: a database URL Optuna takes, such "
                        f"as sqlite:///study.db or postgresql://user@host/db") from None


def startup_trials(trials: int) -> int:
    """Random trials before TPE models the space, and trials the pruner lets finish before it stops any:
    Optuna's 10 and 5 are most of a small study."""
    return min(10, max(3, trials // 4))


def quiet_optuna() -> None:
    """Optuna's own lines off (a failed trial's traceback, experimental-feature warnings): workers print one
    line per trial instead (`trial_line`)."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def trial_line(study, trial) -> None:
    """One line per finished trial: its state, score or error, and its values."""
    values = ", ".join(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}"
                       for key, value in trial.params.items())
    outcome = {"COMPLETE": f"score {trial.value:.6g}", "PRUNED": "pruned",
               "FAIL": f"failed: {trial.user_attrs.get('error', 'stopped')}"}.get(trial.state.name, trial.state.name)
    print(f"trial {trial.number} {outcome} ({values})", flush=True)


def open_study(name: str, url: str, direction: str, settings: dict, trials: int, pruner: str, total_steps: int,
               heartbeat: float = HEARTBEAT_SECONDS):
    """Create the study or join it; a study made with other settings (env, objective, search space) is
    refused in one line, so workers cannot mix two studies' trials. The pruner stops no trial in its first
    fifth of `total_steps`, where evaluations are mostly noise."""
    import optuna

    quiet_optuna()
    sampler = optuna.samplers.TPESampler(n_startup_trials=startup_trials(trials), constant_liar=True)
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=startup_trials(trials), n_warmup_steps=total_steps // 5)
              if pruner == "median" else optuna.pruners.NopPruner())
    study = optuna.create_study(study_name=name, storage=open_storage(url, heartbeat), direction=direction,
                                sampler=sampler, pruner=pruner, load_if_exists=True)
    saved = study.user_attrs.get("settings")
    if saved is None:
        study.set_user_attr("settings", settings)
    elif saved != settings:
        changed = next(key for key in settings if saved.get(key) != settings[key])
        raise UserError(f"--study {name!r} exists with {changed} {saved.get(changed)!r}, not {settings[changed]!r}; "
                        f"allowed: the study's own settings, or a new --study name")
    return study


def counts(study) -> dict[str, int]:
    """Trials by state name (COMPLETE, PRUNED, RUNNING, FAIL, ...)."""
    tally = {}
    for trial in study.get_trials(deepcopy=False):
        tally[trial.state.name] = tally.get(trial.state.name, 0) + 1
    return tally


def finished_trials(tally: dict[str, int]) -> int:
    """Trials that count towards a study's total (complete or pruned; failed ones do not), of `counts`."""
    return tally.get("COMPLETE", 0) + tally.get("PRUNED", 0)


def work(study, objective, trials: int, failures_allowed: int, poll_seconds: float = 2.0) -> None:
    """Run trials until the study holds `trials` finished ones; while the others' running trials would
    reach it, wait for them (or for their heartbeat to lapse). Stops with a one-line error once more than
    `failures_allowed` trials have failed: a run that always fails would otherwise be retried forever."""
    import optuna

    from tfdqn.tuning.trial_run import TrialRunFailed

    while True:
        optuna.storages.fail_stale_trials(study)
        tally = counts(study)
        done = finished_trials(tally)
        if tally.get("FAIL", 0) > failures_allowed:
            raise UserError(f"{tally['FAIL']} trials of study {study.study_name!r} failed (their logs are beside their "
                            f"run folders); allowed: at most {failures_allowed}")
        if done >= trials:
            return
        if done + tally.get("RUNNING", 0) >= trials:
            time.sleep(poll_seconds)
            continue
        study.optimize(objective, n_trials=1, catch=(TrialRunFailed,), callbacks=[trial_line])
