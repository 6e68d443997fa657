"""What a run reports when it ends: `summary.json`'s figures, its product network, the final evaluation."""

from __future__ import annotations

import time

import numpy as np

from tfdqn.policy.locate import PRODUCT_DIR
from tfdqn.policy.saved_model import export_policy
from tfdqn.run.checkpoint import restore_online
from tfdqn.run.evaluation_seeds import FINAL
from tfdqn.run.markers import read_best


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
                                                        "restarts": run.collector.restarts,
                                                        "lost_chunks": run.collector.lost_chunks,
                                                        "per_actor": run.collector.report()}
                                                       if run.config.actors.kind != "inline" else {})},
        "episodes": run.episodes.count,
        **({"resumed_from_env_steps": run.resumed_from} if run.resumed_from is not None else {}),
        "wall_seconds": round(wall, 3),
        "run_seconds": round(run.clock.seconds(), 3),
        **({"target_return": run.config.run.target_return, "reached_target": run.reached_target()}
           if run.config.run.target_return != float("inf") else {}),
        **({"ended_by_callback": True} if run.evaluation.ended_by_callback else {}),
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
        "replay_compression": run.replay.compression,
        "replay_slots_filled": run.replay.filled,
        "replay_memory_bytes": int(run.replay.memory_bytes()),  # with the compressed frames it holds
        **({"replay_memory_budget": run.replay.memory_budget, "replay_slots_held": run.replay.held,
            "replay_fewest_held": run.replay.fewest_held} if run.replay.compression != "none" else {}),
        # with replay.audit: sampled transitions it checked in this process, every one found as written
        **({"replay_audit_checked": run.replay.audit.checked} if run.replay.audit is not None else {}),
    }


def _final_evaluation(run, env_steps: int) -> dict | None:
    """The end-of-run evaluation of the network the actor acts with; None if a stop signal cut it short.
    Every call at one step plays the same games, so two networks are compared on equal terms."""
    returns = run.evaluator.evaluate(run.config.run.final_eval_episodes, env_steps, purpose=FINAL)
    if returns is None:
        return None
    return {"final_eval_epsilon": run.config.exploration.eval_epsilon, "final_eval_episodes": len(returns),
            "final_eval_return_mean": float(np.mean(returns)), "final_eval_return_std": float(np.std(returns)),
            "final_eval_returns": returns}


def _earlier_best(run, env_steps: int) -> tuple[dict | None, bool]:
    """The record of the best-evaluated network where it is not the last one (None otherwise), and whether
    periodic evaluation kept a best network at all: what `finish` plays after the last network."""
    best = read_best(run.run_dir / "checkpoints")
    return (best if best is not None and best["env_steps"] != env_steps else None), best is not None


def final_evaluation_plan(run, env_steps: int) -> str:
    """The line that says what `finish` plays, shown while it plays (for minutes on Atari)."""
    episodes = run.config.run.final_eval_episodes
    earlier, kept = _earlier_best(run, env_steps)
    line = f"final evaluation under way: {episodes} episodes of the last network (env step {env_steps})"
    if earlier is not None:
        return f"{line}, then {episodes} of the best-evaluated one (env step {earlier['env_steps']})"
    return f"{line}, the best-evaluated one" if kept else line


def _load_best(run, env_steps: int) -> dict | None:
    """Load the best-evaluated network into the online network, unless the last one is it; its record or None."""
    best, _ = _earlier_best(run, env_steps)
    if best is not None:
        restore_online(run.run_dir / "checkpoints", run.agent.online, "best")
        run.agent.sync_acting_copy(force=True)
    return best


def finish(run, env_steps: int) -> dict:
    """The run's product and its figures: the best-evaluated network where periodic evaluation kept one
    (the last step's network was a candidate too), else the last network. Both are played on the final
    evaluation's games, which no selection has seen, so the product's figure is not biased by picking it;
    the product is what `policy/` exports and what the summary's `final_eval_*` describe. Empty if a stop
    signal cut the evaluation short."""
    last = _final_evaluation(run, env_steps)
    if last is None:
        return {}
    figures = {"last_network_eval_return_mean": last["final_eval_return_mean"]}
    best = _load_best(run, env_steps)
    product = _final_evaluation(run, env_steps) if best is not None else last
    if product is None:
        return {}
    run.writer.scalars(env_steps, {"charts/final_eval_return": product["final_eval_return_mean"],
                                   "charts/final_eval_return_last_network": last["final_eval_return_mean"]})
    source = ({"source": "best", "env_steps": best["env_steps"], "selection_return_mean": best["return_mean"]}
              if best is not None else {"source": "last", "env_steps": env_steps})
    export = export_policy(run.agent.online, run.config, run.spec, run.run_dir / PRODUCT_DIR,
                           run.run_dir, "best" if best is not None else "latest", source["env_steps"])
    return {**product, **figures, "final_network": source, **export}
