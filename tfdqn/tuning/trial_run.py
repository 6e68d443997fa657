"""One trial of a study: a real `python -m tfdqn.train` run in its own folder under the study's, whose
periodic evaluations are reported to Optuna as they land in its `evaluations.csv`, so the pruner can stop
it (a stop signal: the run saves a checkpoint and ends as a stopped run does).

The run is a child process that dies with its worker (Linux's parent-death signal, `parent_death`), so a worker
killed with SIGKILL leaves no run behind; its trial is then marked failed by the study's heartbeat.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import signal
import subprocess
import sys
import time

from tfdqn.tuning.parent_death import child_environment
from tfdqn.run import csv_log
from tfdqn.tuning.search_space import Param, as_set


class TrialRunFailed(Exception):
    """The trial's run exited with an error: the trial fails and the worker goes on to the next."""


@dataclasses.dataclass(frozen=True)
class Objective:
    """What a trial scores: the mean of its last `last_evaluations` evaluation means (maximised), or where
    `target` is set, the env steps to the first evaluation whose mean reaches it (minimised; inf if none)."""

    last_evaluations: int = 3
    target: float | None = None

    @property
    def direction(self) -> str:
        return "maximize" if self.target is None else "minimize"

    def intermediate(self, mean: float) -> float:
        """The value reported at an evaluation, better in the study's direction: the pruner stops the trials
        whose evaluations trail the median of the others' at the same env step."""
        return mean if self.target is None else -mean

    def value(self, rows: list[tuple[int, float]]) -> float:
        """The trial's score from its (env steps, evaluation mean) rows."""
        if self.target is not None:
            return next((float(steps) for steps, mean in rows if mean >= self.target), math.inf)
        last = [mean for _, mean in rows[-self.last_evaluations:]]
        return sum(last) / len(last) if last else -math.inf

    def describe(self) -> str:
        if self.target is None:
            return f"the mean of the last {self.last_evaluations} evaluations"
        return f"env steps to an evaluation mean >= {self.target:g}"


def read_evaluations(run_dir: pathlib.Path) -> list[tuple[int, float]]:
    """(env steps, mean) of every whole row of the run's evaluations.csv (a row being written is left)."""
    return [(row["env_steps"], row["return_mean"]) for row in csv_log.read_evaluations(run_dir)]


def _stop(child: subprocess.Popen) -> None:
    """Stop the run as Ctrl-C does (it saves a checkpoint) and wait for it."""
    if child.poll() is None:
        child.send_signal(signal.SIGINT)
        child.wait()


def _last_line(path: pathlib.Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines()
    return lines[-1] if lines else "(no output)"


@dataclasses.dataclass
class TrialRunner:
    """The study's objective function: `runner(trial)` runs the trial and returns its score."""

    train_arguments: list[str]   # what every trial's `tfdqn.train` gets (env, preset, config, --set, steps)
    trials_dir: pathlib.Path     # the study's folder: trial-NNNN/ and trial-NNNN.log
    params: list[Param]
    objective: Objective
    poll_seconds: float = 0.5

    def command(self, run_name: str, values: dict) -> list[str]:
        sets = [f"--set={as_set(key, value)}" for key, value in values.items()]
        return [sys.executable, "-m", "tfdqn.train", "--quiet", *self.train_arguments, *sets,
                "--logdir", str(self.trials_dir), "--run-name", run_name]

    def __call__(self, trial) -> float:
        import optuna

        values = {param.key: param.suggest(trial) for param in self.params}
        run_dir = self.trials_dir / f"trial-{trial.number:04d}"
        log = run_dir.with_suffix(".log")
        trial.set_user_attr("run_dir", str(run_dir))
        self.trials_dir.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as output:
            child = subprocess.Popen(self.command(run_dir.name, values), stdout=output, stderr=subprocess.STDOUT,
                                     env=child_environment())
        reported = 0
        try:
            while child.poll() is None:
                time.sleep(self.poll_seconds)
                reported = self._report(trial, run_dir, reported)
                if trial.should_prune():
                    _stop(child)
                    raise optuna.TrialPruned(f"trial {trial.number} pruned at its evaluation {reported}")
        finally:
            _stop(child)  # also where the worker itself is stopped (KeyboardInterrupt): the trial fails
        self._report(trial, run_dir, reported)
        if child.returncode != 0:
            error = f"its run exited with {child.returncode}: {_last_line(log)} (see {log})"
            trial.set_user_attr("error", error)
            raise TrialRunFailed(f"trial {trial.number}: {error}")
        return self.objective.value(read_evaluations(run_dir))

    def _report(self, trial, run_dir: pathlib.Path, reported: int) -> int:
        """Report the evaluations that landed since the last call; returns how many are reported now."""
        rows = read_evaluations(run_dir)
        for steps, mean in rows[reported:]:
            trial.report(self.objective.intermediate(mean), steps)
        return len(rows)
