"""Logger writes real TensorBoard event files; read_scalars and read_events read them back."""

import tensorflow as tf

from tfdqn.telemetry.tensorboard import Logger, read_events, read_scalars

CONFIG = {"env": {"id": "CartPole-v1", "frame_stack": 1}, "learner": {"learning_rate": 0.00025, "gamma": 0.99}}


def test_scalars_are_read_back_per_tag_in_step_order(tmp_path):
    logger = Logger(tmp_path)
    logger.scalars(0, {"charts/episode_return": 9, "perf/env_steps_per_sec": 1234.5})
    logger.scalars(500, {"charts/episode_return": 21.5, "losses/td_loss": 0.25})
    logger.scalars(1000, {"charts/episode_return": -3})
    logger.close()
    assert read_scalars(tmp_path, "charts/episode_return") == [(0, 9.0), (500, 21.5), (1000, -3.0)]
    assert read_scalars(tmp_path, "perf/env_steps_per_sec") == [(0, 1234.5)]
    assert read_scalars(tmp_path, "losses/td_loss") == [(500, 0.25)]
    assert read_scalars(tmp_path, "charts/never_logged") == []


def test_none_means_not_measured_and_writes_nothing(tmp_path):
    logger = Logger(tmp_path)
    logger.scalars(0, {"losses/td_loss": None, "charts/epsilon": 1.0})
    logger.scalars(100, {"losses/td_loss": 0.5, "charts/epsilon": None})
    logger.scalars(200, {"system/gpu_util": None})
    logger.close()
    assert read_scalars(tmp_path, "losses/td_loss") == [(100, 0.5)]
    assert read_scalars(tmp_path, "charts/epsilon") == [(0, 1.0)]
    assert set(read_events(tmp_path).Tags()["tensors"]) == {"losses/td_loss", "charts/epsilon"}


def test_hyperparameters_are_one_text_table_of_every_section_and_key(tmp_path):
    logger = Logger(tmp_path)
    logger.hyperparameters(CONFIG)
    logger.close()
    events = read_events(tmp_path).Tensors("hyperparameters")
    assert [event.step for event in events] == [0]
    table = tf.make_ndarray(events[0].tensor_proto).item().decode()
    assert table.splitlines() == ["|parameter|value|", "|-|-|", "|env.id|CartPole-v1|", "|env.frame_stack|1|",
                                  "|learner.learning_rate|0.00025|", "|learner.gamma|0.99|"]
