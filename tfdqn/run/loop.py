"""The training loop: wires env, actor, replay and learner, times each phase, logs per interval.

`train` runs a fresh run or continues one from its newest complete checkpoint (`resume=True`): the
networks, optimizer, counters, RNGs, replay and (where the env pickles) the env mid-episode are all
restored, so a CartPole run stopped and resumed repeats the uninterrupted run's episodes exactly.
"""

from __future__ import annotations

import collections
import json
import pathlib
import pickle
import threading
import time

import numpy as np
import tensorflow as tf
import tqdm

from tfdqn import config as config_lib
from tfdqn.agent.agent import make_agent
from tfdqn.run.drivers import AsyncLearner, RatioGate
from tfdqn.run.checkpoint import Checkpointer
from tfdqn.config import DQNConfig
from tfdqn.replay.device import DeviceReplay
from tfdqn.envs.make import make_env
from tfdqn.errors import RunFailure
from tfdqn.run.evaluation import run_episodes
from tfdqn.telemetry.tensorboard import Logger
from tfdqn.replay.ring import ReplayRing
from tfdqn.telemetry.system_monitor import SystemMonitor
from tfdqn.run.cadence import updates_due
from tfdqn.run.signals import StopRequest
from tfdqn.replay.frame_stack import FrameStack
from tfdqn.telemetry.phase_timer import PhaseTimer
from tfdqn.envs.vector import make_vector_env

EVAL_SEED_OFFSET = 100_000  # evaluation envs draw from their own seed stream
MAX_FUSED_UPDATES = 64  # updates per fused call: bounds the k-batch copy when many updates fall due at once


def write_json(path: pathlib.Path, data: dict) -> None:
    """Write to a temporary name, then rename: readers never see half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


class _EpisodeLog:
    """Whole-game raw returns: one `episodes.csv` row each, means since the last summary, and a
    recent window for the progress bar. On resume, rows after the checkpoint are dropped."""

    def __init__(self, path: pathlib.Path, resume_from: int | None = None):
        rows = path.read_text().splitlines()[1:] if resume_from is not None and path.exists() else []
        rows = [row for row in rows if int(row.split(",")[0]) <= resume_from] if rows else []
        path.write_text("".join(f"{line}\n" for line in ["env_steps,return,length", *rows]))
        self._file = path.open("a", buffering=1)
        self.returns, self.lengths = [], []
        self.recent = collections.deque((float(row.split(",")[1]) for row in rows[-20:]), maxlen=20)
        self.count = len(rows)

    def record(self, env_steps: int, games: list) -> None:
        """`games`: (env index, raw return, length) of the whole games that ended at `env_steps`."""
        for _, episode_return, length in games:
            self._file.write(f"{env_steps},{episode_return:g},{length}\n")
            self.returns.append(episode_return)
            self.lengths.append(length)
            self.recent.append(episode_return)
            self.count += 1

    def drain(self) -> dict:
        values = {"charts/episode_return": np.mean(self.returns) if self.returns else None,
                  "charts/episode_length": np.mean(self.lengths) if self.lengths else None}
        self.returns, self.lengths = [], []
        return values

    def close(self) -> None:
        self._file.close()


class _Profiler:
    """Records a TensorFlow profiler trace of env steps [first, last) into the run folder."""

    def __init__(self, steps: tuple[int, int] | None, logdir: pathlib.Path):
        self._first, self._last = steps or (None, None)
        self._logdir = str(logdir)
        self._active = False

    def at(self, env_steps: int) -> None:
        if self._first is not None and not self._active and self._first <= env_steps < self._last:
            tf.profiler.experimental.start(self._logdir)
            self._active = True
            self._first = None
        elif self._active and env_steps >= self._last:
            self.stop()

    def stop(self) -> None:
        if self._active:
            tf.profiler.experimental.stop()
            self._active = False


def _perf_summary(shares: dict, env_steps: int, updates: int, system: dict) -> dict:
    wall = shares["wall_seconds"]
    return {"perf/env_steps_per_sec": env_steps / wall, "perf/updates_per_sec": updates / wall,
            "perf/learner_busy_share": shares["share_update"],
            **{f"perf/{k}": v for k, v in shares.items() if k.startswith("share_")}, **system}


def _pickles_faithfully(env, is_atari: bool) -> bool:
    """Whether checkpoints can hold this kind of env mid-episode (pure-Python envs can). ALE's
    emulator does not pickle with its RNG, so Atari runs start a new game on resume instead.
    Asked once per run: the answer depends on the env's type and wrappers, not on its state."""
    if is_atari:
        return False
    try:
        pickle.dumps(env)
    except (pickle.PicklingError, TypeError, AttributeError):
        return False
    return True


