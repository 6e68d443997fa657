"""The PyTorch peer for tools/bench.py: the same Nature-CNN act and double-DQN update, written the
way PyTorch DQN code usually is (eager mode, NCHW, epsilon-greedy in Python), so a ratio against it
says what tfdqn's compiled graphs buy. Imported only when `--peer torch` asks for it."""

from __future__ import annotations

import sys

import numpy as np
import torch
from torch import nn



def nature_cnn(num_actions: int, stack_size: int = 4) -> nn.Module:
    """conv 32x8x8/4, 64x4x4/2, 64x3x3/1, dense 512: the layer shapes tfdqn's `nature_cnn` has."""
    return nn.Sequential(
        nn.Conv2d(stack_size, 32, 8, stride=4), nn.ReLU(),
        nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, num_actions))


class TorchDQN:
    """Online and target nets, Adam and a target-sync counter, with tfdqn's Atari hyperparameters."""

    def __init__(self, num_actions: int, learning_rate: float, adam_epsilon: float, gamma: float,
                 max_grad_norm: float, target_update_period: int, seed: int = 0, bfloat16: bool = False):
        torch.manual_seed(seed)
        self.bfloat16 = bfloat16  # CPU autocast: bfloat16 convolutions and matmuls, float32 weights and loss
        self.online, self.target = nature_cnn(num_actions), nature_cnn(num_actions)
        self.target.load_state_dict(self.online.state_dict())
        self.optimizer = torch.optim.Adam(self.online.parameters(), lr=learning_rate, eps=adam_epsilon)
        self.num_actions, self.gamma = num_actions, gamma
        self.max_grad_norm, self.target_update_period = max_grad_norm, target_update_period
        self.updates = 0
        self.rng = np.random.default_rng(seed)

    def _autocast(self):
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bfloat16)

    def act(self, observation: np.ndarray, epsilon: float) -> np.ndarray:
        """Epsilon-greedy per row, random numbers from NumPy: the usual PyTorch DQN actor."""
        with torch.no_grad(), self._autocast():
            q = self.online(torch.from_numpy(observation).float() / 255.0)
        greedy = q.argmax(dim=1).numpy()
        random = self.rng.integers(0, self.num_actions, len(observation))
        return np.where(self.rng.random(len(observation)) < epsilon, random, greedy)

    def update(self, observation, action, reward, discount, next_observation) -> float:
        """One double-DQN step: clipped reward, Huber loss, global-norm clip, periodic target copy."""
        obs = torch.from_numpy(observation).float() / 255.0
        next_obs = torch.from_numpy(next_observation).float() / 255.0
        with torch.no_grad(), self._autocast():
            best = self.online(next_obs).argmax(dim=1, keepdim=True)
            next_value = self.target(next_obs).gather(1, best).squeeze(1).float()
            target = torch.sign(torch.from_numpy(reward)) + self.gamma * torch.from_numpy(discount) * next_value
        with self._autocast():
            q = self.online(obs).gather(1, torch.from_numpy(action).long().unsqueeze(1)).squeeze(1).float()
        loss = nn.functional.huber_loss(q, target, delta=1.0)
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.online.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.updates += 1
        if self.updates % self.target_update_period == 0:
            self.target.load_state_dict(self.online.state_dict())
        return loss.item()


def measure(seconds: float, batch_size: int = 32, num_actions: int = 4) -> dict:
    """Calls/s of the update at `batch_size` and of act at batch 1 and 8, in float32 and under bfloat16
    autocast, each timed for about `seconds`."""
    from tools.bench_timing import calls_per_second, peer_inputs

    hyperparameters = dict(learning_rate=1e-4, adam_epsilon=1.5e-4, gamma=0.99, max_grad_norm=10.0,
                           target_update_period=2000)
    peer, peer_bf16 = TorchDQN(num_actions, **hyperparameters), TorchDQN(num_actions, **hyperparameters, bfloat16=True)
    batch, one, eight = peer_inputs(batch_size, num_actions)
    x = torch.randn(2048, 2048)
    matmul_per_sec = calls_per_second(lambda: x @ x, seconds)
    return {"threads": torch.get_num_threads(), "version": torch.__version__,
            "peak_flops": matmul_per_sec * 2 * 2048**3,
            "updates_per_sec": calls_per_second(lambda: peer.update(*batch), seconds),
            "act_per_sec_b1": calls_per_second(lambda: peer.act(one, 0.05), seconds),
            "act_per_sec_b8": calls_per_second(lambda: peer.act(eight, 0.05), seconds),
            "updates_per_sec_bfloat16": calls_per_second(lambda: peer_bf16.update(*batch), seconds),
            "act_per_sec_b1_bfloat16": calls_per_second(lambda: peer_bf16.act(one, 0.05), seconds),
            "act_per_sec_b8_bfloat16": calls_per_second(lambda: peer_bf16.act(eight, 0.05), seconds)}


def main(argv: list[str] | None = None) -> int:
    from tools.bench_timing import peer_main

    return peer_main("python -m tools.peer_torch", __doc__, measure, argv)


if __name__ == "__main__":
    sys.exit(main())
