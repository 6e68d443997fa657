"""`build_run`: every part of a training run, made once, in one typed object that closes them together."""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import shlex
import shutil
import threading
import time

import tensorflow as tf

from tfdqn import config as config_lib
from tfdqn.actors.collector import RemoteCollector
from tfdqn.actors.process import ProcessActors
from tfdqn.actors.ray_actors import RayActors
from tfdqn.agent.agent import Agent, make_agent
from tfdqn.agent.network_fit import check_augmentation
from tfdqn.config import DQNConfig
from tfdqn.envs.make import EnvSpec, describe_protocol, make_env
from tfdqn.envs.seeds import derive_seed
from tfdqn.envs.vector import make_vector_env
from tfdqn.replay.audit import ReplayAudit
from tfdqn.replay.device import DeviceReplay
from tfdqn.replay.ring import ReplayRing
from tfdqn.replay.samplers import make_sampler
from tfdqn.run.cadence import no_update_reason
from tfdqn.run.checkpoint import BestCheckpoint, Checkpointer
from tfdqn.run.clock import RunClock
from tfdqn.run.collectors import IllegalActionCount, VectorEnvCollector
from tfdqn.run.drivers import make_driver
from tfdqn.run.episodes import EpisodeLog
from tfdqn.run.evaluation import Evaluator
from tfdqn.run.evaluation_seeds import FILE as EVALUATION_SEEDS, EvaluationSeeds
from tfdqn.run.csv_log import EVALUATIONS_HEADER, CsvLog
from tfdqn.run.hooks import EvaluationHook, ProfilerHook, SummaryHook, SummarySources
from tfdqn.run.lock import RunLock
from tfdqn.run.pace import Pace, PaceHook, fused_updates, measure_update_seconds
from tfdqn.run.replay_memory import check_memory, replay_line
from tfdqn.run.run_dir import make_run_dir
from tfdqn.run.saving import CheckpointService
from tfdqn.run.signals import StopRequest
from tfdqn.telemetry.layout import run_layout, unwritten_tags
from tfdqn.telemetry.phase_timer import PhaseTimer
from tfdqn.telemetry.system_monitor import NO_GPU, SystemMonitor
from tfdqn.telemetry.tensorboard import Logger
from tfdqn.telemetry.tracking import make_tracker

RESUME_SEED = 3  # seed stream of the new games a resumed run starts where its envs could not be saved


@dataclasses.dataclass
class Run:
    """The parts of one training run. The loop reads them; `close()` (or leaving a `with` block) closes
    envs, threads, writers and the system monitor, also after an error."""

    config: DQNConfig
    run_dir: pathlib.Path
    spec: EnvSpec
    agent: Agent
    replay: ReplayRing
    replay_lock: threading.Lock  # the replay is shared with a background learner, if there is one
    collector: VectorEnvCollector | RemoteCollector
    driver: object  # drivers.InlineDriver or drivers.BackgroundDriver
    timer: PhaseTimer  # the loop thread's phases
    monitor: SystemMonitor
    writer: Logger
    episodes: EpisodeLog
    evaluator: Evaluator
    evaluations: CsvLog  # evaluations.csv
    confirmations: CsvLog  # confirmations.csv: the hits' confirmations (run.confirm_episodes)
    clock: RunClock
    checkpoint: CheckpointService  # a run service the loop calls, not a hook
    stop: StopRequest
    resumed_from: int | None
    closing: contextlib.ExitStack
    hooks: list = dataclasses.field(default_factory=list)
    evaluation: EvaluationHook | None = None  # one of `hooks`: it says when the target return is reached
    start_counts: tuple[int, int] = (0, 0)  # (env steps, updates) when the loop starts
    started: float = dataclasses.field(default_factory=time.perf_counter)

    def close(self) -> None:
        self.closing.close()

    def reached_target(self) -> bool:
        """Whether an evaluation reached `run.target_return`."""
        return self.evaluation.reached_target

    def ended_by_evaluation(self) -> bool:
        """Whether an evaluation ended the run: it reached the target, or the caller's callback said so."""
        return self.evaluation.ends_run

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _make_replay(config: DQNConfig, spec: EnvSpec, num_envs: int, memory_budget: int) -> ReplayRing:
    in_graph = config.replay.device == "accelerator"
    compressed = {} if in_graph else {"compression": config.replay.compression, "memory_budget": memory_budget}
    replay = (DeviceReplay if in_graph else ReplayRing)(
        config.replay.capacity, spec.frame_shape, spec.frame_dtype, spec.stack_size, num_streams=num_envs,
        seed=config.run.seed, n_step=config.learner.n_step, gamma=config.learner.gamma,
        clip_rewards=config.learner.clip_rewards, sampler=make_sampler(config.replay, in_graph), **compressed)
    if config.replay.audit:
        replay.audit = ReplayAudit(spec.frame_shape, spec.frame_dtype, spec.stack_size, config.learner.n_step,
                                   config.learner.gamma, config.learner.clip_rewards, keep=2 * config.replay.capacity)
    print(replay_line(replay), flush=True)
    return replay


