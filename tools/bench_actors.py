"""Env steps/s, updates/s and learner busy share against the number of actors, per kind of collector.

    python -m tools.bench_actors --env CartPole --step-delay-ms 2 --kinds process ray --actors 1 4 \
        --seconds 30 --out FILE.json

Each measurement is a real `python -m tfdqn.train` run of the env's own config (learning after
--learning-starts steps, no evaluation, no periodic checkpoint), stopped with SIGINT --seconds after it
printed its replay line. Kinds: `inline` (this process's envs, `run.num_envs` = --envs-per-actor, the
loop's thread acts and updates), `async` (the same with the learner in its own thread), `process` and
`ray` (N actors of --envs-per-actor envs each; N from --actors). Inline kinds are measured once, with
`actors` 0 in the table. `--step-delay-ms D` makes every env step wait D ms without using the CPU
(`env.step_delay_ms`), as a simulator behind a socket would. `--cluster-nodes K ...` measures `ray` again on a
cluster of K worker nodes on this machine (`tools/local_cluster.py`: each node its own raylet and object store,
the head with no CPUs for Ray), the learner joining it as on a real cluster's head; 0 is the run's own Ray. On
one machine the nodes share its cores, so these rows measure what crossing between nodes costs (object
transfers between stores, Ray's scheduling), not more cores. `bytes_per_env_step`: the payload bytes of the chunks
the actors sent over the env steps the learner took from them (summary.json's `actors.per_actor`).

Figures are steady-state: the per-window perf/ TensorBoard scalars of the summary windows that start
at or after learning_starts, less the first --warmup-windows. `speedup` is env steps/s over the same
kind's smallest actor count in this invocation. First, `pipe` times one real chunk of an actor's play
through a pipe between two spawned processes (the process collector's transport), raw and with each
--chunk-compression codec, with its pickled bytes per transition; where `ray` is among --kinds, `ray_object`
gives the same chunks as a Ray actor's return value: the object's size as Ray reports it
(`ray.experimental.get_object_locations`), whether it went to the shared-memory object store or, under Ray's
100 KB limit for direct returns, inline in the reply, and the round trip of `ray.get`. `--chunks-only` stops
there. `loop_wait_share` is the share of the learner loop's
time spent waiting for transitions (for actors, or in async mode for the learner thread): where it is
near 0 the learner is the limit. `policy_lag_updates` and `epsilon_lag_steps` (actors only): how old the
actors' weights and epsilon clock were when the learner took their chunks.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from tfdqn import config as config_lib
from tfdqn.atomic import write_json
from tfdqn.bench.windows import steady_state, window_series
from tfdqn.cli import OneLineErrorParser, last_line, number, run_cli, start_tensorflow
from tfdqn.errors import RunFailure, UserError
from tfdqn.run.provenance import code_now
from tools.local_cluster import hosted

REPO = pathlib.Path(__file__).resolve().parent.parent
KINDS = ("inline", "async", "process", "ray")
FIGURES = {"perf/env_steps_per_sec": "env_steps_per_sec", "perf/updates_per_sec": "updates_per_sec",
           "perf/learner_busy_share": "learner_busy_share", "perf/share_wait": "loop_wait_share",
           "system/cpu_util": "cpu_util", "perf/policy_lag_updates": "policy_lag_updates",
           "perf/epsilon_lag_steps": "epsilon_lag_steps"}


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.bench_actors", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartPole", help="env name or id, as for tfdqn.train (default CartPole)")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=["inline", "process", "ray"],
                        help="collectors to measure (default: inline process ray)")
    parser.add_argument("--actors", type=number(int), nargs="+", default=[1, 2, 4, 8], metavar="N",
                        help="actor counts for process and ray (default 1 2 4 8)")
    parser.add_argument("--envs-per-actor", type=number(int), default=1, metavar="M",
                        help="envs per actor, and the inline kinds' run.num_envs (default 1)")
    parser.add_argument("--step-delay-ms", type=number(float), default=0.0, metavar="D",
                        help="milliseconds each env step waits without using the CPU (default 0)")
    parser.add_argument("--seconds", type=number(float), default=30.0, help="seconds each run trains (default 30)")
    parser.add_argument("--learning-starts", type=number(int), default=500, metavar="N",
                        help="env steps before the first update (default 500)")
    parser.add_argument("--log-every", type=number(int), metavar="N",
                        help="env steps per summary window (default: 250 for Atari, 1000 otherwise)")
    parser.add_argument("--warmup-windows", type=number(int), default=1, metavar="W",
                        help="steady windows left out at the start (default 1)")
    parser.add_argument("--cluster-nodes", type=number(int), nargs="+", default=[0], metavar="K",
                        help="ray: worker nodes of a local cluster to run the actors on, one set of runs per K; 0: "
                             "the run's own Ray (default 0)")
    parser.add_argument("--cpus-per-node", type=number(float), default=2.0, metavar="C",
                        help="CPUs each worker node of --cluster-nodes offers Ray (default 2)")
    parser.add_argument("--chunk-compression", nargs="*", default=["zstd"], metavar="CODEC",
                        help="replay.compression values whose actor chunks `pipe` also times (default zstd; "
                             "none and the runs' own are always timed)")
    parser.add_argument("--chunks-only", action="store_true",
                        help="measure one chunk's transport (pipe, and Ray's object store with --kinds ray) and stop")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any config key for every run, e.g. run.training_interval=4")
    parser.add_argument("--out", metavar="FILE.json", help="write every measurement here")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def plan(args: argparse.Namespace, cluster_nodes: int = 0) -> list[tuple[str, int]]:
    """(kind, actors) in run order: the inline kinds once (0 actors), the others at each count; on a cluster of
    `cluster_nodes` worker nodes, ray's alone."""
    if cluster_nodes:
        return [("ray", n) for n in args.actors] if "ray" in args.kinds else []
    return [(kind, 0) for kind in args.kinds if kind in ("inline", "async")] + \
        [(kind, n) for n in args.actors for kind in args.kinds if kind in ("process", "ray")]


