"""Q-networks. Image inputs stay uint8 until inside the model, so the replay can store bytes.

Every layer takes its dtype policy and its initializer's seed from the caller, never from Keras's
process-global policy or random state, so building a network changes nothing in the user's program."""

import random
from typing import Callable, NamedTuple

import keras

from tfdqn.agent import implicit_quantile as iqn
from tfdqn.agent.heads import DISTRIBUTION, Q_VALUES, DuelingCombine, ExpectedQ, HeadSpec
from tfdqn.agent.layers import KERAS_SEED_RANGE, Dense
from tfdqn.agent.noisy import NoisyDense
from tfdqn.agent.observation_encoder import ObservationFeatures
from tfdqn.agent.network_fit import encoded_cnns, network_kind


class _Layers:
    """Makes layers with one dtype policy and, where `seed` is given, initializers seeded in making
    order from it (None: Keras's own unseeded initializers); noisy layers draw their noise seeds in
    making order from the head's `noise_seed`."""

    def __init__(self, dtype_policy: str, seed: int | None, head: HeadSpec = HeadSpec()):
        self.dtype_policy = dtype_policy
        self.head = head
        self._seeds = random.Random(seed) if seed is not None else None
        self._noise_seeds = random.Random(head.noise_seed) if head.noise_seed is not None else None

    def _seed(self) -> int | None:
        return self._seeds.randint(*KERAS_SEED_RANGE) if self._seeds is not None else None

    def _kernel_initializer(self):
        if self._seeds is None:
            return "glorot_uniform"
        return keras.initializers.GlorotUniform(seed=self._seed())

    def dense(self, units: int, **kwargs) -> Dense:
        return Dense(units, kernel_initializer=self._kernel_initializer(), **{"dtype": self.dtype_policy, **kwargs})

    def head_dense(self, units: int, **kwargs) -> keras.layers.Layer:
        """A layer of the head: noisy where the head is (Fortunato et al. 2018), else `dense`."""
        if not self.head.noisy:
            return self.dense(units, **kwargs)
        noise_seed = self._noise_seeds.randint(*KERAS_SEED_RANGE) if self._noise_seeds is not None else None
        return NoisyDense(units, sigma0=self.head.sigma0, seed=self._seed(), noise_seed=noise_seed,
                          hold_acting_noise=self.head.hold_acting_noise,
                          **{"dtype": self.dtype_policy, **kwargs})

    def conv(self, filters: int, size: int, strides: int, padding: str = "valid",
             activation: str | None = "relu") -> keras.layers.Conv2D:
        return keras.layers.Conv2D(filters, size, strides=strides, padding=padding, activation=activation,
                                   dtype=self.dtype_policy, kernel_initializer=self._kernel_initializer())


def _head(layers: _Layers, features, hidden: int, num_actions: int):
    """The hidden layer, then one output layer, or value and advantage output layers combined when
    dueling (as Dopamine's FullRainbowNetwork, which DER and DrQ(epsilon) run: the hidden layer is shared,
    where Wang et al. 2016 give each stream its own), reshaped to [batch, actions, outputs] for a
    distributional head, then its expected Q. Everything from the outputs on computes in float32, also
    under mixed precision."""
    head, k = layers.head, layers.head.outputs
    if head.loss == "implicit_quantile":
        return _implicit_quantile_head(layers, features, hidden, num_actions)
    x = layers.head_dense(hidden, activation="relu")(features)

    def output(units: int, name: str):
        return layers.head_dense(units, name=name, dtype="float32")(x)

    def per_action(y, actions: int, name: str):
        return y if k == 1 else keras.layers.Reshape((actions, k), name=name, dtype="float32")(y)

    output_name = Q_VALUES if k == 1 else DISTRIBUTION
    if head.dueling:
        value = per_action(output(k, "value"), 1, "value_per_atom")
        advantage = per_action(output(num_actions * k, "advantage"), num_actions, "advantage_per_atom")
        distribution = DuelingCombine(name=output_name, dtype="float32")([value, advantage])
    elif k == 1:
        distribution = output(num_actions, output_name)
    else:
        distribution = per_action(output(num_actions * k, "outputs"), num_actions, output_name)
    if k == 1:
        return distribution
    return ExpectedQ(head.loss, k, head.v_min, head.v_max, name=Q_VALUES, dtype="float32")(distribution)