def _open_envs(config: DQNConfig) -> tuple:
    """(vector env, spec) for envs stepped in this process; (None, spec) where actors step them."""
    if config.actors.kind == "inline":
        return make_vector_env(config.env, config.run.num_envs, seed=config.run.seed)
    env, spec = make_env(config.env, seed=config.run.seed)
    env.close()
    return None, spec


def _make_collector(config: DQNConfig, vector, spec: EnvSpec, agent: Agent, timer: PhaseTimer, replay,
                    replay_lock: threading.Lock, stop: StopRequest, settle_learner):
    """The in-process collector of `vector`, or the collector of the actors `actors.kind` names, which
    calls `settle_learner()` before it reads the weights it sends."""
    if vector is not None:
        collector = VectorEnvCollector(vector, spec, agent.actor, timer, seed=config.run.seed)
    else:
        actors = (ProcessActors if config.actors.kind == "process" else RayActors)(config)

        def cut_episodes(final_frame, streams) -> None:
            with replay_lock:
                replay.cut_episodes(final_frame, streams)

        collector = RemoteCollector(actors, config, spec, agent.counters, agent.online, cut_episodes, timer,
                                    should_stop=lambda: stop.requested, settle=settle_learner)
    return collector if spec.layout is None or spec.layout.mask is None else IllegalActionCount(collector, spec.layout)


def _restore(checkpointer: Checkpointer, collector, replay, agent: Agent, seed: int) -> int:
    """Load the newest complete checkpoint into the parts; returns its env step."""
    env_steps, state = checkpointer.restore_latest()
    collector.restore(state, replay, seed=derive_seed(seed, RESUME_SEED, env_steps, bits=31))
    print(f"resumed from env step {env_steps} ({agent.counters.read()[1]} updates)", flush=True)
    return env_steps


def _replay_gib(run: Run) -> float:
    """The replay's filled part (`ReplayRing.filled_bytes`), compressed frames included."""
    with run.replay_lock:
        return run.replay.filled_bytes() / 2**30


def _pace(run: Run) -> Pace:
    """The run's `Pace`, its update timed here first where the run has updates to make: between the act
    calls the loop makes meanwhile where it acts in turn with learning, else alone."""
    config = run.config
    overlapped = config.run.async_learner or config.actors.kind != "inline"
    if no_update_reason(config.run) is not None:
        return Pace(config.run, None, overlapped)
    fused, envs = fused_updates(config.run, config.num_streams), config.num_streams
    acts = 0 if overlapped else max(1, round(fused * config.run.training_interval / envs))
    seconds = measure_update_seconds(run.agent, config.replay.batch_size, fused, act_rows=envs, acts=acts)
    return Pace(config.run, seconds, overlapped)


