"""Graceful stop on SIGINT/SIGTERM: the loop checkpoints and exits; a second SIGINT exits at once.

Python delivers signals to the main thread only, and only there may handlers be installed: a run
started in another thread (a notebook's worker thread, a Ray Tune trainable) leaves the process's
handlers alone and is stopped through `request()` instead."""

import os
import signal
import threading


class StopRequest:
    """Installed for the duration of a run; `signal_number` is set by the first SIGINT or SIGTERM."""

    def __init__(self):
        self.signal_number = None
        self._previous = {}

    def _handle(self, signum, frame):
        if self.signal_number is not None and signum == signal.SIGINT:
            os._exit(128 + signum)  # second Ctrl-C: the user wants out now
        if self.signal_number is None:  # a later SIGTERM does not rename the stop (nor its exit code)
            self.signal_number = signum

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def request(self, signum: int = signal.SIGINT) -> None:
        """Stop the run as `signum` would (from any thread): checkpoint and return."""
        if self.signal_number is None:
            self.signal_number = signum

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    @property
    def requested(self) -> bool:
        return self.signal_number is not None

    @property
    def signal_name(self) -> str | None:
        """`SIGINT` or `SIGTERM` once one arrived, for the summary and `exit_code`."""
        return signal.Signals(self.signal_number).name if self.requested else None


def exit_code(signal_name: str) -> int:
    """The shell's convention for a process ended by a signal: 128 + its number (130, 143)."""
    return 128 + int(signal.Signals[signal_name])
