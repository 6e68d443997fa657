"""cluster/aws.yaml, the Ray cluster launcher recipe, passes the validation `ray up` runs before it starts
anything (Ray's own schema, after filling in the provider's defaults), and the tfdqn commands the cluster page
gives for it are ones tfdqn accepts."""

import copy
import re

import pytest
import yaml

from tests.conftest import REPO, run_module

RECIPE = REPO / "cluster" / "aws.yaml"
PAGE = REPO / "docs" / "guide" / "cluster.md"


def _prepared(config: dict) -> dict:
    """What `ray up` validates: the file merged with the provider's defaults (ray.autoscaler's prepare_config)."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def test_the_recipe_passes_rays_own_validation_and_a_misspelt_key_does_not():
    pytest.importorskip("ray")
    import jsonschema

    config = yaml.safe_load(RECIPE.read_text())
    prepared = _prepared(config)
    assert prepared["head_node_type"] == "head_gpu" and prepared["available_node_types"]["head_gpu"]["max_workers"] == 0
    broken = copy.deepcopy(config)
    broken["available_node_types"]["cpu_worker"]["node_confg"] = broken["available_node_types"]["cpu_worker"].pop(
        "node_config")
    with pytest.raises(jsonschema.ValidationError, match="node_config"):
        _prepared(broken)


def test_every_node_installs_tfdqn_with_its_ray_extra_and_joins_only_with_the_token():
    config = _prepared(yaml.safe_load(RECIPE.read_text()))
    assert any('tfdqn[ray' in command for command in config["setup_commands"])  # head and workers run these
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    starts = [c for c in config["head_start_ray_commands"] + config["worker_start_ray_commands"] if "ray start" in c]
    assert len(starts) == 2 and all(c.startswith("RAY_AUTH_MODE=token ray start") for c in starts)
    assert "--num-cpus=0" in starts[0]  # the head keeps its CPUs for the learner: actors and runs go to workers


def _tfdqn_commands(page: str) -> list[list[str]]:
    """The `tfdqn train` lines of the page's shell blocks, continuation lines joined."""
    blocks = re.findall(r"```bash\n(.*?)```", page, flags=re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [line.split()[2:] for line in lines if line.startswith("tfdqn train")]


def test_the_pages_train_commands_are_valid_configs():
    commands = _tfdqn_commands(PAGE.read_text())
    assert commands
    for args in commands:
        result = run_module("tfdqn.train", *args, "--print-config")
        assert result.returncode == 0, (args, result.stderr)
        assert "kind: ray" in result.stdout
