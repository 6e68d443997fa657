"""Export the XLA programs tfdqn runs (act, one update, fused k updates) for a host without TensorFlow.

    python -m tools.export_programs [--env Breakout] [--set key=value ...] --out DIR
                                    [--act-batches 1 8 64] [--fused-k 1 2 4 8]

Builds the agent from the config the trainer uses for --env, and XLA-compiles the same Python
functions that `agent.actor.act_function`, `agent.learner.update_function` and
`agent.learner.update_many_function` trace.
Writes, into DIR:
  <program>.hlo.pb   the HloModuleProto that TensorFlow's XLA bridge builds for the program; its
                     parameters are the data inputs, then every variable the graph captures
  variables.npz      the starting value of every captured variable, by name
  manifest.json      per program: inputs (shape, dtype, variable or data, how to draw the data),
                     outputs and the variable each one updates, FLOPs per call from the layer shapes
`python -m tools.run_programs DIR` compiles and times them with jax alone.
"""

from __future__ import annotations

import argparse
import inspect
import pathlib
import sys

import numpy as np

from tfdqn import config as config_lib
from tfdqn.atomic import write_json
from tfdqn.cli import OneLineErrorParser, number, run_cli, start_tensorflow
from tfdqn.errors import RunFailure, UserError

MANIFEST_FORMAT = 2
# XLA's element types as NumPy dtype names (bfloat16 as jax and ml_dtypes spell it).
XLA_DTYPES = {"PRED": "bool", "S8": "int8", "S16": "int16", "S32": "int32", "S64": "int64", "U8": "uint8",
              "U16": "uint16", "U32": "uint32", "U64": "uint64", "F16": "float16", "BF16": "bfloat16",
              "F32": "float32", "F64": "float64"}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m tools.export_programs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Breakout", help="env name or id, as for tfdqn.train (default Breakout)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any config key")
    parser.add_argument("--preset", metavar="NAME", help="a recipe, as for tfdqn.train (rainbow exports the Rainbow "
                                                         "update: C51, noisy dueling head, importance weights)")
    parser.add_argument("--act-batches", type=number(int), nargs="+", default=[1, 8, 64], metavar="B",
                        help="observations per act call, one act program each")
    parser.add_argument("--fused-k", type=number(int), nargs="+", default=[1, 2, 4, 8], metavar="K",
                        help="updates per update_many call, one fused program each")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the modules and manifest.json")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def make_config(env: str, sets: list[str], preset: str | None = None) -> config_lib.DQNConfig:
    """The trainer's config for `env`: the same file choice, preset and overrides as `python -m tfdqn.train`."""
    return config_lib.resolve_config([], {**config_lib.parse_set(sets), "env.id": env}, preset)


def build_agent(config: config_lib.DQNConfig):
    """The agent and env spec exactly as training builds them (the env is made only for its spec)."""
    from tfdqn.agent.agent import make_agent
    from tfdqn.envs.make import make_env

    env, spec = make_env(config.env, seed=config.run.seed)
    env.close()
    return make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions), spec


def named_variables(agent) -> dict:
    """Every variable a program can capture, under a name that says whose it is."""
    named = {f"online/{v.path}": v for v in agent.online.variables}
    named.update({f"target/{v.path}": v for v in agent.target.variables})
    named.update({f"optimizer/{v.path}": v for v in agent.learner.optimizer.variables})
    learner = agent.learner
    named.update({"learner/updates": learner.updates, "learner/first_nonfinite_update": learner.first_nonfinite_update,
                  "learner/first_nonfinite_env_step": learner.first_nonfinite_env_step,
                  "actor/env_steps": agent.actor.env_steps, "actor/rng_state": agent.actor.generator.state,
                  "learner/rng_state": learner.generator.state})
    return named