def command(args: argparse.Namespace, kind: str, actors: int, logdir: pathlib.Path, name: str) -> list[str]:
    from tfdqn.envs.make import is_atari_id, resolve_env_id

    log_every = args.log_every or (250 if is_atari_id(resolve_env_id(args.env)) else 1000)
    settings = {"run.total_steps": 10**9, "run.learning_starts": args.learning_starts, "run.log_every": log_every,
                "run.checkpoint_every": 0, "run.eval_every": 0, "replay.capacity": 100_000,
                "env.step_delay_ms": args.step_delay_ms}
    if kind in ("inline", "async"):
        settings.update({"run.num_envs": args.envs_per_actor, "run.async_learner": kind == "async"})
    else:
        settings.update({"actors.kind": kind, "actors.count": actors, "actors.envs_per_actor": args.envs_per_actor})
    items = [f"{key}={value}" for key, value in settings.items()] + args.set
    return [sys.executable, "-m", "tfdqn.train", "--env", args.env, "--quiet", "--logdir", str(logdir),
            "--run-name", name, *(a for item in items for a in ("--set", item))]


def measure(args: argparse.Namespace, kind: str, actors: int, logdir: pathlib.Path,
            cluster: dict | None = None) -> dict:
    """One run: start it, let it train --seconds after its replay line, stop it, read its steady windows. With
    `cluster` (a `tools.local_cluster.LocalCluster`), its Ray actors run on that cluster's worker nodes."""
    nodes = len(cluster.workers) if cluster else 0
    name = f"{kind}_{actors}_{nodes}"
    run = command(args, kind, actors, logdir, name)
    environment = {**(cluster.joining_environment() if cluster else os.environ), "TF_CPP_MIN_LOG_LEVEL": "2"}
    if cluster:
        run += ["--set", f"actors.ray_address={cluster.address}"]
    process = subprocess.Popen(run, cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=environment)
    started = threading.Event()
    lines: list[str] = []

    def read() -> None:
        for line in process.stdout:
            lines.append(line)
            if line.startswith("replay:"):
                started.set()

    threading.Thread(target=read, daemon=True).start()
    while not started.wait(0.2):
        if process.poll() is not None:
            raise RunFailure(f"{name} ended before training: {last_line(process.stderr.read())}")
    time.sleep(args.seconds)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=600)
    if process.returncode != 130:
        raise RunFailure(f"{name} exited with {process.returncode}: {last_line(err)}")
    windows = steady_state(window_series(logdir / name), args.learning_starts, args.warmup_windows)
    summary = json.loads((logdir / name / "summary.json").read_text())
    if not windows:
        raise RunFailure(f"{name} had no steady window in {args.seconds:g} s; allowed: a longer --seconds "
                         f"or a smaller --log-every")
    row = {"kind": kind, "actors": actors, "env": summary["env_id"], "step_delay_ms": args.step_delay_ms,
           "envs_per_actor": args.envs_per_actor, "training_interval": summary["training_interval"],
           "compression": summary["replay_compression"],
           "windows": len(windows["perf/env_steps_per_sec"]), "actor_restarts": summary["actors"].get("restarts", 0),
           "cluster_nodes": nodes, **_per_actor_figures(summary["actors"].get("per_actor"))}
    row.update({column: round(float(np.mean(windows[tag])), 4) for tag, column in FIGURES.items() if tag in windows})
    row.setdefault("learner_busy_share", 0.0)  # no update ran in a steady window
    row.setdefault("loop_wait_share", 0.0)  # the loop never waited (inline)
    return row


