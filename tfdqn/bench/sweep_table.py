"""A sweep's trials side by side: every recipe of one game in a time-to-score record, so a reader sees what each
trial changed against the first, how fast it ran, how its evaluations rose by agent step, and where it ended.

A trial is a recipe (its config hash); trials are numbered in the order their first run entered the record, and
each later trial lists the config keys it sets otherwise than trial 1 (`runkey.recipe_differences`).
"""

from __future__ import annotations

from tfdqn.bench.runkey import recipe_differences

MARKS = (100_000, 250_000, 500_000, 1_000_000, 2_000_000, 5_000_000)  # agent steps the curve is read at


def steps(count: int) -> str:
    """400, 250k, 266k, 1M, 1.23M: an agent-step count as a table cell, to three significant figures."""
    if count < 1000:
        return str(count)
    return f"{count / 1e6:.3g}M" if count >= 999_500 else f"{count / 1e3:.3g}k"  # 999,500 rounds to 1M, not 1e+03k


def curve_by_marks(curve: list[dict]) -> str:
    """The evaluation mean at each mark the run passed (its newest evaluation there), then its last one."""
    cells = []
    for mark in MARKS:
        reached = [point for point in curve if point["env_steps"] <= mark]
        if reached and curve[-1]["env_steps"] >= mark:
            cells.append(f"{reached[-1]['return_mean']:.1f} at {steps(mark)}")
    if curve and curve[-1]["env_steps"] not in MARKS:
        cells.append(f"{curve[-1]['return_mean']:.1f} at {steps(curve[-1]['env_steps'])} (last)")
    return ", ".join(cells) or "no evaluation"


def settings(run: dict, first: dict, first_command: str | None) -> str:
    if run["config_hash"] == first["config_hash"]:
        return f"`{first_command}`" if first_command else f"preset {run.get('preset') or 'none'}"
    return "; ".join(recipe_differences(run["config"], first["config"])).replace("|", "\\|") + undefined(run)


def undefined(run: dict) -> str:
    """A note on a trial whose recipe the config now refuses as undefined: Munchausen's target on n-step returns
    (one log-policy term where an n-step return has one per step; refused since issue 69)."""
    learner = run["config"]["learner"]
    if learner.get("munchausen") and learner.get("n_step", 1) > 1:
        return (f" (with n-step {learner['n_step']}: Munchausen's term for the first action only, an operator no "
                "source defines, refused since issue 69)")
    return ""


def sweep_table(runs: list[dict], reports: dict) -> str:
    """The Markdown table of `runs` (one game's time-to-score runs), one row per run, grouped by trial."""
    ordered = sorted(runs, key=lambda run: run["recorded_at"])
    trials = list(dict.fromkeys(run["config_hash"] for run in ordered))
    first = ordered[0]
    command = reports.get(first["config_hash"], {}).get("command")
    lines = ["| trial | recipe | seed | settings (against trial 1) | agent steps/s | evaluation mean by agent steps | "
             "best | target reached | ended at |", "|---:|---|---:|---|---:|---|---|---|---|"]
    for run in sorted(ordered, key=lambda run: (trials.index(run["config_hash"]), run["seed"])):
        curve = run["curve"]
        best = max(curve, key=lambda point: point["return_mean"], default=None)
        best_cell = (f"{best['return_mean']:.1f} at {steps(best['env_steps'])}, {best['wall_seconds'] / 60:.0f} min"
                     if best else "-")
        reached = (f"{run['target']:g} at {steps(run['solve_env_steps'])}, {run['solve_wall_seconds'] / 60:.1f} min"
                   if run["solved"] else f"{run['target']:g}: no")
        lines.append(f"| T{trials.index(run['config_hash']) + 1} | {run['config_hash']} | {run['seed']} | "
                     f"{settings(run, first, command)} | {run['env_steps_per_sec']:.0f} | {curve_by_marks(curve)} | "
                     f"{best_cell} | {reached} | {steps(run['env_steps'])}, {run['run_seconds'] / 60:.0f} min"
                     f"{', stopped' if run.get('stopped_by') else ''} |")
    return "\n".join(lines) + "\n"