def data_recipes(spec, program_kind: str) -> dict:
    """How a runner draws each data input: what the replay or the env would feed, in range and dtype."""
    observation = ({"kind": "integers", "low": 0, "high": 256} if spec.frame_dtype == np.uint8
                   else {"kind": "normal", "scale": 1.0})
    if program_kind == "act":
        return {"observation": observation}
    return {"observation": observation, "next_observation": observation,
            "action": {"kind": "integers", "low": 0, "high": spec.num_actions},
            "reward": {"kind": "choice", "values": [-1.0, 0.0, 1.0]},
            "bootstrap": {"kind": "bernoulli", "p": 0.99},
            "weight": {"kind": "choice", "values": [0.25, 0.5, 1.0]}}  # importance weights, at most 1


def data_names(function) -> list[str]:
    """The data inputs' names: the Python function's parameter names (`observation`, `action`, ...)."""
    return list(inspect.signature(function.python_function).parameters)


def example_data(function, shapes: list) -> list:
    """Zero-filled data inputs: the XLA bridge compiles only static shapes, so it needs concrete ones."""
    return [np.zeros(shape, spec.dtype.as_numpy_dtype) for spec, shape in zip(function.input_signature, shapes)]


def xla_function(function):
    """The same Python function, traced again with XLA on: the export does not depend on the
    `compute.*_jit_compile` settings, and TensorFlow's own (unchanged) function stays the reference."""
    import tensorflow as tf

    return tf.function(function.python_function, input_signature=function.input_signature, jit_compile=True)


def written_captures(concrete) -> set[int]:
    """Indices of the captured variables that the graph assigns to: the bridge returns their new values."""
    from tensorflow.python.framework import auto_control_deps_utils as acd

    index = {id(placeholder): i for i, placeholder in enumerate(concrete.graph.internal_captures)}
    written = set()
    for op in concrete.graph.get_operations():
        written.update(index[id(t)] for t in acd.get_read_write_resource_inputs(op)[1] if id(t) in index)
    return written


def hlo_signature(hlo: bytes) -> tuple[list, list]:
    """(parameters, results) of the module's entry computation as (shape, dtype) pairs."""
    from tensorflow.compiler.xla import xla_data_pb2
    from tensorflow.compiler.xla.service import hlo_pb2

    program_shape = hlo_pb2.HloModuleProto.FromString(hlo).host_program_shape
    pair = lambda s: (list(s.dimensions), XLA_DTYPES[xla_data_pb2.PrimitiveType.Name(s.element_type)])  # noqa: E731
    result = program_shape.result
    results = result.tuple_shapes if result.element_type == xla_data_pb2.TUPLE else [result]
    return [pair(s) for s in program_shape.parameters], [pair(s) for s in results]


def result_names(structured) -> list[str]:
    """Names of the function's results in the order the module returns them (dict keys sorted, as tf.nest)."""
    return sorted(structured) if isinstance(structured, dict) else ["actions"]


def capture_names(concrete, variables: dict, name: str, values: dict) -> list[str]:
    """The variable name of each captured input; a captured constant is stored under the program's name."""
    by_handle = {id(v.handle): key for key, v in variables.items()}
    names = []
    for i, tensor in enumerate(concrete.captured_inputs):
        key = by_handle.get(id(tensor))
        if key is None:
            if tensor.dtype.name == "resource":
                raise RunFailure(f"program {name} captures a variable that tfdqn does not name ({tensor})")
            key = f"captured/{name}/{i}"
            values[key] = tensor.numpy()
        names.append(key)
    return names


def check_signature(name: str, inputs: list, outputs: list, traced: list, hlo: bytes) -> list:
    """Fill in the results' static shapes from the module, after checking that it takes and returns
    exactly what the manifest says (a misfed module would run and time the wrong thing)."""
    import tensorflow as tf

    parameters, results = hlo_signature(hlo)
    expected = [(i["shape"], i["dtype"]) for i in inputs]
    matches = (parameters == expected and len(results) == len(outputs)
               and all(tf.TensorShape(t.shape).is_compatible_with(shape) and t.dtype.name == dtype
                       for t, (shape, dtype) in zip(traced, results))
               and all((o["shape"], o["dtype"]) == r for o, r in zip(outputs[len(traced):], results[len(traced):])))
    if not matches:
        raise RunFailure(f"program {name}: module signature {parameters} -> {results} differs from the traced "
                         f"function's {expected} -> {[(o['shape'], o['dtype']) for o in outputs]}")
    for output, (shape, _) in zip(outputs, results):
        output["shape"] = shape
    return outputs


