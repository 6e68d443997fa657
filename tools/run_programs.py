"""Time tfdqn's exported XLA programs with jax alone, on the default device: no TensorFlow needed.

    python -m tools.run_programs DIR [--seconds 5] [--atari-env] [--num-envs 8] [--programs NAME ...]

DIR is what `python -m tools.export_programs --out DIR` wrote. Run it from the repository root (or a copy of
it on a host with jax alone): `-m` puts that folder on the path, so tfdqn need not be installed. Each module
is converted to StableHLO and compiled for the default jax device; variables start from DIR/variables.npz
(a value stored once for the variables that start equal, as the manifest's variable_copies says)
and every call's updated values are fed back as the next call's inputs, as TensorFlow does with its
variables. Each call is waited for (block_until_ready) before the next, so a rate is a real per-call
latency. The device's float32 matmul peak (default precision) gives each program's share of peak. With
--atari-env, the exported env (an ALE game) is also stepped with the trainer's AtariVectorEnv
(tfdqn.envs.vector) to give the end-to-end ceiling of a serial loop. Writes DIR/timings.json and
DIR/timings.md and prints the tables. Imports only NumPy, PyYAML (tfdqn.cli imports tfdqn.config) and
jax/jaxlib (and, for --atari-env, tfdqn.envs.vector with ale-py and gymnasium), never TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys
import time

import numpy as np

from tfdqn.atomic import write_json
from tfdqn.cli import OneLineErrorParser, number, run_cli  # TensorFlow-free: argparse and errors only
from tfdqn.errors import RunFailure, UserError

INTERVALS = (1, 4, 8)  # training intervals (env steps per update) for the ceilings


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m tools.run_programs", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", metavar="DIR", help="folder written by tools/export_programs.py")
    parser.add_argument("--seconds", type=number(float), default=5.0, metavar="S", help="timed calls per program (seconds)")
    parser.add_argument("--programs", nargs="+", metavar="NAME", help="time only these programs (default: all)")
    parser.add_argument("--atari-env", action="store_true",
                        help="also step the exported ALE game with the trainer's AtariVectorEnv (needs ale-py, "
                             "gymnasium)")
    parser.add_argument("--num-envs", type=number(int), nargs="+", default=[8], metavar="N",
                        help="AtariVectorEnv sizes for --atari-env; a ceiling needs an act program of batch N")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def read_manifest(folder: pathlib.Path) -> dict:
    if not folder.is_dir():
        raise UserError(f"DIR {str(folder)!r} is not a folder; allowed: a folder written by tools/export_programs.py")
    path = folder / "manifest.json"
    if not path.is_file():
        raise UserError(f"DIR {str(folder)!r} holds no manifest.json; allowed: a folder written by "
                        f"tools/export_programs.py")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise UserError(f"{path} is not valid JSON ({error.msg}, line {error.lineno}); allowed: the manifest "
                        f"tools/export_programs.py wrote") from None


def start_jax():
    """jax with 64-bit types on: the modules take int64 counters, which jax would otherwise refuse."""
    try:
        import jax
    except ImportError as error:
        raise UserError(f"jax cannot be imported ({error}); allowed: a Python with jax installed "
                        f"(pip install jax, or jax[cuda12] for a GPU)") from None
    jax.config.update("jax_enable_x64", True)
    return jax


def xla_extension():
    """jaxlib's compiled extension, which holds the HLO-to-StableHLO converter (its name moved in 0.6)."""
    try:
        from jaxlib import _jax
        return _jax
    except ImportError:
        from jaxlib import xla_extension
        return xla_extension


def compile_module(path: pathlib.Path, device):
    """An HloModuleProto file compiled for `device` by the backend that jax uses."""
    extension = xla_extension()
    stablehlo = extension.mlir.hlo_to_stablehlo(path.read_bytes())
    return device.client.compile_and_load(stablehlo, [device], extension.CompileOptions())


def draw(recipe: dict, shape, dtype, rng: np.random.Generator) -> np.ndarray:
    """One data input from its manifest recipe (random frames, actions in range, rewards, bootstrap factors)."""
    kind = recipe["kind"]
    if kind == "integers":
        return rng.integers(recipe["low"], recipe["high"], shape).astype(dtype)
    if kind == "normal":
        return (recipe["scale"] * rng.standard_normal(shape)).astype(dtype)
    if kind == "choice":
        return rng.choice(np.asarray(recipe["values"]), shape).astype(dtype)
    if kind == "bernoulli":
        return (rng.random(shape) < recipe["p"]).astype(dtype)
    raise RunFailure(f"unknown data recipe {recipe}")