def _crossed(before: int, after: int, every: int) -> bool:
    """Whether a multiple of `every` (0: never) lies in (before, after]: cadences hold for any number of envs."""
    return every > 0 and after // every > before // every


def _kept(last_checkpoint: int | None) -> str:
    return f"env step {last_checkpoint}" if last_checkpoint else "none"


def _check_finite(agent, last_checkpoint: int | None) -> None:
    """Stop with the env step where the TD loss first became NaN or Inf; never checkpoint past it."""
    bad_update = int(agent.learner.first_nonfinite_update.numpy())
    if bad_update:
        step = int(agent.learner.first_nonfinite_env_step.numpy())
        kept = f"the last good checkpoint (env step {last_checkpoint}) is kept" if last_checkpoint else "no checkpoint"
        raise RunFailure(f"the TD loss became NaN or Inf at update {bad_update} (env step {step}); "
                         f"{kept}; check the rewards or lower learner.learning_rate")


def train(config: DQNConfig, run_dir: pathlib.Path, quiet: bool = False,
          profile_steps: tuple[int, int] | None = None, resume: bool = False) -> dict:
    """Train to `config.run.total_steps` env steps; returns the summary also written to summary.json.

    On SIGINT or SIGTERM it checkpoints and returns early with `stopped_by` set in the summary."""
    run = config.run
    run_dir = pathlib.Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config_lib.save(config, run_dir / "config.yaml")

    vector, spec = make_vector_env(config.env, run.num_envs, seed=run.seed)
    num_envs = vector.num_envs
    on_device = config.replay.device == "accelerator"
    replay = (DeviceReplay if on_device else ReplayRing)(config.replay.capacity, spec.frame_shape, spec.frame_dtype,
                                                         spec.stack_size, num_streams=num_envs, seed=run.seed)
    print(f"replay: {config.replay.capacity:,} transitions, {replay.nbytes / 2**30:.2f} GiB "
          f"({replay.nbytes:,} bytes, {replay.nbytes / config.replay.capacity:.0f} per transition)", flush=True)
    agent = make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions)
    checkpointer = Checkpointer(run_dir / "checkpoints", agent, replay)
    eval_env = None
    stack = FrameStack(num_envs, spec.stack_size, spec.frame_shape, spec.frame_dtype)
    start_step, updates_done, last_checkpoint = 0, 0, None
    if resume:
        start_step, state = checkpointer.restore_latest()
        updates_done, last_checkpoint, stack = state["updates_done"], start_step, state["stack"]
        frames, vector = state["frames"], state["env"] or vector
        eval_env = state["eval_env"]
        if state["env"] is None:  # envs that do not pickle start new games from a seed of their own,
            replay.cut_episodes(frames)  # and their unfinished episodes end as truncations
            frames = vector.reset(seed=run.seed + start_step)
            stack.reset_all(frames)
        print(f"resumed from env step {start_step} ({updates_done} updates)", flush=True)
    else:
        frames = vector.reset(seed=run.seed)
        stack.reset_all(frames)

    logger = Logger(run_dir)
    if not resume:
        logger.hyperparameters(config_lib.to_dict(config))
    sampler = SystemMonitor(period=0.5).start()
    profiler = _Profiler(profile_steps, run_dir / "profile")
    episodes = _EpisodeLog(run_dir / "episodes.csv", resume_from=start_step if resume else None)
    timer = PhaseTimer()
    metrics, stopped_by, checkpoint_cost = {}, None, None
    window = {"env_steps": 0, "updates": 0}
    system_means = collections.defaultdict(list)
    bar = tqdm.tqdm(total=run.total_steps, initial=start_step, disable=quiet, unit="step", dynamic_ncols=True)
    started = time.perf_counter()

    envs_pickle = _pickles_faithfully(vector, spec.is_atari)
    batch_size = config.replay.batch_size
    update_from_replay = agent.learner.make_replay_update(lambda: replay.sample_in_graph(batch_size)) \
        if on_device else None
    replay_lock = threading.Lock()  # async mode: the learner thread samples while this thread adds
    background = None
    if run.async_learner:
        slack = max(1, -(-num_envs // run.training_interval))  # one vector step's updates may be pending
        gate = RatioGate(run.learning_starts, run.training_interval, slack, start_step, updates_done)
        background = AsyncLearner(agent.learner, replay, replay_lock, gate, batch_size, MAX_FUSED_UPDATES).start()

    def settle() -> None:
        """Async mode: let the learner finish what is owed, so a checkpoint or summary sees agreeing counters."""
        nonlocal updates_done
        if background:
            background.gate.settle(replay.can_sample(batch_size))
            background.check()
            updates_done = background.gate.updates

    def save(env_steps: int) -> None:
        nonlocal last_checkpoint, checkpoint_cost
        settle()
        _check_finite(agent, last_checkpoint)
        state = {"updates_done": updates_done, "frames": frames, "stack": stack,
                 "env": vector if envs_pickle else None, "eval_env": eval_env if envs_pickle else None}
        try:
            checkpoint_cost = checkpointer.save(env_steps, state)
        except (OSError, tf.errors.OpError) as error:
            reason = getattr(error, "strerror", None) or getattr(error, "message", None) or str(error)
            raise RunFailure(f"checkpoint at env step {env_steps} could not be written ({reason.splitlines()[0]}); "
                             f"the previous complete checkpoint ({_kept(last_checkpoint)}) is intact") from None
        last_checkpoint = env_steps

    env_steps, updates_at_start = start_step, updates_done
    with StopRequest() as stop:
        try:
            while env_steps < run.total_steps and not stop.requested:
                before = env_steps
                profiler.at(env_steps)
                t = time.perf_counter()
                actions = agent.actor.act(stack.observation).numpy()
                t = timer.add("act", t)
                try:
                    step = vector.step(actions)
                except Exception as error:  # the env itself failed: name it, and what is kept
                    first = (str(error).splitlines() or [""])[0]
                    raise RunFailure(f"env {spec.env_id} failed at env step {env_steps + num_envs}: "
                                     f"{error.__class__.__name__}: {first}; last checkpoint: "
                                     f"{_kept(last_checkpoint)}") from error
                t = timer.add("env_step", t)
                with replay_lock:
                    replay.add(frames, actions, step.reward, step.terminated, step.truncated, step.final_frames)
                stack.push(step.next_frames)
                for i in np.flatnonzero(step.terminated | step.truncated):  # a new episode starts from its own frame
                    stack.reset(i, step.next_frames[i])
                frames = step.next_frames
                env_steps += num_envs
                episodes.record(env_steps, step.games)
                window["env_steps"] += num_envs
                t = timer.add("replay_add", t)

                updates_before = updates_done
                if background:  # the learner thread updates; wait here only if it fell behind
                    background.gate.advance(env_steps, replay.can_sample(batch_size))
                    background.check()
                    updates_done, metrics = background.gate.updates, background.metrics or metrics
                    t = timer.add("wait", t)
                # Every due update in one call: k batches sampled together, k updates in one graph.
                due = 0 if background else updates_due(env_steps, run.learning_starts, run.training_interval) - updates_done
                while due > 0 and replay.can_sample(batch_size):
                    k = min(due, MAX_FUSED_UPDATES)
                    if on_device:  # the graph samples its own batches from the variables
                        replay.flush()
                        t = timer.add("replay_sample", t)
                        metrics = update_from_replay(tf.constant(k, tf.int32))
                    else:
                        batches = replay.sample_stacked(k, batch_size)
                        t = timer.add("replay_sample", t)
                        metrics = agent.learner.update_many(*batches)
                    metrics["td_loss"].numpy()  # wait for the device: the update's time is charged to it
                    t = timer.add("update", t)
                    updates_done += k
                    due -= k
                window["updates"] += updates_done - updates_before

                if _crossed(before, env_steps, run.log_every) or env_steps >= run.total_steps:
                    _check_finite(agent, last_checkpoint)
                    timer.add("log", t)
                    shares = timer.window_shares()  # closes the window; what follows is charged to the next
                    if background:  # the learner's phases come from its own thread's timer
                        shares.update({k: v for k, v in background.timer.window_shares().items()
                                       if k in ("share_update", "share_replay_sample")})
                    t = time.perf_counter()
                    system = sampler.drain()
                    for key, value in system.items():
                        system_means[key].append(value)
                    values = {
                        **episodes.drain(),
                        "charts/epsilon": agent.actor.epsilon().numpy(),
                        "losses/td_loss": metrics["td_loss"].numpy() if metrics else None,
                        "losses/q_values": metrics["q_values"].numpy() if metrics else None,
                        **_perf_summary(shares, window["env_steps"], window["updates"], system),
                    }
                    if checkpoint_cost:
                        values.update({"perf/checkpoint_seconds": checkpoint_cost["seconds"],
                                       "perf/checkpoint_bytes": checkpoint_cost["bytes"]})
                        checkpoint_cost = None
                    logger.scalars(env_steps, values)
                    recent = np.mean(episodes.recent) if episodes.recent else float("nan")
                    bar.set_postfix(steps_per_s=f"{values['perf/env_steps_per_sec']:.0f}", ret=f"{recent:.1f}",
                                    eps=f"{values['charts/epsilon']:.3f}", refresh=False)
                    bar.update(env_steps - bar.n)
                    window = {"env_steps": 0, "updates": 0}
                    t = timer.add("log", t)

                if _crossed(before, env_steps, run.eval_every):
                    eval_env = eval_env or make_env(config.env, seed=run.seed + EVAL_SEED_OFFSET, evaluation=True)[0]
                    returns = run_episodes(eval_env, spec, agent.actor, run.eval_episodes,
                                           config.exploration.eval_epsilon, should_stop=lambda: stop.requested)
                    if returns:
                        logger.scalars(env_steps, {"charts/eval_return": np.mean(returns)})
                    t = timer.add("eval", t)

                if _crossed(before, env_steps, run.checkpoint_every) or env_steps >= run.total_steps:
                    save(env_steps)
                    timer.add("checkpoint", t)
            if stop.requested:
                stopped_by = stop.signal_name
                if last_checkpoint != env_steps:
                    save(env_steps)
            settle()
        finally:
            wall = time.perf_counter() - started
            run_shares = timer.run_shares()
            if background:
                background.stop()
                run_shares.update({k: v for k, v in background.timer.run_shares().items()
                                   if k in ("share_update", "share_replay_sample")})
            profiler.stop()
            sampler.stop()
            bar.close()
            episodes.close()
        steps_run = env_steps - start_step
        summary = {
            "env_id": spec.env_id,
            "seed": run.seed,
            "env_steps": env_steps,
            "updates": updates_done,
            "training_interval": run.training_interval,
            "num_envs": num_envs,
            "async_learner": run.async_learner,
            "episodes": episodes.count,
            **({"resumed_from_env_steps": start_step} if resume else {}),
            **({"stopped_by": stopped_by} if stopped_by else {}),
            "wall_seconds": round(wall, 3),
            "env_steps_per_sec": round(steps_run / wall, 2),
            "updates_per_sec": round((updates_done - updates_at_start) / wall, 2),
            "learner_busy_share": round(run_shares["share_update"], 4),
            "phase_shares": {k.removeprefix("share_"): round(v, 4) for k, v in run_shares.items()},
            "cpu_util": round(float(np.mean(system_means["system/cpu_util"])), 4) if system_means else None,
            "rss_bytes_max": max(system_means["system/rss_bytes"], default=None),
            "gpu": sampler.gpu,
            **({"gpu_util": round(float(np.mean(system_means["system/gpu_util"])), 4)}
               if "system/gpu_util" in system_means else {}),
            "replay_capacity": config.replay.capacity,
            "replay_device": config.replay.device,
            "replay_bytes": int(replay.nbytes),
        }
        if not stopped_by:
            final_env, _ = make_env(config.env, seed=run.seed + 2 * EVAL_SEED_OFFSET, evaluation=True)
            returns = run_episodes(final_env, spec, agent.actor, run.final_eval_episodes,
                                   config.exploration.eval_epsilon, should_stop=lambda: stop.requested)
            if stop.requested:
                summary["stopped_by"] = stop.signal_name
            else:
                logger.scalars(env_steps, {"charts/final_eval_return": np.mean(returns)})
                summary.update({"final_eval_epsilon": config.exploration.eval_epsilon,
                                "final_eval_episodes": len(returns), "final_eval_return_mean": float(np.mean(returns)),
                                "final_eval_return_std": float(np.std(returns)), "final_eval_returns": returns})
    logger.close()
    write_json(run_dir / "summary.json", summary)
    return summary