def without_copies(serialized: bytes) -> bytes:
    """The module with each `copy` replaced by its operand wherever it is used.

    The bridge copies each updated variable's new value before returning it (the outputs that alias an input).
    Before layout assignment a copy is an identity, and jaxlib 0.11's HLO-to-StableHLO converter refuses it
    (StableHLO has no copy op).
    """
    from tensorflow.compiler.xla.service import hlo_pb2

    module = hlo_pb2.HloModuleProto.FromString(serialized)
    for computation in module.computations:
        source = {i.id: i.operand_ids[0] for i in computation.instructions if i.opcode == "copy"}

        def resolve(instruction_id: int) -> int:
            while instruction_id in source:
                instruction_id = source[instruction_id]
            return instruction_id

        kept = [i for i in computation.instructions if i.opcode != "copy"]
        for instruction in kept:
            instruction.operand_ids[:] = [resolve(o) for o in instruction.operand_ids]
            instruction.control_predecessor_ids[:] = sorted({resolve(c) for c in instruction.control_predecessor_ids})
        computation.root_id = resolve(computation.root_id)
        del computation.instructions[:]
        computation.instructions.extend(kept)
    return module.SerializeToString()


def export_program(function, data: list, variables: dict, values: dict, out: pathlib.Path, name: str) -> dict:
    """Write `name`.hlo.pb and return its manifest entry: inputs, outputs and which variable each output updates."""
    import tensorflow as tf

    compiled = xla_function(function)
    tensors = [tf.constant(array) for array in data]
    concrete = compiled.get_concrete_function(*tensors)
    hlo = compiled.experimental_get_compiler_ir(*tensors)(stage="hlo_serialized")
    names = capture_names(concrete, variables, name, values)
    for key in names:
        values.setdefault(key, variables[key].numpy())
    inputs = [{"name": key, "shape": list(array.shape), "dtype": array.dtype.name, "is_variable": False}
              for key, array in zip(data_names(function), data)]
    inputs += [{"name": key, "shape": list(values[key].shape), "dtype": values[key].dtype.name, "is_variable": True}
               for key in names]
    traced = tf.nest.flatten(concrete.structured_outputs)
    outputs = [{"name": key, "shape": None, "dtype": t.dtype.name, "variable": None}
               for key, t in zip(result_names(concrete.structured_outputs), traced)]
    for index in sorted(written_captures(concrete)):  # the bridge appends updated variables in parameter order
        entry = inputs[len(data) + index]
        outputs.append({"name": entry["name"], "shape": entry["shape"], "dtype": entry["dtype"],
                        "variable": entry["name"], "input_index": len(data) + index})
    outputs = check_signature(name, inputs, outputs, traced, hlo)
    (out / f"{name}.hlo.pb").write_bytes(without_copies(hlo))
    return {"name": name, "file": f"{name}.hlo.pb", "inputs": inputs, "outputs": outputs}