def _make_hooks(run: Run, quiet: bool, profile_steps: tuple[int, int] | None, on_evaluation) -> list:
    config, agent = run.config.run, run.agent
    pace = _pace(run)
    sources = SummarySources(agent.counters, agent.actor, agent.learner, run.timer, run.driver, run.monitor,
                             run.writer, run.episodes, run.collector, run.checkpoint, lambda: _replay_gib(run),
                             lambda: run.evaluation.last_mean, pace.seconds_left, lambda: run.evaluation.activity)
    run.evaluation = EvaluationHook(config.eval_every, run.evaluator, config.eval_episodes, run.writer,
                                    BestCheckpoint(run.run_dir / "checkpoints", agent.online),
                                    (run.evaluations, run.confirmations), run.clock, config.target_return,
                                    config.confirm_episodes, on_evaluation, pace.evaluated)
    hooks = [PaceHook(pace), SummaryHook(config.log_every, config.total_steps, sources, quiet), run.evaluation]
    if profile_steps:
        hooks.append(ProfilerHook(profile_steps, run.run_dir / "profile"))
    for hook in hooks:
        run.closing.callback(hook.close)
    return hooks


def _make_writer(config: DQNConfig, run_dir: pathlib.Path, resume: bool, closing: contextlib.ExitStack,
                 has_gpu: bool) -> Logger:
    """The TensorBoard writer, mirrored to the W&B run where `tracking.wandb` asks (closed after the writer, so
    the writer's last scalars reach it); a new run starts with its config table and the chart layout of the tags
    its mode writes (`has_gpu`: whether the system monitor reads a GPU)."""
    tracker = make_tracker(config, run_dir)
    if tracker is not None:
        closing.callback(tracker.close)
    writer = closing.enter_context(contextlib.closing(Logger(run_dir, mirror=tracker)))
    if not resume:
        writer.hyperparameters(config_lib.to_dict(config))
        writer.layout(run_layout(unwritten_tags(config, has_gpu)))
    return writer


def _make_evaluation_logs_and_clock(run_dir: pathlib.Path, resumed_from: int | None, agent: Agent, started: float,
                                    closing: contextlib.ExitStack) -> tuple[CsvLog, CsvLog, RunClock]:
    """evaluations.csv and confirmations.csv (cut back to the checkpoint on resume) and the run clock, going on
    from the checkpoint's reading: what time to a score is read from."""
    evaluations, confirmations = (closing.enter_context(contextlib.closing(
        CsvLog(run_dir / name, EVALUATIONS_HEADER, resumed_from))) for name in ("evaluations.csv", "confirmations.csv"))
    return evaluations, confirmations, RunClock(agent.counters.run_seconds, started)


def _say_if_no_update(config: DQNConfig) -> None:
    """One line at start where the run will make no update, so it has no product (`loop.train`)."""
    if (reason := no_update_reason(config.run)) is not None:
        print(f"no update will run: {reason}; it makes no final evaluation and exports no policy "
              f"(to train: run.total_steps above run.learning_starts)", flush=True)


