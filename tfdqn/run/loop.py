"""The training loop, read top to bottom: collect, add to the replay, let the driver update, run hooks.

The loop knows neither where the envs run (the collector does) nor when updates run (the driver
does): a new mode is a new collector or driver, never a branch here. `train` continues a run from
its newest complete checkpoint with `resume=True`, and a CartPole run stopped and resumed repeats the
uninterrupted run's episodes exactly.
"""

from __future__ import annotations

import pathlib
import time

from tfdqn.atomic import write_json
from tfdqn.config import DQNConfig
from tfdqn.errors import RunFailure
from tfdqn.policy import default_policy_dir, export_policy
from tfdqn.run.build import Run, build_run
from tfdqn.run.collectors import CollectionStopped, CollectorFailure
from tfdqn.run.summary import final_evaluation, summarize


def run_loop(run: Run) -> int:
    """Train until `run.total_steps` env steps or a stop signal; returns the env step reached."""
    total_steps = run.config.run.total_steps
    env_steps = run.start_counts[0]
    while env_steps < total_steps and not run.stop.requested:
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
        env_steps = int(run.agent.counters.env_steps.assign_add(len(transitions.action)).numpy())  # its one writer
        run.episodes.record(env_steps, transitions.games)
        run.timer.add("replay_add", t)
        run.driver.after_collect()
        t = time.perf_counter()
        for hook in run.hooks:
            if hook.due(before, env_steps, final=env_steps >= total_steps):
                hook(env_steps)
                t = run.timer.add(hook.phase, t)
    if run.stop.requested:
        run.checkpoint.save_unless_saved(env_steps)
    run.driver.settle()
    return env_steps


def train(config: DQNConfig, run_dir: pathlib.Path, quiet: bool = False,
          profile_steps: tuple[int, int] | None = None, resume: bool = False) -> dict:
    """Train to `config.run.total_steps` env steps; returns the summary also written to summary.json.

    On SIGINT or SIGTERM it checkpoints and returns early with `stopped_by` set in the summary. The
    summary is written while the run still holds its folder's lock."""
    with build_run(config, run_dir, resume, quiet, profile_steps) as run, run.stop:
        env_steps = run_loop(run)
        summary = summarize(run, env_steps)
        if not run.stop.requested:
            summary.update(final_evaluation(run, env_steps))
        if run.stop.requested:  # before or during the final evaluation
            summary["stopped_by"] = run.stop.signal_name
        else:  # the finished run's policy, for use without tfdqn (tfdqn/policy.py)
            summary.update(export_policy(run.agent.online, config, run.spec, default_policy_dir(run_dir, "latest"),
                                         run_dir, "latest", env_steps))
        write_json(pathlib.Path(run_dir) / "summary.json", summary)
    return summary
