import pytest

from tfdqn import config as C
from tfdqn.errors import UserError


def test_every_field_has_a_doc():
    docs = C.field_docs()
    assert "run.training_interval" in docs and "replay.capacity" in docs
    assert all(doc.strip() for doc in docs.values())


def test_files_extend_and_overrides_win(tmp_path):
    (tmp_path / "base.yaml").write_text("run:\n  seed: 3\n  total_steps: 100\nreplay:\n  capacity: 500\n")
    (tmp_path / "child.yaml").write_text("extends: base.yaml\nrun:\n  total_steps: 200\n")
    config = C.build_config([tmp_path / "child.yaml"], {"run.total_steps": "3e2", "learner.double_dqn": "false"})
    assert (config.run.seed, config.run.total_steps, config.replay.capacity) == (3, 300, 500)
    assert config.learner.double_dqn is False


def test_shipped_configs_load():
    for name in ("base.yaml", "cartpole.yaml", "atari.yaml"):
        assert isinstance(C.build_config([C.CONFIG_DIR / name], {}), C.DQNConfig)


def test_saved_config_reproduces_itself(tmp_path):
    config = C.build_config([C.CONFIG_DIR / "cartpole.yaml"], {"run.seed": 7})
    C.save(config, tmp_path / "config.yaml")
    assert C.build_config([tmp_path / "config.yaml"], {}) == config


def test_set_values_are_typed_by_their_field():
    overrides = C.parse_set(["learner.learning_rate=1e-4", "learner.double_dqn=true", "network.hidden_sizes=[64, 64]",
                             "run.total_steps=1_000"])
    config = C.build_config([], overrides)
    assert config.learner.learning_rate == 1e-4 and config.learner.double_dqn is True
    assert config.network.hidden_sizes == (64, 64) and config.run.total_steps == 1000


