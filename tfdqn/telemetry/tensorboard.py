"""TensorBoard output with grouped tags (charts/, losses/, perf/, system/)."""

import pathlib

import tensorflow as tf


def _markdown_table(config: dict) -> str:
    rows = [f"|{section}.{key}|{value}|" for section, fields in config.items() for key, value in fields.items()]
    return "\n".join(["|parameter|value|", "|-|-|", *rows])


class Logger:
    """One event-file writer per run folder; summaries are written only when the loop asks. `mirror` (a
    tracker such as `tracking.WandbRun`, or None) receives every scalar too, under the same tags."""

    def __init__(self, run_dir: pathlib.Path, mirror=None):
        self._writer = tf.summary.create_file_writer(str(run_dir))
        self._mirror = mirror

    def hyperparameters(self, config: dict) -> None:
        """The resolved config as a text table, the first thing a reader of the run sees."""
        with self._writer.as_default():
            tf.summary.text("hyperparameters", _markdown_table(config), step=0)

    def layout(self, layout) -> None:
        """A custom-scalars layout (`tfdqn.telemetry.layout`): TensorBoard shows its charts in their own tab."""
        from tensorboard.plugins.custom_scalar import summary

        with self._writer.as_default():
            tf.summary.experimental.write_raw_pb(summary.pb(layout).SerializeToString(), step=0)

    def scalars(self, step: int, values: dict) -> None:
        """`values` maps full tags (`charts/episode_return`) to numbers; None means "not measured"."""
        with self._writer.as_default():
            for tag, value in values.items():
                if value is not None:
                    tf.summary.scalar(tag, float(value), step=step)
        if self._mirror is not None:
            self._mirror.scalars(step, values)

    def close(self) -> None:
        self._writer.close()


def read_events(run_dir: pathlib.Path):
    """A run's event files loaded whole (every summary is a tensor in TF2 event files)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    events.Reload()
    return events


def read_scalars(run_dir: pathlib.Path, tag: str) -> list[tuple[int, float]]:
    """(step, value) pairs of one tag from a run's event files: for tools, plots and tests."""
    events = read_events(run_dir)
    if tag not in events.Tags()["tensors"]:
        return []
    return scalars(events, tag)


def scalars(events, tag: str) -> list[tuple[int, float]]:
    """(step, value) pairs of one tag of events already loaded by `read_events`."""
    return [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)]
