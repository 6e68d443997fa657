"""The training loop, read top to bottom: collect, add to the replay, advance the env-step counter, let
the driver update, run the due hooks, save when a checkpoint is due.

The loop knows neither where the envs run (the collector does) nor when updates run (the driver
does): a new mode is a new collector or driver, never a branch here. It is the one writer of the
env-step counter: collectors return the transitions they made and the loop counts them. `train`
continues a run from its newest complete checkpoint with `resume=True`, and a CartPole run stopped and
resumed repeats the uninterrupted run's episodes exactly.
"""

from __future__ import annotations

import pathlib
import time

from tfdqn.atomic import write_json
from tfdqn.config import DQNConfig
from tfdqn.errors import RunFailure
from tfdqn.run.build import Run, build_run
from tfdqn.run.cadence import no_update_reason
from tfdqn.run.collectors import CollectionStopped, CollectorFailure
from tfdqn.run.provenance import provenance
from tfdqn.run.summary import final_evaluation_plan, finish, summarize


def _run_due_hooks(run: Run, before: int, env_steps: int, final: bool) -> None:
    """Each due hook, timed as its phase; the learner settles first for a hook that reads the weights."""
    t = time.perf_counter()
    for hook in run.hooks:
        if hook.due(before, env_steps, final):
            if hook.reads_weights:
                run.driver.settle()
            hook(env_steps)
            t = run.timer.add(hook.phase, t)


def _save(run: Run, env_steps: int, unless_saved: bool = False) -> None:
    t = time.perf_counter()
    run.driver.settle()  # a checkpoint holds weights no update is writing
    run.checkpoint.save_unless_saved(env_steps) if unless_saved else run.checkpoint.save(env_steps)
    run.timer.add("checkpoint", t)


def run_loop(run: Run) -> int:
    """Train until `run.total_steps` env steps, an evaluation that reaches `run.target_return` (or that the
    caller's `on_evaluation` ends the run on), or a stop signal; returns the env step reached."""
    total_steps = run.config.run.total_steps
    env_steps = run.start_counts[0]
    while env_steps < total_steps and not run.stop.requested and not run.ended_by_evaluation():
        before = env_steps
        try:
            transitions = run.collector.collect()
        except CollectionStopped:
            break
        except CollectorFailure as failure:
            raise RunFailure(f"{failure}; last checkpoint: {run.checkpoint.kept()}") from failure.__cause__
        t = time.perf_counter()
        with run.replay_lock:
            run.replay.add(transitions.frame, transitions.action, transitions.reward, transitions.terminated,
                           transitions.truncated, transitions.final_frame, transitions.streams)
        env_steps = int(run.agent.counters.env_steps.assign_add(len(transitions.action)).numpy())
        run.episodes.record(env_steps, transitions.games)
        run.timer.add("replay_add", t)
        run.driver.after_collect()
        run.agent.sync_acting_copy()  # act_device cpu: the actor's CPU copy takes the round's updates
        final = env_steps >= total_steps
        _run_due_hooks(run, before, env_steps, final)
        if run.checkpoint.due(before, env_steps, final or run.ended_by_evaluation()):
            _save(run, env_steps)
    if run.stop.requested:
        _save(run, env_steps, unless_saved=True)
    run.driver.settle()
    return env_steps


def _end_training(run: Run, summary: dict) -> None:
    """Tell the hooks training ended, at the rate summary.json records, and what follows: the progress bar
    closes there and says that the final evaluation is playing (for minutes on Atari), if the run goes on
    to one."""
    evaluates = not run.stop.requested and summary["updates"] > 0
    plan = final_evaluation_plan(run, summary["env_steps"]) if evaluates else None
    for hook in run.hooks:
        hook.end_training(summary["env_steps"], summary["env_steps_per_sec"], plan)


def train(config: DQNConfig, run_dir: pathlib.Path, quiet: bool = False,
          profile_steps: tuple[int, int] | None = None, resume: bool = False, started: float | None = None,
          on_evaluation=None) -> dict:
    """Train to `config.run.total_steps` env steps or the target return; returns the summary also written
    to summary.json, with the version and commit of the code this process trains with (`code`).

    On SIGINT or SIGTERM it checkpoints and returns early with `stopped_by` set in the summary. A run
    that ends by itself evaluates and exports its product, the best-evaluated network where periodic
    evaluation ran (`summary.finish`); one that made no update has none, and its summary's `no_product`
    says why. The summary is written while the run still holds its folder's lock.
    `started`: Unix seconds the run clock counts from (`build_run`); `on_evaluation`: called with each
    periodic evaluation's record, True ends the run (the summary's `ended_by_callback`)."""
    code = provenance()  # the code this process imported, before a commit made while it trains
    with build_run(config, run_dir, resume, quiet, profile_steps, started, on_evaluation) as run, run.stop:
        env_steps = run_loop(run)
        summary = {**summarize(run, env_steps), "code": code}
        _end_training(run, summary)
        if not run.stop.requested and summary["updates"] == 0:
            summary["no_product"] = f"no update ran ({no_update_reason(config.run) or 'the run ended first'})"
        elif not run.stop.requested:
            summary.update(finish(run, env_steps))
        if run.stop.requested:  # before or during the final evaluation
            summary["stopped_by"] = run.stop.signal_name
        summary["evaluation_seeds"] = run.evaluator.seeds.entries  # which games each evaluation played
        write_json(pathlib.Path(run_dir) / "summary.json", summary)
    return summary