def make_data(spec: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Host arrays for the program's data inputs, drawn as its manifest says."""
    return [draw(i["generate"], i["shape"], i["dtype"], rng) for i in spec["inputs"] if not i["is_variable"]]


class Program:
    """One compiled module and its variables: `call(data)` runs it and keeps the updated variables.

    Updated variables come back as outputs (the module may donate the old buffers), so the outputs
    named in the manifest replace the variable inputs for the next call."""

    def __init__(self, spec: dict, executable, values: dict, device):
        import jax

        self.spec, self.executable, self.device = spec, executable, device
        self.variable_names = [i["name"] for i in spec["inputs"] if i["is_variable"]]
        self.variables = {name: jax.device_put(values[name], device) for name in self.variable_names}
        self.result_names = [o["name"] for o in spec["outputs"] if o["variable"] is None]
        self.updates = [(k, o["variable"]) for k, o in enumerate(spec["outputs"]) if o["variable"] is not None]
        self.calls = 0

    def put(self, data: list[np.ndarray]) -> list:
        import jax

        return [jax.device_put(array, self.device) for array in data]

    def call(self, data: list) -> list:
        """Run once on `data` (device arrays from `put`); return every output, results first."""
        arguments = [*data, *(self.variables[name] for name in self.variable_names)]
        results = self.executable.execute_sharded(arguments).disassemble_into_single_device_arrays()
        outputs = [per_device[0] for per_device in results]
        for index, name in self.updates:
            self.variables[name] = outputs[index]
        self.calls += 1
        return outputs

    def results(self, outputs: list) -> dict:
        return {name: np.asarray(value) for name, value in zip(self.result_names, outputs)}

    def variable(self, name: str) -> np.ndarray:
        return np.asarray(self.variables[name])


def load_programs(folder: pathlib.Path, names: list[str] | None = None, device=None) -> tuple[dict, dict]:
    """The manifest and a compiled `Program` per program (all, or those named), on the default device."""
    jax = start_jax()
    manifest = read_manifest(folder)
    device = device or jax.devices()[0]
    specs = {p["name"]: p for p in manifest["programs"]}
    unknown = sorted(set(names or ()) - set(specs))
    if unknown:
        raise UserError(f"--programs {unknown} not in {folder}/manifest.json; allowed: {', '.join(specs)}")
    with np.load(folder / manifest["variables_file"]) as stored:
        values = {key: stored[key] for key in stored.files}
    values.update({name: values[same] for name, same in manifest.get("variable_copies", {}).items()})
    return manifest, {name: Program(spec, compile_module(folder / spec["file"], device), values, device)
                      for name, spec in specs.items() if names is None or name in names}


def check_counters(program: Program, start: dict) -> None:
    """Each counter must have moved by its increment per call: proof that outputs are fed to the right inputs."""
    for name, step in program.spec["increments"].items():
        moved = int(program.variable(name)) - start[name]
        if moved != step * program.calls:
            raise RunFailure(f"program {program.spec['name']}: {name} moved by {moved} over {program.calls} calls, "
                             f"expected {step * program.calls}; the output-to-variable mapping is wrong")


def time_program(program: Program, seconds: float, rng: np.random.Generator) -> dict:
    """Calls/s with each call waited for; data stays on the device (its copy-in is timed separately)."""
    import jax

    host = [make_data(program.spec, rng) for _ in range(2)]
    data = [program.put(arrays) for arrays in host]
    start = {name: int(program.variable(name)) for name in program.spec["increments"]}
    outputs = jax.block_until_ready(program.call(data[0]))  # warm-up: first-run allocations
    calls, began = 0, time.perf_counter()
    while calls < 3 or time.perf_counter() - began < seconds:
        outputs = jax.block_until_ready(program.call(data[calls % 2]))
        calls += 1
    elapsed = time.perf_counter() - began
    check_counters(program, start)
    results = program.results(outputs)
    if not all(np.isfinite(value).all() for value in results.values()):
        raise RunFailure(f"program {program.spec['name']} returned a non-finite result: {results}")
    return {"calls": calls, "seconds": elapsed, "copy_in_ms": copy_in_ms(program, host[0]),
            "input_mb": sum(a.nbytes for a in host[0]) / 1e6}


def copy_in_ms(program: Program, arrays: list[np.ndarray], repeats: int = 5) -> float:
    """Milliseconds to move one call's data inputs from host memory to the device (best of a few)."""
    import jax

    best = math.inf
    for _ in range(repeats):
        began = time.perf_counter()
        jax.block_until_ready(program.put(arrays))
        best = min(best, time.perf_counter() - began)
    return 1e3 * best


def matmul_peak(device, seconds: float) -> dict:
    """Best float32 matmul rate (default precision) on `device`: the yardstick for share of peak."""
    import jax
    import jax.numpy as jnp

    n = 2048 if device.platform == "cpu" else 8192
    a, b = (jax.device_put(np.random.default_rng(i).standard_normal((n, n), np.float32), device) for i in (0, 1))
    matmul = jax.jit(jnp.matmul)
    matmul(a, b).block_until_ready()
    best, began = math.inf, time.perf_counter()
    while time.perf_counter() - began < seconds or best == math.inf:
        start = time.perf_counter()
        matmul(a, b).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return {"matmul_n": n, "dtype": "float32", "flops_per_sec": 2 * n**3 / best}


def program_row(program: Program, timing: dict, peak: float) -> dict:
    spec = program.spec
    calls_per_sec = timing["calls"] / timing["seconds"]
    achieved = calls_per_sec * spec["flops_per_call"]
    return {"program": spec["name"], "kind": spec["kind"], "batch_size": spec["batch_size"],
            "updates_per_call": spec["updates_per_call"], "env_steps_per_call": spec["env_steps_per_call"],
            "calls": timing["calls"], "calls_per_sec": calls_per_sec, "ms_per_call": 1e3 / calls_per_sec,
            "flops_per_call": spec["flops_per_call"], "achieved_flops_per_sec": achieved,
            "share_of_peak": achieved / peak, "updates_per_sec": calls_per_sec * spec["updates_per_call"],
            "input_mb": timing["input_mb"], "copy_in_ms": timing["copy_in_ms"]}


def update_rates(rows: list[dict]) -> dict:
    """Updates/s of the plain update and of the fastest fused program (with its k)."""
    plain = [r for r in rows if r["program"] == "update"]
    fused = [r for r in rows if r["kind"] == "update" and r["program"] != "update"]
    best = max(fused, key=lambda r: r["updates_per_sec"]) if fused else None
    return {"plain": plain[0]["updates_per_sec"] if plain else None,
            "fused": best["updates_per_sec"] if best else None, "fused_k": best["updates_per_call"] if best else None}


def learner_ceilings(rows: list[dict]) -> list[dict]:
    """Env steps/s the learner alone would allow at each training interval (updates/s x interval)."""
    rates = update_rates(rows)
    scale = lambda rate, interval: None if rate is None else rate * interval  # noqa: E731
    return [{"training_interval": interval, "plain_update_env_steps_per_sec": scale(rates["plain"], interval),
             "fused_env_steps_per_sec": scale(rates["fused"], interval), "fused_k": rates["fused_k"]}
            for interval in INTERVALS]


def vector_env_rate(manifest: dict, num_envs: int, seconds: float) -> float:
    """Env steps/s of the trainer's AtariVectorEnv (tfdqn.envs.vector, the exported env settings), random
    actions, one emulator thread per env up to the cores. tfdqn.envs.vector needs no TensorFlow."""
    try:
        from tfdqn.config import EnvConfig
        from tfdqn.envs.vector import AtariVector
    except ImportError as error:
        raise UserError(f"--atari-env needs ale-py, gymnasium and pyyaml ({error}); allowed: install their "
                        f"wheels (docs/experiments/gpu.md), or leave out --atari-env") from None
    vector = AtariVector(EnvConfig(**manifest["config"]["env"]), num_envs, seed=0,
                         num_threads=min(num_envs, usable_cores()))
    try:
        vector.reset()
        rng, steps, began = np.random.default_rng(0), 0, time.perf_counter()
        while steps == 0 or time.perf_counter() - began < seconds:
            vector.step(rng.integers(0, manifest["env"]["num_actions"], num_envs))
            steps += num_envs
        return steps / (time.perf_counter() - began)
    finally:
        vector.close()


def end_to_end(rows: list[dict], num_envs: int, env_rate: float) -> list[dict]:
    """Ceiling of a serial loop (step N envs, one act for N, an update every interval env steps):
    time per env step = 1/env rate + act time / N + update time / interval."""
    act = [r for r in rows if r["kind"] == "act" and r["batch_size"] == num_envs]
    rates = update_rates(rows)
    out = []
    for interval in INTERVALS:
        row = {"num_envs": num_envs, "env_steps_per_sec": env_rate, "training_interval": interval}
        for label, rate in (("plain", rates["plain"]), ("fused", rates["fused"])):
            if act and rate:
                per_step = 1 / env_rate + act[0]["ms_per_call"] / 1e3 / num_envs + 1 / (rate * interval)
                row[f"{label}_ceiling_env_steps_per_sec"] = 1 / per_step
        out.append(row)
    return out


def usable_cores() -> int:
    """Cores this process may run on (a container's share, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def describe_device(device) -> str:
    """`gpu: NVIDIA H100 80GB HBM3`, or `cpu (2 cores)`."""
    if device.platform == "cpu":
        return f"cpu ({usable_cores()} cores)"
    return f"{device.platform}: {getattr(device, 'device_kind', 'unknown kind')}"


def markdown(report: dict) -> str:
    """The tables of timings.md (and stdout)."""
    lines = [f"device: {report['device']}; jax {report['jax_version']}; each call waited for; "
             f"{report['seconds_per_program']:g} s of calls per program",
             f"matmul peak: {report['peak']['flops_per_sec'] / 1e9:,.1f} GFLOP/s (float32 {report['peak']['matmul_n']}"
             f"x{report['peak']['matmul_n']}, default precision)", "",
             "| program | calls/s | ms/call | GFLOP/call | GFLOP/s | share of peak | updates/s | copy-in ms |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["programs"]:
        updates = f"{r['updates_per_sec']:,.1f}" if r["kind"] == "update" else "-"
        lines.append(f"| {r['program']} | {r['calls_per_sec']:,.1f} | {r['ms_per_call']:.3f} | "
                     f"{r['flops_per_call'] / 1e9:.3f} | {r['achieved_flops_per_sec'] / 1e9:,.1f} | "
                     f"{100 * r['share_of_peak']:.1f}% | {updates} | {r['copy_in_ms']:.3f} |")
    fmt = lambda v: "-" if v is None else f"{v:,.0f}"  # noqa: E731
    lines += ["", "Env steps/s the learner alone allows (updates/s x training_interval):", "",
              "| training_interval | plain update | best fused (k) |", "|---|---|---|"]
    for c in report["learner_ceilings"]:
        lines.append(f"| {c['training_interval']} | {fmt(c['plain_update_env_steps_per_sec'])} | "
                     f"{fmt(c['fused_env_steps_per_sec'])} ({c['fused_k']}) |")
    if report.get("end_to_end"):
        lines += ["", "Serial-loop ceiling with AtariVectorEnv (1/env rate + act/N + update/interval per env step):",
                  "", "| envs | env steps/s alone | training_interval | ceiling, plain update | ceiling, best fused |",
                  "|---|---|---|---|---|"]
        for e in report["end_to_end"]:
            lines.append(f"| {e['num_envs']} | {e['env_steps_per_sec']:,.0f} | {e['training_interval']} | "
                         f"{fmt(e.get('plain_ceiling_env_steps_per_sec'))} | "
                         f"{fmt(e.get('fused_ceiling_env_steps_per_sec'))} |")
    return "\n".join(lines) + "\n"


def run(folder: pathlib.Path, seconds: float, names: list[str] | None = None, atari_envs: list[int] = ()) -> dict:
    """Compile, time and check every program; write timings.json and timings.md; return the report."""
    jax = start_jax()
    manifest, programs = load_programs(folder, names)
    device = jax.devices()[0]
    peak = matmul_peak(device, min(seconds, 2.0))
    rng = np.random.default_rng(0)
    rows = [program_row(p, time_program(p, seconds, rng), peak["flops_per_sec"]) for p in programs.values()]
    report = {"device": describe_device(device), "jax_version": jax.__version__, "seconds_per_program": seconds,
              "env_id": manifest["env"]["id"], "peak": peak, "programs": rows,
              "learner_ceilings": learner_ceilings(rows)}
    if atari_envs:
        report["end_to_end"] = [row for n in atari_envs
                                for row in end_to_end(rows, n, vector_env_rate(manifest, n, seconds))]
    write_json(folder / "timings.json", report)
    (folder / "timings.md").write_text(markdown(report))
    return report


def _main(args: argparse.Namespace) -> int:
    if not args.seconds > 0:
        raise UserError(f"--seconds {args.seconds} is not positive; allowed: seconds > 0, e.g. --seconds 5")
    folder = pathlib.Path(args.dir)
    manifest = read_manifest(folder)
    if args.atari_env and not manifest["env"]["is_atari"]:
        raise UserError(f"--atari-env needs an ALE game; {folder} holds {manifest['env']['id']}")
    if args.atari_env and min(args.num_envs) < 1:
        raise UserError(f"--num-envs {args.num_envs} must be positive; allowed: e.g. --num-envs 8")
    report = run(folder, args.seconds, args.programs, args.num_envs if args.atari_env else ())
    print(markdown(report), end="")
    print(f"wrote {folder / 'timings.json'} and {folder / 'timings.md'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(build_parser(), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