@pytest.mark.parametrize("overrides, needle", [
    ({"run.training_interval": 0}, "run.training_interval = 0"),
    ({"run.total_steps": -5}, "run.total_steps = -5"),
    ({"exploration.epsilon_end": 1.5}, "exploration.epsilon_end = 1.5"),
    ({"replay.batch_size": 64, "replay.capacity": 32}, "replay.batch_size = 64"),
    ({"learner.optimizer": "sgd"}, "learner.optimizer = 'sgd'"),
    ({"run.seed": "abc"}, "run.seed = 'abc'"),
    ({"learner.double_dqn": "maybe"}, "learner.double_dqn = 'maybe'"),
    ({"run.trainig_interval": 2}, "did you mean run.training_interval"),
    ({"nosection": 2}, "unknown config key 'nosection'"),
    ({"learner.n_step": 0}, "learner.n_step = 0"),
    ({"run.training_interval": 0.001234}, "run.training_interval = 0.001234 is out of range"),
    ({"replay.sampler": "rank"}, "replay.sampler = 'rank' is out of range; allowed: uniform, prioritized"),
    ({"replay.importance_exponent": 1.5}, "replay.importance_exponent = 1.5"),
    ({"learner.loss": "iqn"}, "learner.loss = 'iqn' is out of range; allowed: huber, categorical, quantile, "
                              "implicit_quantile"),
    ({"learner.num_tau_samples": 0}, "learner.num_tau_samples = 0 is out of range; allowed: an integer >= 1"),
    ({"learner.munchausen": True, "learner.loss": "quantile"},
     "learner.munchausen = True with learner.loss = 'quantile': Munchausen's soft target is built here for the Huber "
     "loss (M-DQN) and IQN's (M-IQN); allowed: learner.loss = huber or implicit_quantile, or learner.munchausen = "
     "False"),
    ({"run.confirm_episodes": 30}, "run.confirm_episodes = 30 confirms a hit of run.target_return, which is inf; "
                                   "allowed: run.confirm_episodes = 0, or a finite run.target_return"),
    ({"learner.munchausen": True, "learner.n_step": 3},
     "learner.n_step = 3 with learner.munchausen = True: an n-step return would need Munchausen's log-policy term for "
     "every step's action, which no source defines; allowed: learner.n_step = 1, or learner.munchausen = False"),
    ({"learner.v_min": 5.0, "learner.v_max": 5.0}, "learner.v_max = 5.0 is out of range; allowed: a number > learner.v_min"),
    ({"learner.num_atoms": 1}, "learner.num_atoms = 1"),
    ({"network.noisy_sigma0": 0}, "network.noisy_sigma0 = 0"),
    ({"network.noise_refresh": "step"}, "network.noise_refresh = 'step' is out of range; allowed: call, update"),
    ({"network.noise_refresh": "update"}, "network.noise_refresh = 'update' with network.noisy = False: held noise"),
    ({"network.noisy": True, "network.noise_refresh": "update", "actors.kind": "process"},
     "network.noise_refresh = 'update' with actors.kind = 'process': held noise belongs to the noisy network that the "
     "learner updates and the trainer acts with; allowed: network.noise_refresh = 'call', or network.noisy = True with "
     "actors.kind = 'inline' and compute.act_device = 'auto'"),
    ({"network.noisy": True, "network.noise_refresh": "update", "compute.act_device": "cpu"},
     "network.noise_refresh = 'update' with compute.act_device = 'cpu'"),
    ({"learner.learning_rate_end": -1e-4}, "learner.learning_rate_end = -0.0001 is out of range; allowed: a number >= 0"),
    ({"learner.learning_rate_decay_updates": -1}, "learner.learning_rate_decay_updates = -1"),
    ({"actors.count": 0}, "actors.count = 0"),
    ({"actors.exploration": "greedy"}, "actors.exploration = 'greedy'"),
    ({"env.step_delay_ms": -1}, "env.step_delay_ms = -1"),
    ({"compute.act_device": "cpu", "run.async_learner": True}, "compute.act_device = 'cpu' with run.async_learner"),
    ({"replay.compression": "gzip"}, "replay.compression = 'gzip' is out of range; allowed: none, zstd, lz4"),
    ({"replay.prefetch": True, "replay.device": "accelerator"}, "replay.prefetch = True with replay.device = 'accelerator'"),
    ({"replay.memory_budget_gib": -1}, "replay.memory_budget_gib = -1.0 is out of range; allowed: a number >= 0"),
    ({"replay.memory_budget_gib": 2}, "replay.memory_budget_gib = 2.0 needs compressed frames, but replay.compression"),
    ({"replay.compression": "zstd", "replay.device": "accelerator"},
     "replay.compression = 'zstd' with replay.device = 'accelerator'"),
    ({"env.kwargs": 3}, "config key env.kwargs = 3 is not a mapping of names to YAML scalars or lists; allowed: "),
    ({"env.kwargs.colors": {"a": 1}}, "config key env.kwargs.colors = {'a': 1} is not a YAML scalar or a list of them"),
    ({"env.frame_skipp": 2}, "unknown config key 'env.frame_skipp'; did you mean env.frame_skip?"),
    ({"env.zzzz": 2}, "unknown config key 'env.zzzz'; allowed keys in env: id, frame_stack, "),
    ({"nosuch.key": 2}, "allowed: section.key with a section of env, replay, network, learner, exploration, run,"),
])
def test_bad_values_give_one_line_naming_value_and_allowed(overrides, needle):
    with pytest.raises(UserError) as error:
        C.build_config([], overrides)
    message = str(error.value)
    assert needle in message and "\n" not in message


@pytest.mark.parametrize("text, needle", [
    ("run: [1, 2", "not valid YAML"),
    ("- 1\n- 2\n", "expected a mapping"),
    ("run: 5\n", "expected a mapping"),
])
def test_malformed_files(tmp_path, text, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=needle):
        C.build_config([path], {})


def test_a_renamed_key_still_reads_under_its_old_name(tmp_path):
    """run.update_every became run.env_steps_per_round: old run folders' config.yaml and old commands still work."""
    old = tmp_path / "old.yaml"
    old.write_text("run:\n  update_every: 64\n")
    assert C.build_config([old], {}).run.env_steps_per_round == 64
    assert C.build_config([], {"run.update_every": 32}).run.env_steps_per_round == 32


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        C.build_config([tmp_path / "nope.yaml"], {})


def test_every_replay_size_that_validates_builds_its_ring():
    """Validation and the ring agree: capacity 41, batch 1, 8 envs, stack 4 used to pass validation and
    then fail in ReplayRing with a raw ValueError."""
    import numpy as np

    from tfdqn.replay.ring import ReplayRing

    checked = 0
    for num_envs in (1, 2, 8):
        for frame_stack in (1, 4):
            for n_step in (1, 3):
                for capacity in range(1, 90):
                    overrides = {"replay.capacity": capacity, "replay.batch_size": 1, "run.num_envs": num_envs,
                                 "env.frame_stack": frame_stack, "learner.n_step": n_step}
                    try:
                        C.build_config([], overrides)
                    except UserError as error:
                        assert "\n" not in str(error)
                        continue
                    ReplayRing(capacity, (2,), np.float32, frame_stack, num_streams=num_envs, n_step=n_step)
                    checked += 1
    assert checked > 100
    with pytest.raises(UserError, match="replay.capacity = 41 gives each of run.num_envs = 8 envs 5 slots"):
        C.build_config([], {"replay.capacity": 41, "replay.batch_size": 1, "run.num_envs": 8, "env.frame_stack": 4})


