"""The byte frames of `tfdqn.envs.observation_layout` inside the graphs: the network's input features (one-hot
for Discrete and MultiDiscrete, 0/1 for MultiBinary, float32 for a Box, images for a CNN each, as SB3's
CombinedExtractor), each state's legal actions, and the frame built from an observation as the env gives it (an
exported policy's inputs, one per Dict key)."""

from __future__ import annotations

import keras
import tensorflow as tf

from tfdqn.envs.observation_layout import ObservationLayout, Part


def _values(part: Part, frames: tf.Tensor) -> tf.Tensor:
    """[B, count] of the part's stored values in their dtype (4-byte values bitcast from their bytes)."""
    raw = frames[:, part.offset:part.offset + part.width]
    if part.dtype == "uint8":
        return raw
    return tf.bitcast(tf.reshape(raw, [-1, part.count, 4]), tf.as_dtype(part.dtype))


def legal_actions(layout: ObservationLayout, frames: tf.Tensor) -> tf.Tensor:
    """[B, actions] bool: each frame's legal actions; a frame with none counts every action as legal (a
    terminal state's mask may be empty; its value is never used)."""
    legal = tf.greater(tf.cast(_values(layout.mask, frames), tf.int32), 0)  # int32: LiteRT compares no uint8
    return tf.logical_or(legal, tf.logical_not(tf.reduce_any(legal, axis=-1, keepdims=True)))


def _features(part: Part, frames: tf.Tensor) -> tf.Tensor:
    """[B, features] float32 of a part that is no image."""
    values = _values(part, frames)
    if part.kind != "discrete":
        return tf.cast(values, tf.float32)
    hots = [tf.one_hot(tf.cast(values[:, i], tf.int32), size, dtype=tf.float32) for i, size in enumerate(part.sizes)]
    return tf.concat(hots, axis=-1)


def _image(part: Part, frames: tf.Tensor) -> tf.Tensor:
    """[B, H, W, C] float32 in [0, 1]: channels last, the layout CPU convolutions support."""
    image = tf.reshape(tf.cast(_values(part, frames), tf.float32) / 255.0, [-1, *part.shape])
    if part.image == "hw":
        return image[..., None]
    return tf.transpose(image, [0, 2, 3, 1]) if part.image == "chw" else image


@keras.saving.register_keras_serializable(package="tfdqn")
class ObservationFeatures(keras.layers.Layer):
    """Byte frames -> [vector features, image 1, image 2, ...]: the features of every part that is no image,
    concatenated (left out where there are none), then each image channels last, in the layout's order. Images
    are flattened into the vector features instead where `images` is False (an MLP over everything)."""

    def __init__(self, layout: dict, images: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.layout, self.images = layout, images
        self._layout = ObservationLayout.from_config(layout)

    def call(self, frames):
        inputs = self._layout.inputs
        vector = [_features(part, frames) for part in inputs if part.kind != "image" or not self.images]
        images = [_image(part, frames) for part in inputs if part.kind == "image" and self.images]
        return ([tf.concat(vector, axis=-1)] if vector else []) + images

    def get_config(self):
        return {**super().get_config(), "layout": self.layout, "images": self.images}


def encode(layout: ObservationLayout, inputs: dict) -> tf.Tensor:
    """Byte frames [B, width] from `inputs`: part name -> [B, *shape] as the env gives it (`Part.name`)."""
    pieces = []
    for part in layout.parts:
        value = inputs[part.name]
        # [B] gains an axis by a stack: a reshape of it fails LiteRT's int8 calibration
        value = tf.stack([value], axis=-1) if part.shape == () else tf.reshape(value, [-1, part.count])
        if part.kind == "discrete":
            value = tf.cast(value, tf.int32) - tf.constant(part.starts, tf.int32)
        elif part.kind in ("binary", "mask"):
            value = tf.minimum(tf.abs(tf.cast(value, tf.int32)), 1)  # 0 or 1, in ops LiteRT has for int8
        value = tf.cast(value, tf.as_dtype(part.dtype))
        pieces.append(value if part.dtype == "uint8" else tf.reshape(tf.bitcast(value, tf.uint8), [-1, part.width]))
    return tf.concat(pieces, axis=-1)


def input_specs(layout: ObservationLayout) -> dict:
    """Part name -> TensorSpec of a batch of it as the env gives it: an exported policy's inputs."""
    return {part.name: tf.TensorSpec([None, *part.shape], tf.as_dtype(part.input_dtype), name=part.name)
            for part in layout.parts}