def _implicit_quantile_head(layers: _Layers, features, hidden: int, num_actions: int):
    """IQN's head (`implicit_quantile`): the fractions' embedding merged into `features`, then the hidden layer and
    the outputs (value and advantage when dueling) per fraction, at the K midpoints; then their mean, the Q."""
    head, policy = layers.head, layers.dtype_policy
    outputs = {"value": 1, "advantage": num_actions} if head.dueling else {"outputs": num_actions}
    made = {iqn.COSINES: iqn.QuantileCosines(head.embedding_cosines, name=iqn.COSINES, dtype="float32"),
            iqn.EMBEDDING: layers.dense(features.shape[-1], activation="relu", name=iqn.EMBEDDING),
            iqn.MERGE: iqn.QuantileMerge(name=iqn.MERGE, dtype=policy),
            iqn.HIDDEN: layers.head_dense(hidden, activation="relu", name=iqn.HIDDEN),
            **{name: layers.head_dense(units, name=name, dtype="float32") for name, units in outputs.items()}}
    fractions = iqn.MidpointFractions(head.outputs, name=iqn.FRACTIONS, dtype="float32")(features)
    distribution = iqn.quantile_distribution(made.__getitem__, features, fractions, head.dueling)
    return ExpectedQ(head.loss, head.outputs, head.v_min, head.v_max, name=Q_VALUES, dtype="float32")(distribution)


def mlp(observation_shape: tuple, num_actions: int, hidden_sizes: tuple, dtype_policy: str = "float32",
        seed: int | None = None, head: HeadSpec = HeadSpec()) -> keras.Model:
    """Fully connected Q-network for vector observations (CartPole, Acrobot, ...); the last hidden layer
    belongs to the head (one per stream when dueling)."""
    layers = _Layers(dtype_policy, seed, head)
    inputs = keras.Input(observation_shape, dtype="float32", name="observation")
    x = keras.layers.Flatten(dtype=layers.dtype_policy)(inputs) if len(observation_shape) > 1 else inputs
    for units in hidden_sizes[:-1]:
        x = layers.dense(units, activation="relu")(x)
    return keras.Model(inputs, _head(layers, x, hidden_sizes[-1], num_actions), name="mlp", dtype=layers.dtype_policy)


def _channels_last(x, observation_shape: tuple, policy: str):
    """An image observation, channels first as tfdqn stores them, as [H, W, channels] for the convolutions:
    [H, W] (one grey frame) gains a channel; [C, H, W] (a stack of grey frames, as Atari's, or one frame's
    colour channels) is permuted; [k, C, H, W] (a stack of colour frames) is permuted and its stack and colour
    axes merged."""
    if len(observation_shape) == 2:
        return x[..., None]
    if len(observation_shape) == 3:
        return keras.layers.Permute((2, 3, 1), dtype=policy)(x)
    stack, channels, height, width = observation_shape
    x = keras.layers.Permute((3, 4, 1, 2), dtype=policy)(x)
    return keras.layers.Reshape((height, width, stack * channels), dtype=policy)(x)




def _scaled_channels_last(inputs, observation_shape: tuple, policy: str):
    return _channels_last(keras.layers.Rescaling(1.0 / 255.0, dtype=policy)(keras.ops.cast(inputs, "float32")),
                          observation_shape, policy)


def _nature_body(layers: _Layers, x, padding: str = "valid"):
    """The Nature DQN (Mnih et al. 2015): conv 32x8x8/4, 64x4x4/2, 64x3x3/1, flattened (then the head's
    dense 512).

    `padding` "valid" is the Nature network's (84x84 frames end in a 7x7x64 map); "same" is Dopamine's
    Atari-100k network (flax's default padding, jax/networks.py FullRainbowNetwork: an 11x11x64 map, so the
    dense layer reads 7,744 features and the network holds about 2.4 times the weights)."""
    x = layers.conv(32, 8, strides=4, padding=padding)(x)
    x = layers.conv(64, 4, strides=2, padding=padding)(x)
    x = layers.conv(64, 3, strides=1, padding=padding)(x)
    return keras.layers.Flatten(dtype=layers.dtype_policy)(x)


def _small_body(layers: _Layers, x, padding: str = "valid"):
    """A CNN for small frames (42x42, as RLlib's tuned Pong DQN plays): conv 16x4x4/2 and 32x4x4/2 with
    'same' padding whatever `padding` says, flattened, then the head's dense 256 over the whole 11x11 map
    (RLlib's 42x42 filters end in a 256x11x11 convolution: the same layer). The Nature CNN's stride-4 first
    layer leaves a 42x42 frame a 1x1x64 map, too coarse to place a 1-pixel ball; this one keeps an 11x11 map
    at about a quarter of the Nature CNN's cost on 84x84 frames."""
    x = layers.conv(16, 4, strides=2, padding="same")(x)
    x = layers.conv(32, 4, strides=2, padding="same")(x)
    return keras.layers.Flatten(dtype=layers.dtype_policy)(x)


IMPALA_STACKS = (16, 32, 32)  # channels of the IMPALA network's three stacks (Espeholt et al. 2018)


