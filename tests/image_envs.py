"""Image envs of the tests' own, registered for `--env tests.image_envs:<Id>`."""

import gymnasium
import numpy as np


class ColorSide(gymnasium.Env):
    """A 32x32 RGB image (uint8, [H, W, C] as gymnasium's image envs give them) with a bright square on its
    left or right half, at a random place and colour; the action names the side (0 left, 1 right) for a
    reward of 1. Ten images a game: a random policy scores 5, one that reads the image 10."""

    observation_space = gymnasium.spaces.Box(0, 255, (32, 32, 3), np.uint8)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action):
        reward = float(int(action) == self._side)
        self._t += 1
        return self._draw(), reward, self._t >= 10, False, {}

    def _draw(self) -> np.ndarray:
        self._side = int(self.np_random.integers(2))
        image = np.zeros((32, 32, 3), np.uint8)
        row = int(self.np_random.integers(0, 26))
        column = int(self.np_random.integers(0, 10)) + 16 * self._side
        image[row:row + 6, column:column + 6] = self.np_random.integers(128, 256, 3)
        return image


gymnasium.register("ColorSide-v0", entry_point=ColorSide)


class ColorSideFlipped(gymnasium.Env):
    """A Dict observation: a 16x16 RGB `image` with a bright square on one half, a `flip` bit and an `action_mask`
    that forbids action 2 (a trap paying -1). Action `side XOR flip` pays 1, so the agent must read the image and
    the bit together: reading either alone scores 5 of 10, both 10."""

    observation_space = gymnasium.spaces.Dict({
        "action_mask": gymnasium.spaces.MultiBinary(3), "flip": gymnasium.spaces.Discrete(2),
        "image": gymnasium.spaces.Box(0, 255, (16, 16, 3), np.uint8)})
    action_space = gymnasium.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._observe(), {}

    def step(self, action):
        reward = -1.0 if int(action) == 2 else float(int(action) == self._side ^ self._flip)
        self._t += 1
        return self._observe(), reward, self._t >= 10, False, {}

    def _observe(self) -> dict:
        self._side, self._flip = int(self.np_random.integers(2)), int(self.np_random.integers(2))
        image = np.zeros((16, 16, 3), np.uint8)
        row, column = int(self.np_random.integers(0, 12)), int(self.np_random.integers(0, 4)) + 8 * self._side
        image[row:row + 4, column:column + 4] = self.np_random.integers(128, 256, 3)
        return {"action_mask": np.array([1, 1, 0], np.int8), "flip": self._flip, "image": image}


gymnasium.register("ColorSideFlipped-v0", entry_point=ColorSideFlipped)


class ColorSideStrict(ColorSideFlipped):
    """ColorSideFlipped whose step raises on the action its mask forbids, as an env that enforces its rules does."""

    def step(self, action):
        if int(action) == 2:
            raise ValueError("action 2 is illegal here")
        return super().step(action)


gymnasium.register("ColorSideStrict-v0", entry_point=ColorSideStrict)
