"""The Stable-Baselines3 peer of tools/bench_cartpole.py: SB3's DQN on CartPole-v1 with the RL zoo's
tuned hyperparameters, evaluated greedily every `--eval-every` env steps by SB3's own `EvalCallback`, which
keeps the best-evaluated model (`best_model_save_path`): SB3's product, as tfdqn's is its best-evaluated network.

Run by bench_cartpole.py in its own process, `python -m tools.peer_sb3_cartpole --seed N`. Prints one
JSON line per event, each with `time` (Unix seconds), so the bench measures from the moment it started
the process: `learn_start` once the model is built, `eval` (env steps, mean return) per evaluation, and
at the end `final` (the last model) and `final_best` (the kept best model), on the same seeded games.

TensorFlow is kept out of this process: SB3 needs none, but its TensorBoard import would load it when
it is installed (as it is beside tfdqn), which would add seconds a SB3 user does not wait.
"""

import argparse
import json
import pathlib
import sys
import tempfile
import time

sys.modules["tensorflow"] = None  # import tensorflow -> ImportError; TensorBoard then uses its stub

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402
from stable_baselines3 import DQN  # noqa: E402
from stable_baselines3.common.callbacks import EvalCallback  # noqa: E402
from stable_baselines3.common.logger import Logger  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

# rl-baselines3-zoo, hyperparams/dqn.yml, CartPole-v1 (n_timesteps 5e4).
ZOO_CARTPOLE = {"learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000, "learning_starts": 1000,
                "gamma": 0.99, "target_update_interval": 10, "train_freq": 256, "gradient_steps": 128,
                "exploration_fraction": 0.16, "exploration_final_eps": 0.04,
                "policy_kwargs": {"net_arch": [256, 256]}}


def emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, "time": time.time(), **fields}), flush=True)


def evaluation_env(episodes: int) -> DummyVecEnv:
    """One env per episode, side by side, as tfdqn's evaluations play them."""
    return DummyVecEnv([lambda: gymnasium.make("CartPole-v1") for _ in range(episodes)])


class SeededEvaluation(EvalCallback):
    """SB3's EvalCallback (greedy, `episodes` games side by side, the best model saved), each evaluation's games
    seeded by its env step as tfdqn's are, and announced as it ends."""

    def __init__(self, period: int, episodes: int, seed: int, best_model_dir: str):
        super().__init__(evaluation_env(episodes), n_eval_episodes=episodes, eval_freq=period, deterministic=True,
                         best_model_save_path=best_model_dir, verbose=0)
        self._seed = seed

    def _on_step(self) -> bool:
        if self.n_calls % self.eval_freq == 0:
            self.eval_env.seed(self._seed * 1_000_003 + self.num_timesteps)
            keep_going = super()._on_step()
            emit("eval", env_steps=self.num_timesteps, return_mean=float(self.last_mean_reward))
            return keep_going
        return True


def final_return(model, seed: int, episodes: int) -> float:
    """The mean greedy return on the final games, the same seeded games for every model of a seed."""
    env = evaluation_env(episodes)
    env.seed(seed * 1_000_003 + 999_999_937)
    returns, _ = evaluate_policy(model, env, n_eval_episodes=episodes, deterministic=True, return_episode_rewards=True)
    return float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.peer_sb3_cartpole",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--total-steps", type=int, default=50_000)
    parser.add_argument("--eval-every", type=int, default=2000)
    parser.add_argument("--eval-episodes", type=int, default=10)
    args = parser.parse_args()
    model = DQN("MlpPolicy", gymnasium.make("CartPole-v1"), seed=args.seed, device="cpu", verbose=0, **ZOO_CARTPOLE)
    model.set_logger(Logger(None, []))  # no log output, so SB3 makes no SB3-<date> folder in the temp dir
    with tempfile.TemporaryDirectory() as best_model_dir:
        callback = SeededEvaluation(args.eval_every, args.eval_episodes, args.seed, best_model_dir)
        emit("learn_start")
        model.learn(total_timesteps=args.total_steps, callback=callback)
        emit("final", return_mean=final_return(model, args.seed, args.eval_episodes))
        best = DQN.load(pathlib.Path(best_model_dir) / "best_model", device="cpu")
        emit("final_best", return_mean=final_return(best, args.seed, args.eval_episodes),
             best_evaluation=float(callback.best_mean_reward))


if __name__ == "__main__":
    main()