def test_atari_frames_are_compressed_with_lz4_unless_the_user_says_otherwise():
    sources = {}
    atari = C.resolve_config([], {"env.id": "Breakout"}, None, sources)
    assert atari.replay.compression == "lz4" and sources["replay.compression"] == C.COMPRESSION_RULE
    assert C.resolve_config([], {"env.id": "Breakout", "replay.compression": "none"}).replay.compression == "none"
    assert C.resolve_config([], {"env.id": "Breakout", "replay.device": "accelerator"}).replay.compression == "none"
    assert C.resolve_config([], {"env.id": "Pong"}, "rainbow").replay.compression == "lz4"
    assert C.resolve_config([], {"env.id": "CartPole"}).replay.compression == "none"


def test_noisy_nets_the_trainer_acts_with_hold_their_acting_noise_unless_someone_says_otherwise():
    sources = {}
    rainbow = C.resolve_config([], {"env.id": "Pong"}, "rainbow", sources)
    assert rainbow.network.noise_refresh == "update" and sources["network.noise_refresh"] == C.HELD_NOISE_RULE
    assert C.resolve_config([], {"env.id": "CartPole", "network.noisy": True}).network.noise_refresh == "update"
    assert C.resolve_config([], {"env.id": "Pong"}, "der").network.noise_refresh == "call"  # its source's per-call
    for acting_copy in ({"actors.kind": "process"}, {"actors.kind": "ray"}, {"compute.act_device": "cpu"}):
        assert C.resolve_config([], {"env.id": "Pong", **acting_copy}, "rainbow").network.noise_refresh == "call"
    chosen = C.resolve_config([], {"env.id": "Pong", "network.noise_refresh": "call"}, "rainbow")
    assert chosen.network.noise_refresh == "call"
    assert C.resolve_config([], {"env.id": "Pong"}).network.noise_refresh == "call"  # no noisy layers


def test_env_kwargs_from_set_and_from_a_file_are_one_mapping_that_config_yaml_keeps(tmp_path):
    """`--set env.kwargs.NAME=VALUE` adds one keyword argument; a file's env section may give the mapping."""
    from_set = C.build_config([], C.parse_set(["env.kwargs.continuous=false", "env.kwargs.lap_complete_percent=0.9",
                                               "env.kwargs.domain_randomize=false"]))
    path = tmp_path / "car.yaml"
    path.write_text("env:\n  kwargs: {lap_complete_percent: 0.9, continuous: false}\n")
    from_file = C.build_config([path], {"env.kwargs.domain_randomize": False})
    assert from_set == from_file
    assert from_set.env.kwargs.as_dict() == {"continuous": False, "domain_randomize": False,
                                             "lap_complete_percent": 0.9}
    assert hash(from_set) == hash(from_file)  # the frozen config stays hashable
    saved = tmp_path / "config.yaml"
    C.save(from_set, saved)
    assert C.build_config([saved], {}) == from_set
    sources = {}
    C.build_config([], {"env.kwargs.continuous": False}, sources)
    assert sources["env.kwargs"] == "--set or a flag"


def test_for_env_takes_an_env_gymnasium_made_or_a_function_that_makes_one():
    import gymnasium

    made = gymnasium.make("CartPole-v1", sutton_barto_reward=True)
    config = C.DQNConfig.for_env(made, {"run.total_steps": 500})
    assert config.env.id == "CartPole-v1" and config.env.kwargs.as_dict() == {"sutton_barto_reward": True}
    assert config.run.total_steps == 500 and config == C.DQNConfig.for_env(
        "CartPole-v1", {"env.kwargs.sutton_barto_reward": True, "run.total_steps": 500})
    assert C.DQNConfig.for_env(lambda: gymnasium.make("Acrobot-v1")) == C.DQNConfig.for_env("Acrobot-v1")

    class Unregistered(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,))
        action_space = gymnasium.spaces.Discrete(2)

    with pytest.raises(UserError, match=r"was not made by gymnasium.make from a registered id; allowed: an env id, "
                                        r"or an env gymnasium.make made \(gymnasium.register your env first\)"):
        C.DQNConfig.for_env(Unregistered())
