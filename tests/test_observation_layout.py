"""Byte frames of structured observations: stored compactly, decoded inside the graph into what gymnasium's
`spaces.flatten` gives (one-hot, 0/1, floats), images channels last, masks as legal actions; the export's
encoding from the env's own observation equals the env wrapper's; what cannot be trained is refused."""

import gymnasium
import numpy as np
import pytest
import tensorflow as tf

from tfdqn.agent.observation_encoder import ObservationFeatures, encode, input_specs, legal_actions
from tfdqn.envs.observation_layout import make_layout
from tfdqn.errors import UserError

SPACE = gymnasium.spaces.Dict({
    "action_mask": gymnasium.spaces.MultiBinary(5),
    "camera": gymnasium.spaces.Box(0, 255, (6, 7, 3), np.uint8),
    "cell": gymnasium.spaces.Discrete(300, start=-4),
    "dice": gymnasium.spaces.MultiDiscrete([[3, 4], [2, 6]]),
    "lights": gymnasium.spaces.MultiBinary(4),
    "pose": gymnasium.spaces.Box(-2.0, 2.0, (3,), np.float32),
    "pair": gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(7), gymnasium.spaces.Box(-1, 1, (2,), np.float64))),
})


def _samples(count, seed=0):
    SPACE.seed(seed)
    return [SPACE.sample() for _ in range(count)]


def test_each_part_is_stored_in_its_fewest_bytes():
    layout = make_layout(SPACE, 5, "observation:action_mask")
    widths = {"/".join(map(str, part.path)) or part.kind: part.width for part in layout.parts}
    # camera bytes, cell an int32 (300 values), dice 4 bytes, lights 4, pose 3 float32, pair's 1 + 2 float32, mask 5
    assert widths == {"camera": 126, "cell": 4, "dice": 4, "lights": 4, "pose": 12, "pair/0": 1, "pair/1": 8,
                      "mask": 5}
    assert layout.width == sum(widths.values()) == 164
    assert "legal-action mask from observation:action_mask, 164 bytes per state" in layout.describe()


def test_the_network_reads_what_spaces_flatten_gives_and_the_image_channels_last():
    layout = make_layout(SPACE, 5, "observation:action_mask")
    samples = _samples(6)
    frames = np.stack([layout.encode(sample, {}) for sample in samples])
    vector, image = ObservationFeatures(layout.to_config())(tf.constant(frames))
    without = gymnasium.spaces.Dict({k: v for k, v in SPACE.spaces.items() if k not in ("action_mask", "camera")})
    flat = np.stack([gymnasium.spaces.flatten(without, {k: s[k] for k in without.spaces}) for s in samples])
    np.testing.assert_allclose(vector.numpy(), flat.astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(image.numpy(), np.stack([s["camera"] for s in samples]) / 255.0, rtol=1e-6)
    legal = legal_actions(layout, tf.constant(frames)).numpy()
    masks = np.stack([s["action_mask"] for s in samples]).astype(bool)
    expected = np.where(masks.any(axis=1, keepdims=True), masks, True)  # a state with none: every action
    np.testing.assert_array_equal(legal, expected)
    np.testing.assert_array_equal(layout.legal(frames), expected)


def test_the_exported_inputs_encode_to_the_frames_the_env_wrapper_stores():
    layout = make_layout(SPACE, 5, "observation:action_mask")
    samples = _samples(4, seed=1)
    frames = np.stack([layout.encode(sample, {}) for sample in samples])
    batch = {"camera": np.stack([s["camera"] for s in samples]), "cell": np.array([s["cell"] for s in samples]),
             "dice": np.stack([s["dice"] for s in samples]), "lights": np.stack([s["lights"] for s in samples]),
             "pose": np.stack([s["pose"] for s in samples]),
             "pair": (np.array([s["pair"][0] for s in samples]), np.stack([s["pair"][1] for s in samples])),
             "action_mask": np.stack([s["action_mask"] for s in samples])}
    inputs, single = layout.batch_inputs(batch)
    assert not single and set(inputs) == set(input_specs(layout)) == {
        "observation_camera", "observation_cell", "observation_dice", "observation_lights", "observation_pose",
        "observation_pair_0", "observation_pair_1", "action_mask"}
    np.testing.assert_array_equal(encode(layout, {k: tf.constant(v) for k, v in inputs.items()}).numpy(), frames)
    one, single = layout.batch_inputs(samples[2])
    assert single and np.array_equal(encode(layout, {k: tf.constant(v) for k, v in one.items()}).numpy()[0], frames[2])


def test_an_info_mask_is_read_from_the_info_and_a_missing_one_allows_every_action():
    layout = make_layout(gymnasium.spaces.Discrete(500), 6, "info:action_mask")
    frame = layout.encode(314, {"action_mask": np.array([1, 1, 0, 0, 0, 0], np.int8)})
    np.testing.assert_array_equal(frame, [58, 1, 0, 0, 1, 1, 0, 0, 0, 0])  # 314 as int32 bytes, then the mask
    assert layout.legal(frame[None]).tolist() == [[True, True, False, False, False, False]]
    assert layout.legal(layout.encode(0, {})[None]).all()
    with pytest.raises(UserError, match="action mask info:action_mask has 3 entries; allowed: one per action"):
        layout.encode(3, {"action_mask": np.ones(3)})


@pytest.mark.parametrize("space, shown", [
    (gymnasium.spaces.Text(5), "Text("),
    (gymnasium.spaces.Dict({"a": gymnasium.spaces.Discrete(2), "g": gymnasium.spaces.Sequence(
        gymnasium.spaces.Discrete(2))}), "Sequence("),
])
def test_a_space_that_cannot_be_trained_on_is_refused_in_one_line(space, shown):
    with pytest.raises(UserError) as error:
        make_layout(space, 2, None)
    message = str(error.value)
    assert "\n" not in message and shown in message
    assert message.endswith("allowed: Box, Discrete, MultiDiscrete, MultiBinary, and Tuple or Dict of those")


def test_a_dict_of_images_alone_gets_a_cnn_each_that_fits_it():
    from tfdqn.agent.networks import make_network

    space = gymnasium.spaces.Dict({"near": gymnasium.spaces.Box(0, 255, (20, 20), np.uint8),
                                   "far": gymnasium.spaces.Box(0, 255, (3, 40, 40), np.uint8)})
    layout = make_layout(space, 4, None)
    network = make_network("auto", (layout.width,), np.uint8, 4, (32,), seed=0, layout=layout)
    kernels = sorted(tuple(layer.kernel.shape[:2]) for layer in network.layers if layer.__class__.__name__ == "Conv2D")
    assert kernels == [(3, 3), (4, 4), (4, 4), (4, 4), (8, 8)]  # the Nature CNN's three on 40x40, small_cnn's two on 20x20
    space.seed(0)
    frames = np.stack([layout.encode(space.sample(), {}) for _ in range(3)])
    assert network(frames).shape == (3, 4)
    with pytest.raises(UserError, match="network.kind = nature_cnn needs frames of at least 36x36"):
        make_network("nature_cnn", (layout.width,), np.uint8, 4, (32,), layout=layout)
