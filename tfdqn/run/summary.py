"""What a run reports when it ends: `summary.json`'s figures and the final evaluation."""

from __future__ import annotations

import time

import numpy as np

from tfdqn.run.evaluation import FINAL


def _round(value, digits: int):
    return None if value is None else round(float(value), digits)


def summarize(run, env_steps: int) -> dict:
    """Counts, throughput, where the loop thread's time went (`phase_shares`, adding up to 1), the
    learner's busy share (in whichever thread it ran), system load and the replay's size."""
    config = run.config.run
    wall = time.perf_counter() - run.started
    start_env_steps, start_updates = run.start_counts
    updates = run.agent.counters.read()[1]
    shares = run.timer.run_shares()
    learner_shares = [timer.run_shares() for timer in run.driver.timers]
    system = run.monitor.run_figures()
    return {
        "env_id": run.spec.env_id,
        "seed": config.seed,
        "env_steps": env_steps,
        "updates": updates,
        "training_interval": config.training_interval,
        "num_envs": run.collector.num_envs,
        "async_learner": config.async_learner,
        "actors": {"kind": run.config.actors.kind, **({"count": run.config.actors.count,
                                                        "envs_per_actor": run.config.actors.envs_per_actor,
                                                        "restarts": run.collector.restarts}
                                                       if run.config.actors.kind != "inline" else {})},
        "episodes": run.episodes.count,
        **({"resumed_from_env_steps": run.resumed_from} if run.resumed_from is not None else {}),
        "wall_seconds": round(wall, 3),
        "env_steps_per_sec": round((env_steps - start_env_steps) / wall, 2),
        "updates_per_sec": round((updates - start_updates) / wall, 2),
        "learner_busy_share": round(sum(s["share_update"] for s in [shares, *learner_shares]), 4),
        "phase_shares": {key.removeprefix("share_"): round(value, 4) for key, value in shares.items()},
        "cpu_util": _round(system["cpu_util"], 4),
        "rss_bytes_max": system["rss_bytes_max"],
        "gpu": run.monitor.gpu,
        **({"gpu_util": _round(system["gpu_util"], 4)} if "gpu_util" in system else {}),
        "replay_capacity": run.config.replay.capacity,
        "replay_device": run.config.replay.device,
        "replay_bytes": int(run.replay.nbytes),
    }


def final_evaluation(run, env_steps: int) -> dict:
    """The end-of-run evaluation's figures (empty if a stop signal cut it short), also logged."""
    returns = run.evaluator.evaluate(run.config.run.final_eval_episodes, env_steps, purpose=FINAL)
    if run.stop.requested:
        return {}
    run.writer.scalars(env_steps, {"charts/final_eval_return": np.mean(returns)})
    return {"final_eval_epsilon": run.config.exploration.eval_epsilon, "final_eval_episodes": len(returns),
            "final_eval_return_mean": float(np.mean(returns)), "final_eval_return_std": float(np.std(returns)),
            "final_eval_returns": returns}