def _per_actor_figures(per_actor: list | None) -> dict:
    """Payload bytes per env step over all actors, how many actors took env steps (a cluster whose nodes offer
    fewer CPUs than the actors ask for places only some) and how many nodes they ran on (Ray only)."""
    if not per_actor:
        return {}
    steps = sum(actor["env_steps"] for actor in per_actor)
    nodes = {life["node"] for actor in per_actor for life in actor["lives"] if "node" in life}
    return {"bytes_per_env_step": round(sum(actor["bytes_sent"] for actor in per_actor) / max(steps, 1), 1),
            "actors_placed": sum(actor["env_steps"] > 0 for actor in per_actor),
            **({"nodes_used": len(nodes)} if nodes else {})}


def _echo_chunks(conn, chunk: dict, count: int) -> None:
    """An actor stand-in for `pipe_cost`: answers each request with the same chunk."""
    for _ in range(count):
        conn.recv()
        conn.send(chunk)


def real_chunks(config, compressions: list[str]) -> dict:
    """A chunk an actor of this config made, per `replay.compression` (the same seed, so the same play): an
    actor with a codec sends its frames' codes."""
    import dataclasses

    from tfdqn.actors.worker import ActorWorker

    chunks = {}
    for codec in compressions:
        worker = ActorWorker(dataclasses.replace(config, replay=dataclasses.replace(config.replay, compression=codec)),
                             index=0, seed=0)
        try:
            chunks[codec] = worker.collect(None, 0, env_steps=0)
        finally:
            worker.close()
    return chunks


def pipe_cost(chunk, rounds: int = 200) -> dict:
    """What one chunk costs through a pipe between two spawned processes, as the process collector sends it:
    its pickled bytes per transition (a Ray actor's object holds the same pickle), round trip, the
    learner's CPU per chunk, and throughput."""
    import multiprocessing
    import pickle

    context = multiprocessing.get_context("spawn")
    mine, theirs = context.Pipe()
    child = context.Process(target=_echo_chunks, args=(theirs, chunk, rounds + 1))
    child.start()
    mine.send(None), mine.recv()  # the child has started
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        mine.send(None)
        mine.recv()
    wall, cpu = (time.perf_counter() - wall) / rounds, (time.process_time() - cpu) / rounds
    child.join()
    nbytes = len(pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL))
    return {"chunk_bytes": nbytes, "transitions": chunk.action.size,
            "bytes_per_transition": round(nbytes / chunk.action.size, 1), "round_trip_ms": round(wall * 1e3, 3),
            "learner_cpu_ms": round(cpu * 1e3, 3), "megabytes_per_sec": round(nbytes / wall / 1e6, 1)}


def _chunk_source(chunk):
    """A Ray actor stand-in for `ray_object_cost`: returns the same chunk on every call, as `collect` would."""
    class ChunkSource:
        def get(self):
            return chunk

    return ChunkSource


def ray_object_cost(chunks: dict, rounds: int = 50) -> dict:
    """Per codec, one chunk returned by a Ray actor (as `RayActorCollector` receives `collect`'s chunks): the
    object's size in Ray, where it lives (the object store, or inline in the reply), and the mean round trip
    of a call and `ray.get`."""
    from tfdqn.actors.ray_actors import import_ray, start_local_ray

    ray = import_ray(own=True)
    start_local_ray(ray, num_cpus=2)
    try:
        costs = {}
        for codec, chunk in chunks.items():
            source = ray.remote(_chunk_source(chunk)).remote()
            ray.get(source.get.remote())  # the actor has started
            started = time.perf_counter()
            for _ in range(rounds):
                ref = source.get.remote()
                ray.get(ref)
            wall = (time.perf_counter() - started) / rounds
            location = ray.experimental.get_object_locations([ref])[ref]
            costs[codec] = {"object_bytes": location["object_size"], "transitions": chunk.action.size,
                            "bytes_per_transition": round(location["object_size"] / chunk.action.size, 1),
                            "in_object_store": bool(location["node_ids"]), "round_trip_ms": round(wall * 1e3, 3)}
            ray.kill(source)
        return costs
    finally:
        ray.shutdown()


