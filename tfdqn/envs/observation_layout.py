"""How an observation that is not one Box (Discrete, MultiDiscrete, MultiBinary, Tuple, Dict), or any observation
with a legal-action mask, becomes one flat byte frame for the replay, and how to read it back.

SB3 and gymnasium's `spaces.flatten` one-hot encode a Discrete before the replay: Taxi's Discrete(500) takes
500 floats per state. Here every part is stored compactly, in bytes: a Discrete as its index (1 byte up to 256
values, else 4), MultiBinary and uint8 images as bytes, a float Box as its float32 bytes; the network decodes
the frame inside the graph (`tfdqn.agent.observation_encoder`: one-hot, binary, float, image). The legal-action
mask is one more part, so the replay keeps each state's mask with its frame and the target reads the next
state's legal actions from the next frame. NumPy only: a LiteRT policy encodes with it without TensorFlow.
"""

from __future__ import annotations

import dataclasses
import math

import gymnasium
import numpy as np

from tfdqn.envs.wrappers import image_layout
from tfdqn.errors import UserError

MASK = "action_mask"  # the mask's part name, and the key gymnasium's Taxi and PettingZoo envs use for it
MASK_SOURCES = "auto, none, info:KEY or observation:KEY"  # env.action_mask's values
SPACES = "Box, Discrete, MultiDiscrete, MultiBinary, and Tuple or Dict of those"


@dataclasses.dataclass(frozen=True)
class Part:
    """One leaf of the observation (or the mask), stored as `dtype` bytes at `offset` of the frame."""

    path: tuple  # Dict keys and Tuple indices from the observation's root to this leaf; () for a lone space
    kind: str  # discrete (one index or several: MultiDiscrete), binary, box (float), image (uint8) or mask
    shape: tuple  # one observation's shape of this leaf as the env gives it
    sizes: tuple = ()  # discrete: values per entry
    starts: tuple = ()  # discrete: each entry's first value
    dtype: str = "uint8"  # how each value is stored: uint8, int32 or float32
    offset: int = 0  # first byte in the frame
    image: str | None = None  # image: hw, hwc or chw (`wrappers.image_layout`)

    @property
    def count(self) -> int:
        return int(math.prod(self.shape))

    @property
    def width(self) -> int:
        return self.count * np.dtype(self.dtype).itemsize

    @property
    def input_dtype(self) -> np.dtype:
        """The dtype an exported policy takes this part in: int32 indices, int8 0/1, else as stored."""
        if self.kind == "discrete":
            return np.dtype(np.int32)
        return np.dtype(np.int8 if self.kind in ("binary", "mask") else self.dtype)

    @property
    def name(self) -> str:
        """The part's input name in an exported policy: observation, observation_KEY, or action_mask."""
        if self.kind == "mask":
            return MASK
        return "_".join(["observation", *(_identifier(str(key)) for key in self.path)])


def _identifier(key: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in key)


def _leaf(path: tuple, space) -> Part:
    if isinstance(space, gymnasium.spaces.Discrete):
        n = int(space.n)
        return Part(path, "discrete", (), (n,), (int(space.start),), "uint8" if n <= 256 else "int32")
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        sizes, starts = space.nvec.reshape(-1), space.start.reshape(-1)
        return Part(path, "discrete", tuple(map(int, space.shape)), tuple(map(int, sizes)), tuple(map(int, starts)),
                    "uint8" if sizes.max() <= 256 else "int32")
    if isinstance(space, gymnasium.spaces.MultiBinary):
        return Part(path, "binary", tuple(map(int, np.atleast_1d(space.shape))))
    if isinstance(space, gymnasium.spaces.Box):
        if (layout := image_layout(space)) is not None:
            return Part(path, "image", tuple(space.shape), image=layout)
        return Part(path, "box", tuple(space.shape), dtype="uint8" if space.dtype == np.uint8 else "float32")
    shown = " ".join(str(space).split())
    raise UserError(f"observation space {shown} cannot be trained on; allowed: {SPACES}")


def _leaves(path: tuple, space) -> list[Part]:
    if isinstance(space, gymnasium.spaces.Dict):
        return [part for key, sub in space.spaces.items() for part in _leaves((*path, key), sub)]
    if isinstance(space, gymnasium.spaces.Tuple):
        return [part for index, sub in enumerate(space.spaces) for part in _leaves((*path, index), sub)]
    return [_leaf(path, space)]


