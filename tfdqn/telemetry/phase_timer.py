"""Phase timers: where the loop's wall time goes, as shares that add up to one."""

import threading
import time

# "wait": async mode only, the actors waiting for the learner to catch up.
PHASES = ("env_step", "act", "replay_add", "replay_sample", "update", "wait", "log", "checkpoint", "eval")


def _shares(seconds: dict, wall: float) -> dict:
    wall = max(wall, 1e-9)
    shares = {f"share_{name}": value / wall for name, value in seconds.items()}
    shares["share_other"] = max(0.0, 1.0 - sum(shares.values()))
    return shares


class PhaseTimer:
    """Seconds per phase, both since the last `window_shares` call and since construction.

    Time in no phase counts as `other`, so the shares of a window always sum to one. A phase still
    running when a window closes is charged to the next window only for its part after the close (the
    part before was `other` in the closed one). Thread-safe: the async learner's timer is read by the
    main thread. Time that two threads adding to one timer overlap is charged twice."""

    def __init__(self):
        self._lock = threading.Lock()
        self._started = time.perf_counter()
        self._totals = dict.fromkeys(PHASES, 0.0)
        self._window = dict.fromkeys(PHASES, 0.0)
        self._window_start = self._started

    def restart(self) -> None:
        """Start from zero now: a run's first window begins when its loop does, not while it was built."""
        with self._lock:
            self._started = self._window_start = time.perf_counter()
            self._totals = dict.fromkeys(PHASES, 0.0)
            self._window = dict.fromkeys(PHASES, 0.0)

    def add(self, phase: str, started: float) -> float:
        """Charge the time since `started` to `phase`; returns now, to chain into the next phase."""
        with self._lock:  # `now` read under the lock: a window never closes between it and the charge
            now = time.perf_counter()
            self._window[phase] += now - max(started, self._window_start)
            self._totals[phase] += now - started
        return now

    def window_shares(self) -> dict:
        """Shares of the window that ends now, with its length in `wall_seconds`; starts a new window."""
        with self._lock:
            now = time.perf_counter()
            shares = {"wall_seconds": now - self._window_start, **_shares(self._window, now - self._window_start)}
            self._window = dict.fromkeys(PHASES, 0.0)
            self._window_start = now
        return shares

    def charged(self) -> set[str]:
        """The phases this timer has charged time to since it (re)started: only their shares mean something."""
        with self._lock:
            return {phase for phase, seconds in self._totals.items() if seconds > 0}

    def run_shares(self) -> dict:
        """Shares of the whole run so far."""
        with self._lock:
            return _shares(self._totals, time.perf_counter() - self._started)