def add_speedups(rows: list[dict]) -> None:
    """env steps/s over the same kind's (on as many cluster nodes) fewest actors measured."""
    for row in rows:
        base = min((r for r in rows if (r["kind"], r["cluster_nodes"]) == (row["kind"], row["cluster_nodes"])),
                   key=lambda r: r["actors"])
        row["speedup"] = round(row["env_steps_per_sec"] / base["env_steps_per_sec"], 3)


def _actors(row: dict) -> str:
    """The actors asked for, and how many of them took env steps where not all did."""
    placed = row.get("actors_placed", row["actors"])
    return str(row["actors"]) if placed == row["actors"] else f"{row['actors']} ({placed} placed)"


def table(rows: list[dict]) -> str:
    lines = ["| kind | cluster nodes | actors | env steps/s | updates/s | learner busy | loop waits | CPU | "
             "bytes/env step | policy lag (updates) | speedup |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['kind']} | {r['cluster_nodes'] or '-'} | {_actors(r)} | {r['env_steps_per_sec']:.0f} | "
              f"{r['updates_per_sec']:.0f} | {r['learner_busy_share']:.2f} | {r['loop_wait_share']:.2f} | "
              f"{r.get('cpu_util', float('nan')):.2f} | {r.get('bytes_per_env_step', float('nan')):.0f} | "
              f"{r.get('policy_lag_updates', float('nan')):.1f} | {r['speedup']:.2f}x |" for r in rows]
    return "\n".join(lines)


def _main(args: argparse.Namespace) -> int:
    if min(args.cluster_nodes) < 0 or args.cpus_per_node <= 0:
        raise UserError(f"--cluster-nodes {args.cluster_nodes} / --cpus-per-node {args.cpus_per_node:g}: allowed: "
                        f"nodes >= 0 (0: the run's own Ray) and CPUs > 0")
    if args.seconds <= 0 or min(args.actors) < 1 or args.envs_per_actor < 1:
        raise UserError("--seconds, --actors and --envs-per-actor must be positive; allowed: e.g. --seconds 30 "
                        "--actors 1 4 --envs-per-actor 1")
    start_tensorflow()  # reads the runs' TensorBoard logs
    from tfdqn.config import DQNConfig

    config = DQNConfig.for_env(args.env, {**config_lib.parse_set(args.set), "actors.envs_per_actor": args.envs_per_actor})
    compressions = list(dict.fromkeys(["none", config.replay.compression, *args.chunk_compression]))
    chunks = real_chunks(config, compressions)
    pipe = {codec: pipe_cost(chunk) for codec, chunk in chunks.items()}
    for codec, cost in pipe.items():
        print(f"pipe, compression {codec}: a chunk of {cost['chunk_bytes']:,} bytes ({cost['bytes_per_transition']:,.0f} "
              f"per transition) takes {cost['round_trip_ms']:.2f} ms there and back, {cost['learner_cpu_ms']:.2f} ms of "
              f"the learner's CPU ({cost['megabytes_per_sec']:.0f} MB/s)", flush=True)
    ray_object = ray_object_cost(chunks) if "ray" in args.kinds else {}
    for codec, cost in ray_object.items():
        print(f"ray, compression {codec}: a chunk is an object of {cost['object_bytes']:,} bytes "
              f"({cost['bytes_per_transition']:,.0f} per transition), "
              f"{'in the object store' if cost['in_object_store'] else 'inline in the reply'}, "
              f"{cost['round_trip_ms']:.2f} ms per call and get", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as logdir:
        for nodes in ([] if args.chunks_only else args.cluster_nodes):
            with (hosted(pathlib.Path(logdir) / f"cluster-{nodes}.log", nodes, args.cpus_per_node) if nodes
                  else contextlib.nullcontext()) as cluster:
                for kind, actors in plan(args, nodes):
                    rows.append(measure(args, kind, actors, pathlib.Path(logdir), cluster))
                    print(json.dumps(rows[-1]), flush=True)
    add_speedups(rows)
    if rows:
        print(table(rows))
    if args.out:
        write_json(pathlib.Path(args.out), {"command": " ".join(["python", "-m", "tools.bench_actors", *sys.argv[1:]]),
                                            **code_now(), "cpus": os.cpu_count(), "pipe": pipe,
                                            "ray_object": ray_object, "runs": rows})
    return 0


def main(argv=None) -> int:
    return run_cli(build_parser(), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