@dataclasses.dataclass(frozen=True)
class ObservationLayout:
    """The parts of an observation in frame order, and where the legal-action mask comes from (None: no mask).

    `nesting` is how the env gives the observation: "single", "tuple" or "dict"; `mask_source` is
    "info:KEY" (the step's info) or "observation:KEY" (a top-level Dict entry, kept out of the network's input)."""

    parts: tuple
    nesting: str
    num_actions: int
    mask_source: str | None = None

    @property
    def width(self) -> int:
        return sum(part.width for part in self.parts)

    @property
    def mask(self) -> Part | None:
        return next((part for part in self.parts if part.kind == "mask"), None)

    @property
    def inputs(self) -> tuple:
        """The parts the network reads: every part but the mask."""
        return tuple(part for part in self.parts if part.kind != "mask")

    def encode(self, observation, info: dict) -> np.ndarray:
        """One observation as the env gives it (and the step's info, for an info mask) as its byte frame."""
        return np.concatenate([self._bytes(part, self._value(part, observation, info)) for part in self.parts])

    def _value(self, part: Part, observation, info: dict):
        if part.kind != "mask":
            for key in part.path:
                observation = observation[key]
            return observation
        where, key = self.mask_source.split(":", 1)
        value = info.get(key) if where == "info" else observation[key]
        if value is None:  # an info without the mask (a wrapper's own step): every action counts as legal
            return np.ones(self.num_actions, np.uint8)
        if np.size(value) != self.num_actions:
            raise UserError(f"action mask {self.mask_source} has {np.size(value)} entries; allowed: one per action "
                            f"({self.num_actions})")
        return value

    @staticmethod
    def _bytes(part: Part, value) -> np.ndarray:
        value = np.asarray(value).reshape(-1)
        if part.kind == "discrete":
            value = value - np.asarray(part.starts)
        elif part.kind in ("binary", "mask"):
            value = value != 0
        return value.astype(np.dtype(part.dtype).newbyteorder("<")).view(np.uint8)

    def batch_inputs(self, observations, action_mask=None, info=None) -> tuple[dict, bool]:
        """(part name -> [B, *shape] array in its `input_dtype`, whether one observation was given) for one
        observation as the env gives it or a batch of them (each leaf with a leading batch axis). The mask is
        `action_mask` where given, else where the env gives it: a Dict observation's entry (`observation:KEY`) or
        the step's `info` (`info:KEY`); a policy never guesses that every action is legal."""
        values, single = {}, None
        for part in self.parts:
            if part.kind == "mask":
                continue
            value = np.asarray(self._value(part, observations, {}))
            single = value.ndim == len(part.shape) if single is None else single
            values[part.name] = value
        if self.mask is not None:
            values[MASK] = np.asarray(self._given_mask(observations, action_mask, info))
        shapes = {part.name: part.shape for part in self.parts}
        batch = {name: np.asarray(v[None] if single and v.ndim == len(shapes[name]) else v) for name, v in values.items()}
        size = max(len(v) for v in batch.values())
        return {part.name: np.broadcast_to(batch[part.name], (size, *part.shape)).astype(part.input_dtype)
                for part in self.parts}, bool(single)

    def _given_mask(self, observations, action_mask, info):
        """The legal-action mask a policy caller gave: `action_mask`, else the observation's or info's entry."""
        if action_mask is not None:
            return action_mask
        where, key = self.mask_source.split(":", 1)
        source = observations if where == "observation" else info
        if source is None or key not in source:
            given = "no info" if source is None else f"an {where} without {key!r}"
            ways = "action_mask=... or info=... (the step's info)" if where == "info" else "action_mask=..."
            raise ValueError(f"this policy's env gives its legal actions in {where}[{key!r}], and the call gave "
                             f"{given}; allowed: {ways}")
        return source[key]

    def frame_inputs(self, frames: np.ndarray) -> dict:
        """`batch_inputs` of the observations byte frames hold: what an exported policy takes for them."""
        inputs = {}
        for part in self.parts:
            raw = np.ascontiguousarray(frames[:, part.offset:part.offset + part.width])
            values = raw.view(np.dtype(part.dtype).newbyteorder("<")).reshape(len(frames), *part.shape)
            inputs[part.name] = (values + np.reshape(part.starts, part.shape) if part.kind == "discrete"
                                 else values).astype(part.input_dtype)
        return inputs

    def legal(self, frames: np.ndarray) -> np.ndarray | None:
        """[N, actions] bool: each frame's legal actions (every action where a frame has none), or None
        without a mask."""
        part = self.mask
        if part is None:
            return None
        legal = frames[:, part.offset:part.offset + part.width] != 0
        return legal | ~legal.any(axis=1, keepdims=True)

    def illegal(self, frames: np.ndarray, actions: np.ndarray) -> int:
        """How many of `actions` (one per frame) the frames' masks call illegal."""
        legal = self.legal(frames)
        return 0 if legal is None else int(np.count_nonzero(~legal[np.arange(len(actions)), actions]))

    def describe(self) -> str:
        """For the protocol line: the parts and the bytes each state takes."""
        shown = ", ".join(f"{'/'.join(map(str, p.path)) or 'observation'}: {_describe(p)}" for p in self.inputs)
        mask = f", legal-action mask from {self.mask_source}" if self.mask_source else ""
        return f"observation {self.nesting} ({shown}){mask}, {self.width} byte{'s' * (self.width != 1)} per state in the replay"

    def to_config(self) -> dict:
        """Plain data (for a saved network and policy.json); `from_config` reads it back."""
        return {"parts": [dataclasses.asdict(part) for part in self.parts], "nesting": self.nesting,
                "num_actions": self.num_actions, "mask_source": self.mask_source}

    @classmethod
    def from_config(cls, config: dict) -> ObservationLayout:
        parts = tuple(Part(**{key: tuple(value) if isinstance(value, list) else value for key, value in part.items()})
                      for part in config["parts"])
        return cls(parts, config["nesting"], config["num_actions"], config["mask_source"])