def _impala_body(layers: _Layers, x, padding: str = "valid"):
    """The IMPALA network's encoder (Espeholt et al. 2018) as Dopamine's ImpalaEncoder runs it: per stack a 3x3
    convolution, a 3x3 max-pool of stride 2 and two residual blocks (relu, 3x3 conv, relu, 3x3 conv, plus the
    block's input), all 'same' padded whatever `padding` says; then relu, flattened. 84x84 frames end in an
    11x11x32 map, 42x42 in 6x6x32; with the head's dense 512 (Dopamine's ImpalaDQNNetwork; the paper's agent has
    256, then an LSTM) it holds 2.08M weights at 84x84 against the Nature CNN's 1.69M, most in the dense layer."""
    policy = layers.dtype_policy
    for channels in IMPALA_STACKS:
        x = layers.conv(channels, 3, strides=1, padding="same", activation=None)(x)
        x = keras.layers.MaxPooling2D(3, strides=2, padding="same", dtype=policy)(x)
        for _ in range(2):
            y = keras.layers.ReLU(dtype=policy)(x)
            y = layers.conv(channels, 3, strides=1, padding="same")(y)
            y = layers.conv(channels, 3, strides=1, padding="same", activation=None)(y)
            x = keras.layers.Add(dtype=policy)([x, y])
    return keras.layers.Flatten(dtype=policy)(keras.layers.ReLU(dtype=policy)(x))


class _Cnn(NamedTuple):
    body: Callable  # (layers, channels-last images in [0, 1], padding) -> flattened features
    hidden: int  # the head's dense layer over them


CNNS = {"nature_cnn": _Cnn(_nature_body, 512), "small_cnn": _Cnn(_small_body, 256),
        "impala": _Cnn(_impala_body, 512)}


def image_cnn(kind: str, observation_shape: tuple, num_actions: int, dtype_policy: str = "float32",
              seed: int | None = None, head: HeadSpec = HeadSpec(), padding: str = "valid") -> keras.Model:
    """The CNN `kind` (a key of CNNS) over a uint8 image stack [stack, height, width] (or [H, W], or colour
    stacks: `_channels_last`), moved to channels-last (the layout CPU convolutions support) and scaled to
    [0, 1] inside the graph, then the head over its features."""
    layers, policy = _Layers(dtype_policy, seed, head), dtype_policy
    inputs = keras.Input(observation_shape, dtype="uint8", name="observation")
    x = CNNS[kind].body(layers, _scaled_channels_last(inputs, observation_shape, policy), padding)
    return keras.Model(inputs, _head(layers, x, CNNS[kind].hidden, num_actions), name=kind, dtype=policy)


def encoded_network(layout, kind: str, num_actions: int, hidden_sizes: tuple, dtype_policy: str = "float32",
                    seed: int | None = None, head: HeadSpec = HeadSpec(), conv_padding: str = "valid") -> keras.Model:
    """The Q-network of byte-frame observations (`tfdqn.envs.observation_layout`), as SB3's CombinedExtractor:
    each image through a CNN of its own (`kind`, or for auto the one its size fits), every other part one-hot,
    0/1 or float, all concatenated, then the MLP's hidden layers and the head. mlp flattens images into the rest."""
    layers, policy = _Layers(dtype_policy, seed, head), dtype_policy
    inputs = keras.Input((layout.width,), dtype="uint8", name="observation")
    cnns = encoded_cnns(layout, kind, conv_padding)  # a misfit in one line
    features = ObservationFeatures(layout.to_config(), images=bool(cnns), dtype=policy)(inputs)
    pixels = features[len(features) - len(cnns):]  # after the vector features, where there are any
    features = features[:len(features) - len(cnns)]
    for (_, cnn), x in zip(cnns, pixels):
        features.append(CNNS[cnn].body(layers, x, conv_padding))
    x = features[0] if len(features) == 1 else keras.layers.Concatenate(dtype=policy)(features)
    for units in hidden_sizes[:-1]:
        x = layers.dense(units, activation="relu")(x)
    return keras.Model(inputs, _head(layers, x, hidden_sizes[-1], num_actions), name="encoded", dtype=policy)


def make_network(kind: str, observation_shape: tuple, observation_dtype, num_actions: int,
                 hidden_sizes: tuple, dtype_policy: str = "float32", seed: int | None = None,
                 head: HeadSpec = HeadSpec(), conv_padding: str = "valid", layout=None) -> keras.Model:
    """`auto` picks the Nature CNN for uint8 image observations of 36 pixels a side or more, `small_cnn` for
    smaller images, and the MLP otherwise; a CNN the observation does not fit is refused in one line.
    Byte-frame observations (`layout`, an `ObservationLayout`) get `encoded_network`.

    `dtype_policy`: every layer's ("mixed_bfloat16": bfloat16 compute with float32 weights; the Q-values
    stay float32). `seed`: same seed, same initial weights (None: drawn as Keras draws unseeded ones).
    `head`: dueling, noisy, distributional (`heads.HeadSpec`); the output is the expected Q either way.
    `conv_padding`: the Nature CNN's ("valid" or "same")."""
    if layout is not None:
        return encoded_network(layout, kind, num_actions, hidden_sizes, dtype_policy, seed, head, conv_padding)
    kind = network_kind(kind, observation_shape, observation_dtype, conv_padding)
    if kind == "mlp":
        return mlp(observation_shape, num_actions, hidden_sizes, dtype_policy, seed, head)
    return image_cnn(kind, observation_shape, num_actions, dtype_policy, seed, head, conv_padding)