def program_plan(agent, config, spec, act_batches: list[int], fused_ks: list[int]) -> list[dict]:
    """Each program to export: its function, data shapes, FLOPs per call and what one call advances."""
    from tfdqn.telemetry.flops import forward_flops, update_flops

    batch, observation = config.replay.batch_size, list(spec.observation_shape)
    one_update = update_flops(agent.online, batch, config.learner.double_dqn)
    update_shapes = [[batch, *observation], [batch], [batch], [batch], [batch, *observation], [batch]]
    plan = [{"name": f"act_b{b}", "kind": "act", "function": agent.actor.act_function, "shapes": [[b, *observation]],
             "batch_size": b, "env_steps_per_call": b, "updates_per_call": 0,
             "flops_per_call": forward_flops(agent.online, b), "increments": {}}  # act reads the step count
            for b in act_batches]
    plan.append({"name": "update", "kind": "update", "function": agent.learner.update_function, "shapes": update_shapes,
                 "batch_size": batch, "env_steps_per_call": 0, "updates_per_call": 1, "flops_per_call": one_update,
                 "increments": {"learner/updates": 1}})
    plan += [{"name": f"update_k{k}", "kind": "update", "function": agent.learner.update_many_function,
              "shapes": [[k, *shape] for shape in update_shapes], "batch_size": batch, "env_steps_per_call": 0,
              "updates_per_call": k, "flops_per_call": k * one_update, "increments": {"learner/updates": k}}
             for k in fused_ks]
    return plan


def distinct_values(values: dict) -> tuple[dict, dict]:
    """The values to store and {name: stored name} for each starting value equal to an earlier one: a target
    network starts as a copy of the online one, and storing it once halves what travels to a device host."""
    stored, copies, first = {}, {}, {}
    for name, value in values.items():
        key = (value.dtype.str, value.shape, value.tobytes())
        if key in first:
            copies[name] = first[key]
        else:
            first[key] = name
            stored[name] = value
    return stored, copies


def export_programs(agent, config, spec, out: pathlib.Path, act_batches: list[int], fused_ks: list[int]) -> dict:
    """Write every program, variables.npz and manifest.json into `out`; return the manifest."""
    import tensorflow as tf

    out.mkdir(parents=True, exist_ok=True)
    variables, values, programs = named_variables(agent), {}, []
    for item in program_plan(agent, config, spec, act_batches, fused_ks):
        function = item.pop("function")
        entry = export_program(function, example_data(function, item.pop("shapes")), variables, values, out,
                               item["name"])
        recipes = data_recipes(spec, item["kind"])
        for field in entry["inputs"]:
            if not field["is_variable"]:
                field["generate"] = recipes[field["name"]]
        programs.append({**item, **entry})
    stored, copies = distinct_values(values)
    np.savez_compressed(out / "variables.npz", **stored)
    manifest = {"format": MANIFEST_FORMAT, "tensorflow_version": tf.__version__, "x64": True,
                "env": {"id": spec.env_id, "is_atari": spec.is_atari, "observation_shape": list(spec.observation_shape),
                        "frame_dtype": np.dtype(spec.frame_dtype).name, "num_actions": spec.num_actions},
                "config": config_lib.to_dict(config), "variables_file": "variables.npz",
                "variable_copies": copies, "programs": programs}
    write_json(out / "manifest.json", manifest)
    return manifest


def _check_counts(name: str, values: list[int]) -> None:
    if not values or min(values) < 1:
        raise UserError(f"{name} {values} must list positive integers; allowed: e.g. {name} 1 8 64")


def _main(args: argparse.Namespace) -> int:
    _check_counts("--act-batches", args.act_batches)
    _check_counts("--fused-k", args.fused_k)
    config = make_config(args.env, args.set, args.preset)
    start_tensorflow()
    agent, spec = build_agent(config)
    out = pathlib.Path(args.out)
    manifest = export_programs(agent, config, spec, out, args.act_batches, args.fused_k)
    print("| program | inputs | outputs (variables updated) | MFLOP per call |\n|---|---|---|---|")
    for p in manifest["programs"]:
        updated = sum(o["variable"] is not None for o in p["outputs"])
        print(f"| {p['name']} | {len(p['inputs'])} | {len(p['outputs'])} ({updated}) | "
              f"{p['flops_per_call'] / 1e6:,.1f} |")
    print(f"wrote {len(manifest['programs'])} programs, variables.npz and manifest.json to {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(build_parser(), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
