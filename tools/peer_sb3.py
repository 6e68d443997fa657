"""The Stable-Baselines3 peer for tools/bench.py: end-to-end Breakout env steps/s of SB3's DQN with
tfdqn's Atari hyperparameters (tfdqn/configs/atari.yaml), so the ratio compares whole training loops.

Run by bench.py in its own process: `python -m tools.peer_sb3 TOTAL_STEPS LEARNING_STARTS CAPACITY`.
SB3's DQN has no double-DQN option, so its update does one forward pass fewer than tfdqn's."""

import json
import sys
import time

from tfdqn.cli import OneLineErrorParser, number, start_tensorflow


def steps_per_second(total_steps: int, learning_starts: int, capacity: int) -> dict:
    start_tensorflow()  # SB3 imports TensorFlow (through TensorBoard): its C++ start-up lines stay off stderr
    import ale_py
    import gymnasium
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import VecFrameStack

    gymnasium.register_envs(ale_py)
    # SB3's AtariWrapper adds no-op starts (30), frame skip 4 with max-pooling, life loss as terminal,
    # FIRE on reset, reward clipping and 84x84 grayscale: the steps tfdqn's env applies.
    env = VecFrameStack(make_atari_env("ALE/Breakout-v5", n_envs=1, seed=0,
                                       env_kwargs={"frameskip": 1, "repeat_action_probability": 0.25}), 4)
    model = DQN("CnnPolicy", env, buffer_size=capacity, learning_starts=learning_starts, batch_size=32,
                train_freq=4, gradient_steps=1, target_update_interval=2000 * 4, learning_rate=1e-4, gamma=0.99,
                max_grad_norm=10.0, exploration_initial_eps=1.0, exploration_final_eps=0.01,
                exploration_fraction=min(1.0, 1_000_000 / total_steps),
                policy_kwargs={"optimizer_kwargs": {"eps": 1.5e-4}}, device="cpu", seed=0, verbose=0)
    model.set_logger(Logger(None, []))  # no log output, so SB3 makes no SB3-<date> folder in the temp dir
    start = time.perf_counter()
    model.learn(total_timesteps=total_steps)
    wall = time.perf_counter() - start
    return {"train_steps_per_sec_interval4": total_steps / wall, "wall_seconds": wall,
            "updates": int(model._n_updates), "torch": torch.__version__,
            "stable_baselines3": __import__("stable_baselines3").__version__}


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrorParser(prog="python -m tools.peer_sb3", description=__doc__.split("\n\n")[0])
    for name, doc in (("total_steps", "env steps to train"), ("learning_starts", "env steps before the first update"),
                      ("capacity", "replay transitions")):
        parser.add_argument(name, type=number(int), metavar=name.upper(), help=doc)
    args = parser.parse_args(argv)
    print(json.dumps(steps_per_second(args.total_steps, args.learning_starts, args.capacity)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
