"""Phase timers: where the loop's wall time goes, as shares that add up to one."""

import time

PHASES = ("env_step", "act", "replay_add", "replay_sample", "update", "log", "checkpoint", "eval")


class PhaseTimer:
    """Accumulates seconds per phase between `reset` calls; time in no phase counts as `other`."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self._window_start = time.perf_counter()

    def add(self, phase: str, started: float) -> float:
        """Charge the time since `started` to `phase`; returns now, to chain into the next phase."""
        now = time.perf_counter()
        self.seconds[phase] += now - started
        return now

    def shares(self) -> dict:
        """Each phase's share of the window's wall time, `other` included, plus the window length."""
        wall = max(time.perf_counter() - self._window_start, 1e-9)
        shares = {f"share_{name}": seconds / wall for name, seconds in self.seconds.items()}
        shares["share_other"] = max(0.0, 1.0 - sum(shares.values()))
        return {"wall_seconds": wall, **shares}
