"""Whether a network kind (and augmentation) fits an env's observations, decided from the env's spec before any
network is built and without TensorFlow: `--print-config` and a run's start refuse a misfit in one line before a
run folder exists, and `networks.make_network` builds by the same rules."""

from __future__ import annotations

import numpy as np

from tfdqn.config import LearnerConfig
from tfdqn.errors import UserError

NATURE_CNN_MIN_SIDE = 36  # 8x8/4, 4x4/2 and 3x3/1 valid convolutions leave a 1x1 map at 36 pixels
CNN_KINDS = ("nature_cnn", "small_cnn", "impala")


def cnn_for(kind: str, side: int, shape: tuple, padding: str = "valid") -> str:
    """The CNN `kind` names for an image of `side` pixels (auto: the one its size fits); the valid-padded
    nature_cnn on an image too small for it is refused in one line."""
    if kind == "auto":
        return "nature_cnn" if side >= NATURE_CNN_MIN_SIDE else "small_cnn"
    if kind == "nature_cnn" and padding == "valid" and side < NATURE_CNN_MIN_SIDE:
        raise UserError(f"network.kind = nature_cnn needs frames of at least {NATURE_CNN_MIN_SIDE}x"
                        f"{NATURE_CNN_MIN_SIDE} (its 8x8/4, 4x4/2 and 3x3/1 valid convolutions); this env's are "
                        f"{'x'.join(map(str, shape))}; allowed: network.kind = small_cnn or auto")
    return kind


def image_side(observation_shape: tuple, observation_dtype) -> int | None:
    """The smaller side of uint8 image observations, None for any other observation."""
    return min(observation_shape[-2:]) if np.dtype(observation_dtype) == np.uint8 else None


def network_kind(kind: str, observation_shape: tuple, observation_dtype, conv_padding: str = "valid",
                 layout=None) -> str:
    """The kind of network `network.kind` builds for these observations ("encoded" for byte-frame ones), or a
    one-line error where it does not fit them."""
    if layout is not None:
        encoded_cnns(layout, kind, conv_padding)
        return "encoded"
    side = image_side(observation_shape, observation_dtype)
    if kind == "mlp" or (kind == "auto" and side is None):
        return "mlp"
    if side is None:
        raise UserError(f"network.kind = {kind} needs image observations (uint8), not "
                        f"{np.dtype(observation_dtype).name} {list(observation_shape)}; allowed: network.kind = mlp "
                        f"or auto")
    return cnn_for(kind, side, observation_shape[-2:], conv_padding)


def encoded_cnns(layout, kind: str, conv_padding: str = "valid") -> list[tuple]:
    """(part, CNN kind) of each image part of byte-frame observations (`observation_layout`), in order: the CNN
    `kind` builds for it (none where `kind` is mlp, which flattens images into the rest), or a one-line error."""
    images = [part for part in layout.inputs if part.kind == "image"] if kind != "mlp" else []
    if kind in CNN_KINDS and not images:
        raise UserError(f"network.kind = {kind} needs an image in the observation; this env's holds none; "
                        f"allowed: network.kind = mlp or auto")
    return [(part, cnn_for(kind, min(part.shape[:2] if part.image == "hwc" else part.shape[-2:]), part.shape,
                           conv_padding)) for part in images]


def check_augmentation(learner: LearnerConfig, observation_shape: tuple, observation_dtype) -> None:
    """Augmentation shifts image frame stacks: refuse it, in one line, for any other observation."""
    dtype = np.dtype(observation_dtype)
    if (learner.augment_pad > 0 or learner.augment_intensity > 0) and not (dtype == np.uint8
                                                                            and len(observation_shape) == 3):
        key, value = ("learner.augment_pad", learner.augment_pad) if learner.augment_pad > 0 else \
            ("learner.augment_intensity", learner.augment_intensity)
        raise UserError(f"config key {key} = {value} needs image observations (uint8 frame stacks), not "
                        f"{dtype.name} {list(observation_shape)}; allowed: 0 for this env")


def check_fits_env(config) -> None:
    """The config's network and augmentation against its env's observations, as a run's start checks them: a
    one-line error where they do not fit (for `--print-config`, which builds no network)."""
    from tfdqn.envs.make import make_env

    env, spec = make_env(config.env, seed=config.run.seed)
    env.close()
    network_kind(config.network.kind, spec.observation_shape, spec.frame_dtype, config.network.conv_padding,
                 spec.layout)
    check_augmentation(config.learner, spec.observation_shape, spec.frame_dtype)