def _describe(part: Part) -> str:
    if part.kind == "discrete":
        return f"one-hot of {part.sizes[0]}" if part.shape == () else f"{part.count} one-hots"
    if part.kind == "image":
        return f"uint8 image {'x'.join(map(str, part.shape))} ({part.image.upper()})"
    return f"{part.kind} {list(part.shape)}"


def mask_source(space, probe_info: dict, setting: str) -> str | None:
    """Where the legal-action mask comes from, by `env.action_mask` (`MASK_SOURCES`): "auto" takes a Dict
    observation's `action_mask` entry, else the info's `action_mask` (`probe_info`: a reset's info)."""
    if setting == "none":
        return None
    if setting == "auto":
        if isinstance(space, gymnasium.spaces.Dict) and MASK in space.spaces:
            return f"observation:{MASK}"
        return f"info:{MASK}" if MASK in probe_info else None
    where, key = setting.split(":", 1)
    if where == "observation" and not (isinstance(space, gymnasium.spaces.Dict) and key in space.spaces):
        raise UserError(f"env.action_mask = {setting}, but the observation has no Dict entry {key!r}; allowed: "
                        f"{MASK_SOURCES}")
    if where == "info" and key not in probe_info:
        raise UserError(f"env.action_mask = {setting}, but a reset's info has no {key!r}; allowed: {MASK_SOURCES}")
    return setting


def make_layout(space, num_actions: int, source: str | None) -> ObservationLayout:
    """The layout of observations from `space`, with the mask from `source` (`mask_source`)."""
    nesting = "dict" if isinstance(space, gymnasium.spaces.Dict) else \
        "tuple" if isinstance(space, gymnasium.spaces.Tuple) else "single"
    if source is not None and source.startswith("observation:"):
        key = source.split(":", 1)[1]
        space = gymnasium.spaces.Dict({k: v for k, v in space.spaces.items() if k != key})
    parts = _leaves((), space)
    if source is not None:
        parts.append(Part((), "mask", (num_actions,)))
    offset, placed = 0, []
    for part in parts:
        placed.append(dataclasses.replace(part, offset=offset))
        offset += part.width
    return ObservationLayout(tuple(placed), nesting, num_actions, source)