def build_run(config: DQNConfig, run_dir: pathlib.Path, resume: bool = False, quiet: bool = True,
              profile_steps: tuple[int, int] | None = None, started: float | None = None,
              on_evaluation=None) -> Run:
    """Make every part once, envs first (their spec shapes the rest); restore them when `resume`; the run
    clock counts from `started` (Unix seconds: a command line's process start; None: now); `on_evaluation`:
    `EvaluationHook`'s.

    Nothing is written before the replay is known to fit, nor before this process holds the run
    folder's lock (released last, by `close`). On any error what was made is closed."""
    run_dir, started = pathlib.Path(run_dir), time.time() if started is None else started
    closing = contextlib.ExitStack()
    try:
        if config.compute.deterministic:
            tf.config.experimental.enable_op_determinism()  # process-wide, as TensorFlow offers no way back
        vector, spec = _open_envs(config)
        with contextlib.ExitStack() as until_owned:  # closes the envs if anything fails before the collector owns them
            if vector is not None:
                until_owned.callback(vector.close)
            memory_budget = check_memory(config, spec)
            check_augmentation(config.learner, spec.observation_shape, spec.frame_dtype)
            # the network against the env before the folder: a start that fails leaves none behind
            agent = make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions, spec.layout)
            fresh = _claim_folder(config, spec, run_dir, resume, closing)
            replay = _make_replay(config, spec, config.num_streams, memory_budget)
            replay_lock = threading.Lock()
            timer = PhaseTimer()
            stop = StopRequest()
            # The driver is made after a resume restored the counters; the collector reads weights only
            # once the loop runs, so it settles whichever driver the run has by then.
            collector = _make_collector(config, vector, spec, agent, timer, replay, replay_lock, stop,
                                        settle_learner=lambda: driver.settle())
            until_owned.pop_all()
        closing.callback(collector.close)
        checkpointer = Checkpointer(run_dir / "checkpoints", agent, replay)
        resumed_from = _restore(checkpointer, collector, replay, agent, config.run.seed) if resume else None
        driver = make_driver(config, agent, replay, replay_lock, timer, config.num_streams, checkpointer.pending)
        closing.callback(driver.close)
        monitor = SystemMonitor(period=0.5).start()
        closing.callback(monitor.stop)
        writer = _make_writer(config, run_dir, resume, closing, has_gpu=monitor.gpu != NO_GPU)
        episodes = closing.enter_context(contextlib.closing(EpisodeLog(run_dir / "episodes.csv", resumed_from)))
        evaluations, confirmations, clock = _make_evaluation_logs_and_clock(run_dir, resumed_from, agent, started,
                                                                            closing)
        seeds = EvaluationSeeds(config.run.seed, run_dir / EVALUATION_SEEDS, resumed_from)
        evaluator = Evaluator(config.env, spec, agent.actor, seeds, config.exploration.eval_epsilon,
                              lambda: stop.requested)
        closing.callback(evaluator.close)
        checkpoint = CheckpointService(config.run.checkpoint_every, checkpointer, collector, agent.learner,
                                       (episodes, evaluations, confirmations), clock, driver.pending, last=resumed_from)
        run = Run(config, run_dir, spec, agent, replay, replay_lock, collector, driver, timer, monitor, writer,
                  episodes, evaluator, evaluations, confirmations, clock, checkpoint, stop, resumed_from, closing)
        run.hooks = _make_hooks(run, quiet, profile_steps, on_evaluation)
        run.start_counts = agent.counters.read()
        timer.restart()
        run.started = time.perf_counter()
        fresh.keep()  # from here the folder holds a run
        return run
    except BaseException:
        closing.close()
        raise


def _claim_folder(config: DQNConfig, spec, run_dir: pathlib.Path, resume: bool,
                  closing: contextlib.ExitStack) -> "_FreshFolder":
    """The run folder made and locked (a fresh one removed again where the start fails), the lines saying what runs
    there printed, and its config saved: the folder's fate, which the caller keeps once the run is built."""
    fresh = _FreshFolder(run_dir, made=not resume and not run_dir.exists())
    make_run_dir(run_dir)
    closing.callback(fresh.close)  # after the lock is released: callbacks run last in, first out
    closing.enter_context(RunLock(run_dir))
    print(f"run folder: {run_dir}\nTensorBoard: tensorboard --logdir {shlex.quote(str(run_dir))}", flush=True)
    print(f"evaluation {describe_protocol(config.env, spec, config.exploration.eval_epsilon)}", flush=True)
    _say_if_no_update(config)
    config_lib.save(config, run_dir / "config.yaml")
    return fresh


class _FreshFolder:
    """A run folder: where this start `made` it, removed if the start fails (it holds nothing a user needs, and
    would block its name and `--resume`), kept once the run is built."""

    def __init__(self, path: pathlib.Path, made: bool):
        self.path, self.made, self.kept = path, made, False

    def keep(self) -> None:
        self.kept = True

    def close(self) -> None:
        if self.made and not self.kept:
            shutil.rmtree(self.path, ignore_errors=True)
