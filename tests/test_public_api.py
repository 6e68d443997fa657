"""The names and modules the documentation promises: each imports from where the docs say and is what it claims,
the command lines and subcommands exist, `import tfdqn` starts no TensorFlow, and checkpoints pickled before the
config package split still find their classes."""

import ast
import functools
import importlib
import importlib.metadata
import inspect
import json
import pickle
import subprocess
import sys

import pytest

import tfdqn
from tests.conftest import REPO
from tests.test_cli import _entry_points
from tfdqn import command
from tfdqn import config as config_lib
from tfdqn.errors import UserError

DOCUMENTED_COMMAND_LINES = ("tfdqn.train", "tfdqn.evaluate", "tfdqn.export", "tfdqn.tune",
                            "tfdqn.telemetry.system_monitor")
DOCUMENTED_SUBCOMMANDS = ("train", "evaluate", "export", "tune", "compare", "time-to-score", "atari100k", "aggregate")

FRESH_IMPORT = """
import importlib.metadata, inspect, json, sys
import tfdqn
facts = {"tensorflow_after_import": "tensorflow" in sys.modules, "train_is_function": inspect.isfunction(tfdqn.train),
         "load_policy_is_function": inspect.isfunction(tfdqn.load_policy),
         "version_is_installed": tfdqn.__version__ == importlib.metadata.version("tfdqn")}
from tfdqn import DQNConfig, load_policy, train
import tfdqn.config
facts["dqnconfig_is_config_package_s"] = DQNConfig is tfdqn.config.DQNConfig
facts["names_are_the_attributes"] = train is tfdqn.train and load_policy is tfdqn.load_policy
import tfdqn.policy.locate, tfdqn.policy.numpy_policy, tfdqn.policy.litert, tfdqn.cli, tfdqn.evaluate, tfdqn.export
facts["tensorflow_after_light_modules"] = "tensorflow" in sys.modules
print(json.dumps(facts))
"""


def test_import_tfdqn_starts_no_tensorflow_and_gives_the_documented_names():
    result = subprocess.run([sys.executable, "-c", FRESH_IMPORT], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "tensorflow_after_import": False, "train_is_function": True, "load_policy_is_function": True,
        "version_is_installed": True, "dqnconfig_is_config_package_s": True, "names_are_the_attributes": True,
        "tensorflow_after_light_modules": False}


def test_the_public_names_are_what_they_claim():
    assert sorted(tfdqn.__all__) == ["DQNConfig", "load_policy", "train"]
    assert tfdqn.DQNConfig is config_lib.DQNConfig
    assert tfdqn.DQNConfig.for_env("CartPole", {"run.total_steps": 3000}).run.total_steps == 3000
    assert issubclass(tfdqn.errors.UserError, Exception) and tfdqn.errors.UserError is UserError
    with pytest.raises(UserError, match=r"run.total_steps = 0 is out of range"):
        tfdqn.DQNConfig.for_env("CartPole", {"run.total_steps": 0})
    with pytest.raises(AttributeError):
        tfdqn.NoSuchName  # noqa: B018


def test_load_policy_refuses_a_folder_that_holds_no_run_or_policy(tmp_path):
    with pytest.raises(UserError, match=r"holds no config.yaml; allowed: a run folder"):
        tfdqn.load_policy(tmp_path)


def test_every_documented_command_line_is_an_entry_point_with_a_main():
    entry_points = {argv[1] for argv in _entry_points()}
    for name in DOCUMENTED_COMMAND_LINES:
        assert name in entry_points, name
        assert callable(importlib.import_module(name).main), name


@pytest.mark.parametrize("name", DOCUMENTED_SUBCOMMANDS)
def test_each_subcommand_runs_its_modules_main_under_its_own_name(name, capsys):
    module = importlib.import_module(command.SUBCOMMANDS[name][0])
    assert {"argv", "prog"} <= set(inspect.signature(module.main).parameters)
    try:
        code = command.main([name, "--help"])
    except SystemExit as ended:  # argparse's own --help exits; train's, with every config key, returns
        code = ended.code
    assert code == 0
    assert capsys.readouterr().out.startswith(f"usage: tfdqn {name} ")


def test_the_config_package_exports_each_name_from_the_module_that_defines_it():
    tree = ast.parse((REPO / "tfdqn" / "config" / "__init__.py").read_text())
    imported = {alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert imported == set(config_lib.__all__)  # explicit imports, so static readers (griffe) resolve each name
    for name in config_lib.__all__:
        value = getattr(config_lib, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.startswith("tfdqn.config."), name
            assert getattr(importlib.import_module(value.__module__), name) is value, name


def test_importing_the_networks_registers_tfdqns_keras_layers():
    import keras

    import tfdqn.agent.networks  # noqa: F401 - what the policy folder's docs say to do before load_model
    from tfdqn.agent.noisy import NoisyDense

    assert keras.saving.get_registered_object("tfdqn>NoisyDense") is NoisyDense


def test_a_collector_state_pickled_before_the_config_package_split_still_loads():
    """A checkpoint's state-S.pkl holds the vector env's makers, partials over an EnvConfig; one written before
    tfdqn/config.py became a package names `tfdqn.config.EnvConfig` and `tfdqn.config.EnvKwargs`."""
    from tfdqn.envs.vector import _make_one

    maker = functools.partial(_make_one, config_lib.EnvConfig(kwargs=config_lib.EnvKwargs.of({"sutton_barto": True})),
                              7)
    now = pickle.dumps(maker, protocol=2)  # protocol 2 names classes as text: "module\nname\n"
    assert b"tfdqn.config.schema\nEnvConfig\n" in now
    before = now.replace(b"tfdqn.config.schema\n", b"tfdqn.config\n")
    loaded = pickle.loads(before)
    assert loaded.func is _make_one and loaded.args == maker.args
