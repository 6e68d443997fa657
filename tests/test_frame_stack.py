import gymnasium
import numpy as np
import pytest

from tfdqn.replay.frame_stack import FrameStack


def step_frame(stream: int, step: int, shape=(2, 3)) -> np.ndarray:
    """A frame filled with a value that names its stream and step (never 0, which is padding)."""
    return np.full(shape, 100 * stream + step + 1, dtype=np.uint8)


def values(observation: np.ndarray) -> np.ndarray:
    """[num_streams, k] frame values; asserts that each frame is uniform."""
    flat = observation.reshape(*observation.shape[:2], -1)
    assert (flat == flat[..., :1]).all()
    return flat[..., 0]


def test_zero_padding_after_reset_then_exact_window():
    stack = FrameStack(num_streams=1, stack_size=4, frame_shape=(2, 3), dtype=np.uint8)
    stack.reset(0, step_frame(0, 0))
    assert stack.observation.shape == (1, 4, 2, 3)
    assert stack.observation.dtype == np.uint8
    np.testing.assert_array_equal(values(stack.observation), [[0, 0, 0, 1]])
    expected = [[0, 0, 1, 2], [0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]]
    for step, want in enumerate(expected, start=1):
        stack.push(step_frame(0, step)[None])
        np.testing.assert_array_equal(values(stack.observation), [want])


def test_streams_are_independent():
    stack = FrameStack(num_streams=3, stack_size=3, frame_shape=(2, 3), dtype=np.uint8)
    stack.reset_all(np.stack([step_frame(s, 0) for s in range(3)]))
    for step in (1, 2, 3):
        stack.push(np.stack([step_frame(s, step) for s in range(3)]))
    # stream 1's episode ends: its env was reset and returned a new first frame (step 50)
    stack.reset(1, step_frame(1, 50))
    np.testing.assert_array_equal(values(stack.observation), [[2, 3, 4], [0, 0, 151], [202, 203, 204]])
    stack.push(np.stack([step_frame(s, 51) for s in range(3)]))
    np.testing.assert_array_equal(values(stack.observation), [[3, 4, 52], [0, 151, 152], [203, 204, 252]])


def test_reset_all_pads_every_stream():
    stack = FrameStack(num_streams=2, stack_size=2, frame_shape=(1,), dtype=np.float32)
    stack.push(np.array([[5.0], [6.0]]))
    stack.push(np.array([[7.0], [8.0]]))
    stack.reset_all(np.array([[1.0], [2.0]]))
    np.testing.assert_array_equal(stack.observation[..., 0], [[0.0, 1.0], [0.0, 2.0]])


def test_stack_size_one_has_no_stack_axis():
    stack = FrameStack(num_streams=2, stack_size=1, frame_shape=(4,), dtype=np.float32)
    frames = np.arange(8, dtype=np.float32).reshape(2, 4)
    stack.push(frames)
    assert stack.observation.shape == (2, 4) and stack.observation.dtype == np.float32
    assert stack.observation_shape == (4,)
    np.testing.assert_array_equal(stack.observation, frames)
    stack.reset(1, np.ones(4, np.float32))
    np.testing.assert_array_equal(stack.observation, [[0, 1, 2, 3], [1, 1, 1, 1]])


def test_observation_handed_out_never_changes_and_is_read_only():
    stack = FrameStack(num_streams=1, stack_size=2, frame_shape=(1,), dtype=np.uint8)
    stack.reset(0, np.array([1]))
    before = stack.observation
    stack.push(np.array([[2]]))
    stack.reset(0, np.array([9]))
    np.testing.assert_array_equal(before[..., 0], [[0, 1]])
    with pytest.raises(ValueError):
        before[0, 0, 0] = 3


def test_wrong_frame_shape_is_rejected():
    stack = FrameStack(num_streams=2, stack_size=4, frame_shape=(84, 84), dtype=np.uint8)
    with pytest.raises(ValueError, match="expected"):
        stack.push(np.zeros((84, 84), np.uint8))
    with pytest.raises(ValueError, match="expected"):
        stack.reset(0, np.zeros((2, 84, 84), np.uint8))


def test_matches_gymnasium_frame_stack_with_zero_padding():
    """Same convention as gymnasium.wrappers.FrameStackObservation(padding_type="zero"), across resets."""
    env = gymnasium.make("CartPole-v1")
    reference = gymnasium.wrappers.FrameStackObservation(gymnasium.make("CartPole-v1"), 3, padding_type="zero")
    stack = FrameStack(num_streams=1, stack_size=3, frame_shape=(4,), dtype=np.float32)
    frame, _ = env.reset(seed=3)
    want, _ = reference.reset(seed=3)
    stack.reset(0, frame)
    for t in range(60):
        np.testing.assert_array_equal(stack.observation[0], want)
        frame, _, terminated, truncated, _ = env.step(0)
        want, _, ref_terminated, ref_truncated, _ = reference.step(0)
        assert (terminated, truncated) == (ref_terminated, ref_truncated)
        if terminated or truncated:
            frame, _ = env.reset()
            want, _ = reference.reset()
            stack.reset(0, frame)
        else:
            stack.push(frame[None])
