"""DrQ's image augmentation (Kostrikov et al. 2021) with DrQ(epsilon)'s intensity noise (Agarwal et al. 2021).

Pure TensorFlow, graph- and XLA-friendly, for use inside the update. Images are replay frame stacks
[batch, stack, height, width]. Draws come from a caller-owned `tf.random.Generator` (one per learner,
seeded from the run seed, checkpointable), so augmentations are reproducible and resume exactly."""

import tensorflow as tf


def shift_images(images: tf.Tensor, dy: tf.Tensor, dx: tf.Tensor) -> tf.Tensor:
    """out[b, :, i, j] = images[b, :, clip(i + dy[b], 0, H-1), clip(j + dx[b], 0, W-1)].

    The same as replicate-padding each side and cropping an H x W window at offset (pad + dy, pad + dx),
    without the padded copy. dy, dx: int32 [batch]. Keeps the dtype."""
    height, width = tf.shape(images)[2], tf.shape(images)[3]
    rows = tf.clip_by_value(tf.range(height)[None, :] + dy[:, None], 0, height - 1)
    cols = tf.clip_by_value(tf.range(width)[None, :] + dx[:, None], 0, width - 1)
    images = tf.gather(images, rows, axis=2, batch_dims=1)
    return tf.gather(images, cols, axis=3, batch_dims=1)


def random_shift(images: tf.Tensor, pad: int, generator: tf.random.Generator) -> tf.Tensor:
    """DrQ's random shift: one (dy, dx) uniform in [-pad, pad]^2 per sample, shared by its frames."""
    shifts = generator.uniform([2, tf.shape(images)[0]], minval=-pad, maxval=pad + 1, dtype=tf.int32)
    return shift_images(images, shifts[0], shifts[1])


def intensity_noise(images: tf.Tensor, scale: float, generator: tf.random.Generator) -> tf.Tensor:
    """images * (1 + scale * clip(n, -2, 2)), one n ~ N(0, 1) per sample, as Dopamine's DrQ(epsilon).

    Returns the input's dtype. uint8 comes back rounded and saturated to [0, 255]: the networks' uint8
    Keras Input casts a float input to uint8 without saturating (300.0 becomes 44), so float pixels in
    0..255 units cannot be handed to them."""
    noise = 1.0 + scale * tf.clip_by_value(generator.normal(tf.shape(images)[:1]), -2.0, 2.0)
    noise = tf.reshape(noise, [-1] + [1] * (images.shape.rank - 1))
    if images.dtype == tf.uint8:
        scaled = tf.round(tf.cast(images, tf.float32) * noise)
        return tf.cast(tf.clip_by_value(scaled, 0.0, 255.0), tf.uint8)
    return images * tf.cast(noise, images.dtype)


def augment(observation: tf.Tensor, next_observation: tf.Tensor, generator: tf.random.Generator, pad: int,
            intensity_scale: float) -> tuple[tf.Tensor, tf.Tensor]:
    """Random shift, then intensity noise where intensity_scale > 0 (DrQ(epsilon): pad 4, scale 0.05),
    drawn independently for the observation and the next observation, as DrQ does. Returns both, each in
    its input's dtype."""
    def one(images):
        images = random_shift(images, pad, generator)
        return intensity_noise(images, intensity_scale, generator) if intensity_scale > 0 else images
    return one(observation), one(next_observation)
