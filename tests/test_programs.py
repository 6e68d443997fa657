"""The exported XLA programs (tools.export_programs) run under jax alone (tools.run_programs) and
compute what TensorFlow computes: the same loss and the same updated variables from the same start."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO
from tools import export_programs, run_programs

# jax (XLA:CPU) against TensorFlow's own update (its default, non-XLA kernels): float32 sums in another
# order differ by a few ulps; after Adam's first steps the weights agree to this tolerance (docs/experiments/gpu.md).
RTOL, ATOL = 1e-4, 1e-6


def draw_data(manifest: dict, name: str, seed: int) -> list[np.ndarray]:
    spec = next(p for p in manifest["programs"] if p["name"] == name)
    return run_programs.make_data(spec, np.random.default_rng(seed))


def tf_state(variables: dict) -> dict:
    return {name: np.array(v.numpy()) for name, v in variables.items()}


def restore(variables: dict, state: dict) -> None:
    for name, value in state.items():
        variables[name].assign(value)


def first_kernels(agent) -> tuple[str, str]:
    """Manifest names of the online and target nets' first kernels (Keras numbers layers per process)."""
    return f"online/{agent.online.variables[0].path}", f"target/{agent.target.variables[0].path}"


def assert_same_state(program, tf_after: dict) -> None:
    """Every variable the program updates equals TensorFlow's value after the same update(s)."""
    updated = [o["variable"] for o in program.spec["outputs"] if o["variable"] is not None]
    assert "learner/updates" in updated or "actor/rng_state" in updated  # act reads the step count, moves its RNG
    for name in updated:
        np.testing.assert_allclose(program.variable(name), tf_after[name], rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.fixture(scope="module")
def atari(tmp_path_factory):
    """A Breakout agent whose target differs from its online net (so swapped inputs would show), a target
    copy every 2 updates (so the fused k=2 program runs the in-graph sync), exported before any update."""
    config = export_programs.make_config("Breakout", ["learner.target_update_period=2", "replay.capacity=1000"])
    agent, spec = export_programs.build_agent(config)
    for variable in agent.target.variables:
        variable.assign(variable * 0.5)
    out = tmp_path_factory.mktemp("atari_programs")
    manifest = export_programs.export_programs(agent, config, spec, out, act_batches=[2], fused_ks=[2])
    variables = export_programs.named_variables(agent)
    return agent, variables, tf_state(variables), manifest, out


@pytest.mark.slow
def test_exported_update_matches_tensorflow(atari):
    agent, variables, start, manifest, out = atari
    restore(variables, start)
    data = draw_data(manifest, "update", seed=1)
    tf_metrics = agent.learner.update(*data)
    _, programs = run_programs.load_programs(out, ["update"])
    program = programs["update"]
    results = program.results(program.call(program.put(data)))
    assert results["td_loss"] == pytest.approx(float(tf_metrics["td_loss"]), rel=RTOL)
    assert results["q_values"] == pytest.approx(float(tf_metrics["q_values"]), rel=RTOL, abs=ATOL)
    assert_same_state(program, tf_state(variables))
    assert program.variable("learner/updates") == 1
    online, _ = first_kernels(agent)
    assert not np.allclose(program.variable(online), start[online])


@pytest.mark.slow
def test_fused_program_matches_k_tensorflow_updates(atari):
    agent, variables, start, manifest, out = atari
    restore(variables, start)
    data = draw_data(manifest, "update_k2", seed=2)
    for i in range(2):
        tf_metrics = agent.learner.update(*(array[i] for array in data))
    tf_after = tf_state(variables)
    online, target = first_kernels(agent)
    np.testing.assert_array_equal(tf_after[target], tf_after[online])  # the sync ran inside the 2 updates
    _, programs = run_programs.load_programs(out, ["update_k2"])
    program = programs["update_k2"]
    results = program.results(program.call(program.put(data)))
    assert results["td_loss"] == pytest.approx(float(tf_metrics["td_loss"]), rel=RTOL)
    assert_same_state(program, tf_after)
    assert program.variable("learner/updates") == 2


@pytest.mark.slow
def test_cartpole_mlp_update_and_fused_update_match_tensorflow(tmp_path):
    """Float32 vector observations and the MLP: one update, and 2 fused updates against 2 TF updates."""
    config = export_programs.make_config("CartPole", [])
    agent, spec = export_programs.build_agent(config)
    manifest = export_programs.export_programs(agent, config, spec, tmp_path, act_batches=[], fused_ks=[2])
    variables = export_programs.named_variables(agent)
    start = tf_state(variables)
    _, programs = run_programs.load_programs(tmp_path)
    for name, k in (("update", 1), ("update_k2", 2)):
        restore(variables, start)
        data = draw_data(manifest, name, seed=3)
        for batch in ([data] if k == 1 else [[array[i] for array in data] for i in range(k)]):
            tf_metrics = agent.learner.update(*batch)
        program = programs[name]
        results = program.results(program.call(program.put(data)))
        assert results["td_loss"] == pytest.approx(float(tf_metrics["td_loss"]), rel=RTOL)
        assert_same_state(program, tf_state(variables))
        assert program.variable("learner/updates") == k


@pytest.mark.slow
def test_exported_act_matches_tensorflow(atari):
    """Same observations, same RNG state: the same actions and the same advanced RNG; the step count only read."""
    agent, variables, start, manifest, out = atari
    restore(variables, start)
    _, programs = run_programs.load_programs(out, ["act_b2"])
    program = programs["act_b2"]
    for seed in range(3):
        data = draw_data(manifest, "act_b2", seed=seed)
        actions = program.results(program.call(program.put(data)))["actions"]
        np.testing.assert_array_equal(actions, agent.actor.act(*data).numpy())
    assert_same_state(program, tf_state(variables))
    assert program.variable("actor/env_steps") == start["actor/env_steps"]


@pytest.mark.slow
def test_manifest_maps_outputs_to_variables_and_counts_flops(atari):
    agent, _, start, manifest, out = atari
    from tfdqn.telemetry.flops import forward_flops, update_flops

    programs = {p["name"]: p for p in manifest["programs"]}
    assert set(programs) == {"act_b2", "update", "update_k2"}
    one_update = update_flops(agent.online, 32, double_dqn=True)
    assert programs["update_k2"]["flops_per_call"] == 2 * programs["update"]["flops_per_call"] == 2 * one_update
    assert programs["act_b2"]["flops_per_call"] == forward_flops(agent.online, 2)
    update = programs["update"]
    assert [i["name"] for i in update["inputs"][:5]] == ["observation", "action", "reward", "bootstrap",
                                                          "next_observation"]
    for output in update["outputs"]:
        if output["variable"] is not None:
            assert update["inputs"][output["input_index"]]["name"] == output["variable"]
    updated = {o["variable"] for o in update["outputs"]}
    optimizer = agent.learner.optimizer  # Keras numbers optimizers per process: adam, adam_1, ...
    learning_rate, iteration = (f"optimizer/{v.path}" for v in (optimizer.learning_rate, optimizer.iterations))
    assert {learning_rate, "actor/env_steps"}.isdisjoint(updated)  # read, never written
    assert {"learner/updates", iteration, first_kernels(agent)[1]} <= updated
    stored, copies = np.load(out / "variables.npz"), manifest["variable_copies"]
    names = {i["name"] for p in programs.values() for i in p["inputs"] if i["is_variable"]}
    assert names <= set(stored.files) | set(copies) and set(copies.values()) <= set(stored.files)
    assert set(copies).isdisjoint(stored.files)
    assert len(copies) >= 10  # Adam's zero slots, the zero biases: each value stored once
    for name in names:  # what the runner rebuilds is every variable's starting value
        np.testing.assert_array_equal(stored[copies.get(name, name)], start[name], err_msg=name)


def test_export_forwards_the_bridges_copies():
    """tf2xla copies an updated variable's value before returning it; the written module uses the value itself
    (jaxlib 0.11 cannot convert a copy to StableHLO). The equivalence tests above run such modules."""
    import tensorflow as tf
    from tensorflow.compiler.xla.service import hlo_pb2

    counter = tf.Variable(np.zeros(3, np.int64))

    @tf.function(jit_compile=True)
    def step(x):
        counter.assign_add(tf.ones(3, tf.int64))
        return x * 2.0

    raw = step.experimental_get_compiler_ir(tf.constant([1.0, 2.0]))(stage="hlo_serialized")

    def entry(serialized: bytes):
        module = hlo_pb2.HloModuleProto.FromString(serialized)
        computation = next(c for c in module.computations if c.id == module.entry_computation_id)
        return {i.id: i for i in computation.instructions}, computation.root_id

    before, root = entry(raw)
    copies = {i.id: i.operand_ids[0] for i in before.values() if i.opcode == "copy"}
    assert copies and set(copies) <= set(before[root].operand_ids)
    after, root_after = entry(export_programs.without_copies(raw))
    assert all(i.opcode != "copy" for i in after.values())
    assert after[root_after].operand_ids == [copies.get(o, o) for o in before[root].operand_ids]
    assert set(after) == set(before) - set(copies)


@pytest.mark.slow
def test_run_programs_without_tensorflow(atari, tmp_path):
    """The runner as a real subprocess, `python -m tools.run_programs` from a copy of the repository's tfdqn/ and
    tools/ (as on a jax-only host, where tfdqn is not installed), on a path where `import tensorflow` fails, and
    so does importing the replay codecs' libraries, which such a host lacks too."""
    out = atari[4]
    for package in ("tensorflow", "lz4", "zstandard"):
        blocker = tmp_path / "blocked" / package
        blocker.mkdir(parents=True)
        (blocker / "__init__.py").write_text(f"raise ImportError('{package} is blocked in this test')\n")
    env = {**os.environ, "PYTHONPATH": str(blocker.parent)}
    probe = subprocess.run([sys.executable, "-c", "import tensorflow"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "blocked" in probe.stderr
    copy = tmp_path / "copy"
    for folder in ("tfdqn", "tools"):
        shutil.copytree(REPO / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    # 0.05 s, not 0.3, of timed calls per program (each still times >= 3 calls), of the env and of the matmul
    # yardstick: the report's figures are only checked to be there and sane, and busy-timed seconds are CPU work
    result = subprocess.run([sys.executable, "-m", "tools.run_programs", str(out), "--seconds", "0.05",
                             "--atari-env", "--num-envs", "2"], cwd=copy, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "timings.json").read_text())
    assert {"device", "peak", "programs", "learner_ceilings", "end_to_end"} <= set(report)
    assert [r["program"] for r in report["programs"]] == ["act_b2", "update", "update_k2"]
    for row in report["programs"]:
        assert row["calls_per_sec"] > 0 and 0 < row["share_of_peak"] < 2
    assert [c["training_interval"] for c in report["learner_ceilings"]] == [1, 4, 8]
    assert report["learner_ceilings"][1]["plain_update_env_steps_per_sec"] == pytest.approx(
        4 * report["programs"][1]["updates_per_sec"])
    assert all("fused_ceiling_env_steps_per_sec" in row for row in report["end_to_end"])
    assert "| update_k2 |" in (out / "timings.md").read_text() and "| update |" in result.stdout


@pytest.mark.parametrize("args, message", [(["/nonexistent/programs"], "is not a folder"),
                                           (["{tmp}"], "holds no manifest.json"),
                                           (["{tmp}", "--seconds", "0"], "is not positive")])
def test_run_programs_errors_are_one_line(tmp_path, args, message):
    args = [a.format(tmp=tmp_path) for a in args]
    result = subprocess.run([sys.executable, "-m", "tools.run_programs", *args], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("python -m tools.run_programs: error: ") and message in result.stderr
