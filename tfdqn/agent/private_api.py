"""The fence around private TensorFlow and Keras APIs, used only for speed (`FlatCall`, `FusedAdam`).

A private API may change shape or vanish in any release without notice. Each user of one checks, once,
that the installed version lies in the range it was verified with, and only then that the attribute is there
with the expected shape (a probe may open a library or call into it, which on an unverified version could crash
the process instead of failing); where not, it warns once per process and takes the public path, which gives
the same results more slowly. So a TensorFlow or Keras upgrade can cost speed but never correctness.
"""

import re
import warnings
from typing import Callable

_warned: set[str] = set()


def major_minor(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    return int(match[1]), int(match[2])


def verified(version: str, oldest: str, newest: str) -> bool:
    """Whether `version`'s major.minor lies in [oldest, newest]: patch releases and release candidates of
    a verified minor version count as verified, a later minor version does not."""
    return major_minor(oldest) <= major_minor(version) <= major_minor(newest)


def private_path_ok(user: str, library: str, version: str, verified_range: tuple[str, str],
                    feature: str, feature_ok: Callable[[], bool], public_path: str) -> bool:
    """True where `user` may take its private path; otherwise warns (once per process and user) and
    returns False. `feature_ok()` is the caller's check that `feature` exists with the expected shape, called
    only on a verified version."""
    oldest, newest = verified_range
    if not verified(version, oldest, newest):
        reason = f"{library} {version} is not among the versions {feature} was verified with ({oldest} to {newest})"
    elif not feature_ok():
        reason = f"{library} {version} has no {feature} of the expected shape"
    else:
        return True
    if user not in _warned:
        _warned.add(user)
        warnings.warn(f"{user}: {reason}; using the slower public path, {public_path}", RuntimeWarning,
                      stacklevel=3)
    return False
