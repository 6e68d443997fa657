"""RunKey's hash: the recipe, stable across releases that add a config key."""

import json

import pytest
import yaml

from tests.conftest import REPO
from tfdqn import config as config_lib
from tfdqn.bench.runkey import ADDED_KEYS, recipe_hash


@pytest.mark.parametrize("record", ["atari100k-drq_eps.json", "bench-atari-pong.json"])
def test_each_recorded_run_rehashes_to_the_hash_it_was_recorded_under(tmp_path, record):
    """A key added since (at the value that trains as before) leaves a recorded run's hash as it was."""
    runs = json.loads((REPO / "docs" / record).read_text())["runs"]
    for index, run in enumerate(runs):
        path = tmp_path / f"{index}.yaml"
        path.write_text(yaml.safe_dump(run["config"]))
        assert recipe_hash(config_lib.build_config([path], {})) == run["config_hash"]


def test_an_added_key_at_another_value_is_another_recipe():
    for key, former in ADDED_KEYS.items():
        others = {"valid": "same", "{}": {"mode": 4}, "auto": "none", "-1.0": -2.0, "call": "update"}
        other = others.get(str(former)) or ((not former) if isinstance(former, bool) else former + 1)
        settings = {"replay.memory_budget_gib": {"replay.compression": "zstd"},
                    "network.noise_refresh": {"network.noisy": True}, "learner.munchausen": {"learner.n_step": 1},
                    "run.confirm_episodes": {"run.target_return": 10.0, "run.eval_every": 1000}}.get(key, {})
        hashes = [recipe_hash(config_lib.resolve_config([], {"env.id": "Pong", key: value, **settings}, "drq_eps"))
                  for value in (former, other)]
        assert hashes[0] != hashes[1], key


def test_a_key_that_changes_no_result_shares_the_recipe_and_is_no_difference():
    from tfdqn.bench.runkey import recipe, recipe_differences

    configs = [config_lib.resolve_config([], {"env.id": "Pong", "replay.compression": codec}, "drq_eps")
               for codec in ("none", "zstd", "lz4")]
    assert len({recipe_hash(config) for config in configs}) == 1
    recorded = config_lib.to_dict(configs[1])  # a recorded run's config holds every key (the seed aside)
    del recorded["run"]["seed"]
    assert recipe_differences(recipe(configs[0]), recorded) == []
