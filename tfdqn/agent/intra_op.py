"""One intra-op thread for a small act call, while the update keeps the whole pool.

TensorFlow has one intra-op pool per process, sized for the update. A batch-1 Nature CNN act split across
its two threads here costs more in handing work to the second than it saves: the act ran 1.25 times as
many calls a second on one thread (docs/experiments/performance.md). TensorFlow can cap a thread's own intra-op
parallelism (`tensorflow::SetPerThreadMaxParallelism`, which tf.data's `max_intra_op_parallelism` uses;
a compiled act runs on the calling thread), but exports that to C++ only. So it is called through ctypes
from libtensorflow_framework, fenced (`private_api`): on a TensorFlow outside the verified range, or
without the two symbols behaving as expected (probed once), every call uses the pool, with one warning.

The cap changes how a convolution's work is split, so Q-values may differ in the last bits from the
pool's: which calls run capped is decided by the batch's size alone (`FlatCall`'s `serial_rows`), so a
seed still repeats its run exactly.
"""

import ctypes
import functools
import os

import tensorflow as tf

from tfdqn.agent import private_api

TF_VERSION = tf.__version__
TF_VERIFIED = ("2.21", "2.21")  # 2.21.0 tested

_SET = "_ZN10tensorflow26SetPerThreadMaxParallelismEi"  # tensorflow::SetPerThreadMaxParallelism(int)
_GET = "_ZN10tensorflow26GetPerThreadMaxParallelismEv"  # tensorflow::GetPerThreadMaxParallelism()


@functools.cache
def _functions():
    """(set, get) from TensorFlow's framework library, or None where they are not there or not as expected."""
    try:
        library = ctypes.CDLL(os.path.join(os.path.dirname(tf.__file__), "libtensorflow_framework.so.2"))
        set_max, get_max = getattr(library, _SET), getattr(library, _GET)
    except (OSError, AttributeError):
        return None
    set_max.argtypes, set_max.restype, get_max.argtypes, get_max.restype = [ctypes.c_int], None, [], ctypes.c_int
    previous = get_max()
    set_max(1)
    capped = get_max()
    set_max(previous)
    return (set_max, get_max) if capped == 1 and get_max() == previous else None


@functools.cache
def available() -> bool:
    """Whether a thread's intra-op parallelism can be capped here; warns once per process where not."""
    return private_api.private_path_ok("one intra-op thread", "TensorFlow", TF_VERSION, TF_VERIFIED,
                                       "SetPerThreadMaxParallelism in libtensorflow_framework",
                                       lambda: _functions() is not None, "the intra-op pool for every act call")


def current() -> int:
    """The calling thread's cap on intra-op parallelism (TensorFlow's default is 1,000,000: no cap)."""
    return _functions()[1]()


def on_one_thread(call, *args):
    """`call(*args)` with this thread's TensorFlow calls on one intra-op thread; the cap before it comes back
    after, also where the call raises. (A plain function: a context manager cost three times as much.)"""
    set_max, get_max = _functions()
    previous = get_max()
    set_max(1)
    try:
        return call(*args)
    finally:
        set_max(previous)
