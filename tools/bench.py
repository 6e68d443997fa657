"""Where tfdqn stands against this machine's limit and its peers, measured side by side in one run.

    python -m tools.bench [--quick] [--peer torch] [--peer sb3] [--peer jax] --out FILE.json

The limit: `peak_flops` (a large float32 matmul, timed here) against `update_flops` (one batch-32
Nature-CNN update, counted from the layer shapes; `mlp_update_flops` for CartPole's network), and the env's own ceiling (random actions through
the env path training uses). tfdqn's figures: its update (plain, fused, XLA, bfloat16), act at batch 1
and 8 (plain, and with the noisy layers Rainbow acts with), the DQN family's update and prioritized replay costs (tools/bench_family.py), and the real
trainer (`python -m tfdqn.train`) on Breakout. Peers run in their own processes
right after, so each ratio compares figures taken minutes apart on the same machine. Prints a table
and writes every figure to the JSON file.
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from tfdqn.atomic import write_json
from tfdqn.cli import OneLineErrorParser, last_line, number, run_cli, start_tensorflow
from tfdqn.errors import UserError
from tfdqn.run.provenance import provenance
from tools.bench_family import FAMILY, device_replay_figures, family_update_figures, prioritized_figures
from tools.bench_timing import calls_per_second, matmul_peak_flops

REPO = pathlib.Path(__file__).resolve().parent.parent
FUSED_K = 8


def machine() -> dict:
    import ale_py
    import gymnasium
    import tensorflow as tf

    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor()) if os.path.exists("/proc/cpuinfo") else platform.processor()
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "tensorflow": tf.__version__, "numpy": np.__version__, "gymnasium": gymnasium.__version__,
            "ale_py": ale_py.__version__, "gpus": [d.name for d in tf.config.list_physical_devices("GPU")]}


def atari_config(**overrides):
    from tfdqn import config as config_lib

    return config_lib.build_config([config_lib.CONFIG_DIR / "atari.yaml"], overrides)


def noisy_actor_without_draws(observation):
    """The trainer's actor of the noisy network with every draw of noise replaced by a vector of ones scaled by
    a read of its generator's state (so XLA cannot fold it): a noisy act's cost without its draws, the floor
    that any cheaper draw of the same noise could approach. Traced inside the patch, on `observation`."""
    from unittest import mock

    import tensorflow as tf

    from tfdqn.agent import noisy
    from tfdqn.agent.agent import make_agent

    def ones(n, generator, dtype):
        return tf.ones((n,), dtype) * tf.cast(generator.next()[0] % 2 + 1, dtype)

    with mock.patch.object(noisy, "_normal", ones):
        agent = make_agent(atari_config(**{"network.noisy": True}), (4, 84, 84), np.uint8, 4)
        agent.actor.act(observation)
    return agent.actor


def program_figures(seconds: float) -> dict:
    """Peak matmul, update variants and act, all in this process with TensorFlow."""
    from tfdqn.agent.agent import make_agent
    from tfdqn.telemetry.flops import update_flops

    peak, peak_bf16 = matmul_peak_flops(seconds), matmul_peak_flops(seconds, bfloat16=True)
    rng = np.random.default_rng(0)
    frames = lambda n: rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8)  # noqa: E731
    batch = (frames(32), rng.integers(0, 4, 32).astype(np.int32), rng.normal(size=32).astype(np.float32),
             np.ones(32, np.float32), frames(32), np.ones(32, np.float32))
    stacked = [np.stack([column] * FUSED_K) for column in batch]

    def agent(**compute):
        config = atari_config(**{f"compute.{k}": v for k, v in compute.items()})
        return config, make_agent(config, (4, 84, 84), np.uint8, 4)

    config, plain = agent()
    flops = update_flops(plain.online, 32, config.learner.double_dqn)
    update = lambda learner: lambda: learner.update(*batch)["td_loss"].numpy()  # noqa: E731
    act = lambda actor, n: calls_per_second(lambda: actor.act(batch[0][:n]).numpy(), seconds)  # noqa: E731
    figures = {"peak_flops": peak, "peak_flops_bfloat16": peak_bf16, "update_flops": flops,
               "updates_per_sec": calls_per_second(update(plain.learner), seconds),
               "updates_per_sec_fused": FUSED_K * calls_per_second(
                   lambda: plain.learner.update_many(*stacked)["td_loss"].numpy(), seconds),
               "act_per_sec_b1": act(plain.actor, 1), "act_per_sec_b8": act(plain.actor, 8)}
    noisy = make_agent(atari_config(**{"network.noisy": True}), (4, 84, 84), np.uint8, 4)
    figures["act_per_sec_b1_noisy"], figures["act_per_sec_b8_noisy"] = act(noisy.actor, 1), act(noisy.actor, 8)
    for b in (1, 8):  # cost of a noisy call in plain calls: the noisy layers' extra work and their noise draws
        figures[f"act_noisy_cost_b{b}"] = figures[f"act_per_sec_b{b}"] / figures[f"act_per_sec_b{b}_noisy"]
    figures["act_per_sec_b1_noisy_no_draws"] = act(noisy_actor_without_draws(batch[0][:1]), 1)
    figures["act_noisy_cost_b1_no_draws"] = figures["act_per_sec_b1"] / figures["act_per_sec_b1_noisy_no_draws"]
    held_config = atari_config(**{"network.noisy": True, "network.noise_refresh": "update"})
    held = make_agent(held_config, (4, 84, 84), np.uint8, 4)
    figures["act_per_sec_b1_noisy_held"] = act(held.actor, 1)  # noise drawn after each update, read by act
    figures["act_noisy_cost_b1_held"] = figures["act_per_sec_b1"] / figures["act_per_sec_b1_noisy_held"]
    _, no_xla_act = agent(act_jit_compile=False)
    figures["act_per_sec_b1_no_xla"] = act(no_xla_act.actor, 1)
    _, xla = agent(update_jit_compile=True)
    figures["updates_per_sec_xla"] = calls_per_second(update(xla.learner), seconds)
    _, bf16 = agent(mixed_precision=True)
    figures["updates_per_sec_bfloat16"] = calls_per_second(update(bf16.learner), seconds)
    figures["act_per_sec_b1_bfloat16"], figures["act_per_sec_b8_bfloat16"] = act(bf16.actor, 1), act(bf16.actor, 8)
    figures["update_roofline_fraction_bfloat16"] = figures["updates_per_sec_bfloat16"] * flops / peak_bf16
    figures["update_roofline_fraction"] = figures["updates_per_sec"] * flops / peak
    figures["update_roofline_fraction_fused"] = figures["updates_per_sec_fused"] * flops / peak
    return figures


ZOO_NETWORK = [256, 256]  # the RL zoo's CartPole network: the yardstick of the MLP update rows
MLP_CALLS = ((4, False, ZOO_NETWORK), (4, True, ZOO_NETWORK), (64, True, ZOO_NETWORK), (64, True, None))
# (updates per call, XLA, hidden sizes or None for the default config's): before, XLA alone, rounds of 64,
# and the same rounds on the default network
DEFAULT_NETWORK = "_default_network"  # key suffix of the default network's figures


def mlp_update_figures(seconds: float) -> dict:
    """A CartPole network's update (batch 64, double DQN) as the loop runs it: k batches sampled by the
    host ring, then one fused call. Before `run.env_steps_per_round` and XLA by default, the 8-env interval-2 loop
    made 4 per call without XLA on the zoo's 4-256-256-2 network; the default config now makes 64 with
    XLA, on a 4-128-128-2 network (its own row)."""
    from tfdqn import config as config_lib
    from tfdqn.agent.agent import make_agent
    from tfdqn.replay.ring import ReplayRing
    from tfdqn.run.drivers import HostReplayUpdates
    from tfdqn.telemetry.flops import update_flops

    ring = ReplayRing(50_000, (4,), np.float32, num_streams=8, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(50_000 // 8):
        ring.add(rng.normal(size=(8, 4)).astype(np.float32), rng.integers(0, 2, 8), np.ones(8, np.float32),
                 rng.random(8) < 0.01, np.zeros(8, bool), rng.normal(size=(8, 4)).astype(np.float32))
    figures = {}
    for k, xla, hidden in MLP_CALLS:
        network = {"network.hidden_sizes": hidden} if hidden else {}
        config = config_lib.build_config([config_lib.CONFIG_DIR / "cartpole.yaml"],
                                         {"compute.update_jit_compile": xla, "replay.batch_size": 64, **network})
        agent = make_agent(config, (4,), np.float32, 2)
        source = HostReplayUpdates(agent.learner, ring, 64, beta=lambda: 1.0, replay_lock=threading.Lock())
        rate = k * calls_per_second(lambda: source.run(source.prepare(k))["td_loss"].numpy(), seconds)
        which = "" if hidden else DEFAULT_NETWORK
        figures[f"mlp_updates_per_sec_k{k}{'_xla' if xla else ''}{which}"] = rate
        figures.setdefault(f"mlp_update_flops{which}", update_flops(agent.online, 64, config.learner.double_dqn))
    figures["mlp_update_speedup"] = figures["mlp_updates_per_sec_k64_xla"] / figures["mlp_updates_per_sec_k4"]
    return figures


def env_ceilings(steps: int, num_envs: int) -> dict:
    """Breakout env steps/s under random actions: one `make_env` env, and the AtariVectorEnv that
    `--num-envs` uses (the ceiling acting with that many envs is measured against)."""
    from tfdqn.envs.vector import make_vector_env

    figures = {}
    for n, key in ((1, "env_steps_per_sec_single"), (num_envs, "env_steps_per_sec_ceiling")):
        vector, spec = make_vector_env(atari_config().env, n, seed=0)
        vector.reset(seed=0)
        rng = np.random.default_rng(0)
        actions = rng.integers(0, spec.num_actions, (steps // n + 1, n))
        start = time.perf_counter()
        for row in actions:
            vector.step(row)
        figures[key] = len(actions) * n / (time.perf_counter() - start)
        vector.close()
    return figures


def trainer_steps_per_sec(steps: int, learning_starts: int, capacity: int, num_envs: int, *settings: str,
                          interval: int = 4, env: str = "Breakout", preset: str | None = None) -> float:
    """env steps/s of a real `python -m tfdqn.train` run (Breakout unless `env` says otherwise, `preset` a
    recipe): its one logging window, which closes before the final checkpoint is written (SB3's figure
    includes no checkpoint either)."""
    from tfdqn.telemetry.tensorboard import read_scalars

    with tempfile.TemporaryDirectory() as logdir:
        command = [sys.executable, "-m", "tfdqn.train", "--env", env, *(["--preset", preset] if preset else []),
                   "--total-steps", str(steps),
                   "--learning-starts", str(learning_starts), "--training-interval", str(interval),
                   "--num-envs", str(num_envs), "--logdir", logdir, "--run-name", "bench", "--quiet",
                   "--set", f"replay.capacity={capacity}", "--set", "run.checkpoint_every=0",
                   "--set", "run.final_eval_episodes=1", "--set", "env.max_episode_frames=20000",
                   "--set", f"run.log_every={steps}", *(a for key in settings for a in ("--set", key))]
        subprocess.run(command, cwd=REPO, check=True, capture_output=True, text=True)
        (_, steps_per_sec), = read_scalars(pathlib.Path(logdir) / "bench", "perf/env_steps_per_sec")
    return steps_per_sec


def peer(name: str, *args) -> dict:
    """`python -m tools.<name> args...` in its own process, from the repository root: its JSON line."""
    result = subprocess.run([sys.executable, "-m", f"tools.{name}", *map(str, args)], cwd=REPO,
                            capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"bench: peer {name} failed: {last_line(result.stderr)}")
    return json.loads(result.stdout.strip().splitlines()[-1])


ROWS = [  # (key, label, peer key or keys: one line per peer measured)
    ("peak_flops", "peak FLOP/s (float32 matmul)", "torch:peak_flops"),
    ("peak_flops_bfloat16", "peak FLOP/s (bfloat16 matmul)", None),
    ("update_flops", "FLOPs per update (batch 32)", None),
    ("updates_per_sec", "updates/s, one per call", ("jax:updates_per_sec", "torch:updates_per_sec")),
    ("updates_per_sec_fused", f"updates/s, {FUSED_K} fused per call", "torch:updates_per_sec"),
    ("updates_per_sec_xla", "updates/s, XLA", None),
    ("updates_per_sec_bfloat16", "updates/s, bfloat16", "torch:updates_per_sec_bfloat16"),
    ("update_roofline_fraction", "update roofline fraction", None),
    ("update_roofline_fraction_fused", "update roofline fraction, fused", None),
    ("update_roofline_fraction_bfloat16", "update roofline fraction, bfloat16 (of the bfloat16 peak)", None),
    ("mlp_update_flops", "FLOPs per MLP update (4-256-256-2, batch 64)", None),
    ("mlp_updates_per_sec_k4", "MLP updates/s, 4 per call, sampled (before)", None),
    ("mlp_update_roofline_fraction_k4", "  roofline fraction", None),
    ("mlp_updates_per_sec_k4_xla", "MLP updates/s, 4 per call, XLA", None),
    ("mlp_updates_per_sec_k64_xla", "MLP updates/s, 64 per call, XLA (the default's calls)", None),
    ("mlp_update_roofline_fraction_k64_xla", "  roofline fraction", None),
    ("mlp_update_speedup", "MLP update speed-up, 64 per call with XLA / before", None),
    ("mlp_update_flops_default_network", "FLOPs per MLP update (4-128-128-2, the default network)", None),
    ("mlp_updates_per_sec_k64_xla_default_network", "MLP updates/s, 64 per call, XLA, default network", None),
    ("mlp_update_roofline_fraction_k64_xla_default_network", "  roofline fraction", None),
    *[row for name in FAMILY for row in (
        (f"family_update_ms_{name}", f"{name} update, ms (batch 32, one per call)", None),
        (f"family_update_cost_{name}", f"  {name} / plain", None),
        (f"family_update_roofline_{name}", "  roofline fraction", None))],
    ("per_ms_numpy_tree", "prioritized draw + priority update, 1M slots, batch 32: NumPy tree, ms", None),
    ("per_ms_graph_tree", "  in-graph tree (tf.Variable), ms", None),
    ("per_ms_python_tree", "  per-sample Python tree (the common implementation), ms", None),
    ("per_speedup_numpy_over_python", "  Python tree / NumPy tree", None),
    ("device_updates_per_sec_uniform", "device-replay update, uniform, updates/s", None),
    ("device_updates_per_sec_prioritized", "device-replay update, prioritized in the graph, updates/s", None),
    ("device_prioritized_over_uniform", "  prioritized / uniform", None),
    ("act_per_sec_b1", "act calls/s, batch 1 (XLA)", ("jax:act_per_sec_b1", "torch:act_per_sec_b1")),
    ("act_per_sec_b1_no_xla", "act calls/s, batch 1, no XLA", "torch:act_per_sec_b1"),
    ("act_per_sec_b8", "act calls/s, batch 8", ("jax:act_per_sec_b8", "torch:act_per_sec_b8")),
    ("act_per_sec_b1_noisy", "act calls/s, batch 1, noisy layers", None),
    ("act_noisy_cost_b1", "  plain / noisy", None),
    ("act_per_sec_b1_noisy_no_draws", "act calls/s, batch 1, noisy layers without their draws", None),
    ("act_noisy_cost_b1_no_draws", "  plain / noisy without draws (the floor a cheaper draw could reach)", None),
    ("act_per_sec_b1_noisy_held", "act calls/s, batch 1, noisy layers, noise held between updates", None),
    ("act_noisy_cost_b1_held", "  plain / noisy, noise held (network.noise_refresh: update)", None),
    ("act_per_sec_b8_noisy", "act calls/s, batch 8, noisy layers", None),
    ("act_noisy_cost_b8", "  plain / noisy", None),
    ("act_per_sec_b1_bfloat16", "act calls/s, batch 1, bfloat16", "torch:act_per_sec_b1_bfloat16"),
    ("act_per_sec_b8_bfloat16", "act calls/s, batch 8, bfloat16", "torch:act_per_sec_b8_bfloat16"),
    ("env_steps_per_sec_single", "env steps/s, 1 env, random", None),
    ("env_steps_per_sec_ceiling", "env steps/s ceiling, N envs, random", None),
    ("acting_steps_per_sec_envs", "trainer, learning off, N envs", None),
    ("acting_share_of_ceiling", "  share of the N-env ceiling", None),
    ("acting_steps_per_sec_envs_bfloat16", "trainer, learning off, N envs, bfloat16", None),
    ("acting_share_of_ceiling_bfloat16", "  share of the N-env ceiling", None),
    ("train_steps_per_sec_interval4", "trainer, interval 4, 1 env", "sb3:train_steps_per_sec_interval4"),
    ("train_steps_per_sec_interval4_envs", "trainer, interval 4, N envs", "sb3:train_steps_per_sec_interval4"),
    ("train_steps_per_sec_interval4_envs_async", "trainer, interval 4, N envs, async learner",
     "sb3:train_steps_per_sec_interval4"),
    ("train_steps_per_sec_interval4_envs_bfloat16", "trainer, interval 4, N envs, bfloat16",
     "sb3:train_steps_per_sec_interval4"),
    ("train_steps_per_sec_interval4_envs_bfloat16_async", "trainer, interval 4, N envs, bfloat16, async learner",
     "sb3:train_steps_per_sec_interval4"),
    ("train_steps_per_sec_interval4_device_replay", "trainer, interval 4, 1 env, device replay",
     "sb3:train_steps_per_sec_interval4"),
]


def table(results: dict) -> str:
    lines = ["| figure | tfdqn | peer | tfdqn / peer |", "|---|---:|---:|---:|"]
    for key, label, peer_keys in ROWS:
        if key not in results:
            continue
        value = results[key]
        label = label.replace("N envs", f"{results['num_envs']} envs")
        peers = []
        for peer_key in (peer_keys,) if isinstance(peer_keys, str) else peer_keys or ():
            name, _, field = peer_key.partition(":")
            other = results.get("peers", {}).get(name, {}).get(field)
            if other:
                peers.append((name, other))
        for name, other in peers or [(None, None)]:
            cells = [f"{value:.3g}", f"{other:.3g} ({name})" if other else "", f"{value / other:.2f}" if other else ""]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="shorter timings and runs, no async or device-replay trainer runs (under 3 minutes)")
    parser.add_argument("--peer", action="append", choices=["torch", "sb3", "jax"], default=[],
                        help="add a peer's figures (needs the compare extra: pip install -e '.[compare]')")
    parser.add_argument("--num-envs", type=number(int), default=8, help="envs for the vector figures (default 8)")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="JSON file to write")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _main(args) -> int:
    if args.num_envs < 1:
        raise UserError(f"--num-envs {args.num_envs} is out of range; allowed: an integer >= 1")
    start_tensorflow()
    seconds = 1.0 if args.quick else 6.0
    steps = 3_000 if args.quick else 12_000
    learning_starts, capacity = 500, 50_000
    results = {"command": " ".join(["python -m tools.bench", *sys.argv[1:]]), "code": provenance(),
               "machine": machine(),
               "num_envs": args.num_envs, "seconds_per_timing": seconds, "trainer_steps": steps,
               "trainer_learning_starts": learning_starts, "replay_capacity": capacity}
    results.update(program_figures(seconds))
    results.update(mlp_update_figures(seconds))
    for call, which in (("k4", ""), ("k64_xla", ""), ("k64_xla", DEFAULT_NETWORK)):
        results[f"mlp_update_roofline_fraction_{call}{which}"] = (
            results[f"mlp_updates_per_sec_{call}{which}"] * results[f"mlp_update_flops{which}"] / results["peak_flops"])
    results.update(family_update_figures(seconds * len(FAMILY) / 2))
    for name in FAMILY:
        results[f"family_update_roofline_{name}"] = (results[f"family_updates_per_sec_{name}"]
                                                     * results[f"family_update_flops_{name}"] / results["peak_flops"])
    results.update(prioritized_figures(seconds))
    results.update(device_replay_figures(seconds * 2))
    results.update(env_ceilings(4 * steps, args.num_envs))
    results["acting_steps_per_sec_envs"] = trainer_steps_per_sec(4 * steps, 10**9, capacity, args.num_envs)
    results["acting_share_of_ceiling"] = results["acting_steps_per_sec_envs"] / results["env_steps_per_sec_ceiling"]
    results["train_steps_per_sec_interval4"] = trainer_steps_per_sec(steps, learning_starts, capacity, 1)
    results["train_steps_per_sec_interval4_envs"] = trainer_steps_per_sec(steps, learning_starts, capacity,
                                                                         args.num_envs)
    bfloat16 = "compute.mixed_precision=true"
    results["acting_steps_per_sec_envs_bfloat16"] = trainer_steps_per_sec(4 * steps, 10**9, capacity, args.num_envs,
                                                                         bfloat16)
    results["acting_share_of_ceiling_bfloat16"] = (results["acting_steps_per_sec_envs_bfloat16"]
                                                   / results["env_steps_per_sec_ceiling"])
    results["train_steps_per_sec_interval4_envs_bfloat16"] = trainer_steps_per_sec(
        steps, learning_starts, capacity, args.num_envs, bfloat16)
    if not args.quick:  # the two options that do not pay on a CPU (docs/experiments/performance.md)
        results["train_steps_per_sec_interval4_envs_async"] = trainer_steps_per_sec(
            steps, learning_starts, capacity, args.num_envs, "run.async_learner=true")
        results["train_steps_per_sec_interval4_envs_bfloat16_async"] = trainer_steps_per_sec(
            steps, learning_starts, capacity, args.num_envs, bfloat16, "run.async_learner=true")
        results["train_steps_per_sec_interval4_device_replay"] = trainer_steps_per_sec(
            steps, learning_starts, capacity, 1, "replay.device=accelerator")
    results["peers"] = {}
    if "torch" in args.peer:
        results["peers"]["torch"] = peer("peer_torch", seconds)
    if "jax" in args.peer:
        results["peers"]["jax"] = peer("peer_jax", seconds)
    if "sb3" in args.peer:
        results["peers"]["sb3"] = peer("peer_sb3", steps, learning_starts, capacity)
    results["table"] = table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, results)
    print(results["table"])
    return 0


def main(argv=None) -> int:
    return run_cli(build_parser(), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
