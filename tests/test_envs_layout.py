"""tfdqn.envs: small modules with short functions, and the names the training loop uses importable as before."""

import ast
import pathlib

import tfdqn.envs

ENVS = pathlib.Path(tfdqn.envs.__file__).parent


def test_no_function_in_tfdqn_envs_is_longer_than_60_lines():
    long = []
    for path in sorted(ENVS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 60:
                    long.append(f"{path.name}:{node.name} ({length} lines)")
    assert not long


def test_the_loops_names_stay_importable():
    import tfdqn.envs.make as make
    import tfdqn.envs.vector as vector

    for name in ("EnvSpec", "make_env", "describe_protocol", "resolve_env_id", "is_atari_id", "GameOverInfo",
                 "LifeLossTerminal", "FireOnReset", "SeedOnFirstReset"):
        assert callable(getattr(make, name)), name
    for name in ("VectorStep", "SingleEnv", "GymVectorEnv", "AtariVector", "ale_game_name", "make_vector_env"):
        assert callable(getattr(vector, name)), name
    assert vector.VectorStep._fields == ("next_frames", "reward", "terminated", "truncated", "final_frames", "games")


def test_no_module_claims_an_evaluation_seed_offset():
    """The run code owns evaluation seeds; tfdqn.envs names no offset for them."""
    for path in ENVS.glob("*.py"):
        assert "10_000" not in path.read_text() and "10000" not in path.read_text(), path.name
