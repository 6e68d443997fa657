"""What a study leaves in its folder: a table of its best trials, the best trial's config as YAML that
`python -m tfdqn.train --config` takes, and Optuna's optimisation-history and parameter-importance plots."""

from __future__ import annotations

import math
import pathlib

from tfdqn.atomic import atomic_path, atomic_write

BEST_ROWS = 10


def _value(value: float | None) -> str:
    if value is None:
        return ""
    return "not reached" if math.isinf(value) else f"{value:.6g}"


def best_trials_table(study, objective_text: str) -> str:
    """The finished trials, best first (pruned ones after the complete ones), as Markdown."""
    import optuna

    finished = [t for t in study.get_trials(deepcopy=False)
                if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    sign = -1 if study.direction == optuna.study.StudyDirection.MAXIMIZE else 1
    finished.sort(key=lambda t: (t.state != optuna.trial.TrialState.COMPLETE, sign * t.value if t.value is not None
                                 else math.inf))
    keys = sorted({key for t in finished for key in t.params})
    lines = [f"Study {study.study_name!r}: {objective_text}, {study.direction.name.lower()}d; the {BEST_ROWS} best of "
             f"{len(finished)} finished trials.", "",
             "| trial | state | score | last evaluation mean | " + " | ".join(keys) + " | run folder |",
             "|---:|---|---:|---:|" + "---|" * len(keys) + "---|"]
    for t in finished[:BEST_ROWS]:
        # reports are evaluation means, negated where the study minimises (`trial_run.Objective.intermediate`)
        last = -sign * t.intermediate_values[max(t.intermediate_values)] if t.intermediate_values else None
        score = _value(t.value) if t.state == optuna.trial.TrialState.COMPLETE else ""
        params = " | ".join(f"{t.params[key]:.4g}" if isinstance(t.params.get(key), float) else str(t.params.get(key, ""))
                            for key in keys)
        lines.append(f"| {t.number} | {t.state.name.lower()} | {score} | {_value(last)} | {params} | "
                     f"{t.user_attrs.get('run_dir', '')} |")
    return "\n".join(lines) + "\n"


def write_results(study, folder: pathlib.Path, objective_text: str) -> tuple[str, list[pathlib.Path]]:
    """The table, the best config and the plots in `folder`; returns the table and the files written."""
    import optuna

    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "best-trials.md"]
    table = best_trials_table(study, objective_text)
    atomic_write(written[0], table)
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        return table, written
    best_config = pathlib.Path(study.best_trial.user_attrs["run_dir"]) / "config.yaml"
    if best_config.is_file():  # on this machine: a worker elsewhere keeps its runs on its own disk
        atomic_write(folder / "best-config.yaml", best_config.read_text())
        written.append(folder / "best-config.yaml")
    written += _plots(study, folder, len(complete))
    return table, written


def _plots(study, folder: pathlib.Path, complete: int) -> list[pathlib.Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna.visualization.matplotlib as plots
    from optuna.importance import PedAnovaImportanceEvaluator

    written = []
    figures = [("history.png", lambda: plots.plot_optimization_history(study))]
    if complete >= 2 and len(study.best_trial.params) >= 1:  # importance compares trials: PED-ANOVA needs no sklearn
        figures.append(("importance.png",
                        lambda: plots.plot_param_importances(study, evaluator=PedAnovaImportanceEvaluator())))
    for name, draw in figures:
        axes = draw()
        axes.figure.set_size_inches(7, 4.5)
        axes.figure.tight_layout()
        with atomic_path(folder / name, suffix=".tmp.png") as temporary:  # the suffix names the format
            axes.figure.savefig(temporary)
        plt.close(axes.figure)
        written.append(folder / name)
    return written
