"""Calling a `tf.function` with a fixed input signature through its one concrete function, flat.

`tf.function.__call__` and `ConcreteFunction.__call__` bind their arguments against the traced Python
signature on every call, a cost that shows in a batch-1 act (docs/experiments/performance.md has the figures). The
act and both update graphs are called through `FlatCall` instead.

A NumPy argument becomes a tensor made directly on the current device (the host CPU outside a device
scope) from a copy of the array, where `tf.convert_to_tensor` makes one with no device named: the call
after such a tensor costs more. And where no gradient tape watches, the graph runs as
`ConcreteFunction._call_flat` would run it, minus its Python checks for tapes and graph building. Together
they cut a batch-1 act on one core by about a sixth (docs/experiments/performance.md).

Those paths take TensorFlow's private `ConcreteFunction._call_flat`, `EagerTensor` and the function op
under `_call_flat`, so they are fenced (`private_api`): on a TensorFlow outside `TF_VERIFIED`, or without
them in their verified shape (checked by probing them once), `FlatCall` warns once and converts and calls
publicly, with the same results.
"""

import functools
import inspect

import numpy as np
import tensorflow as tf

from tfdqn.agent import intra_op, private_api

try:  # private; used only where the fence allows it (`private_call_flat_ok`)
    from tensorflow.python.eager import context, record
    from tensorflow.python.framework.ops import EagerTensor as _EagerTensor
except ImportError:
    context = record = _EagerTensor = None

TF_VERSION = tf.__version__
TF_VERIFIED = ("2.16", "2.21")  # 2.21.0 tested; 2.16 is the package's oldest tensorflow


def _call_flat_has_its_shape() -> bool:
    try:  # the class behind `get_concrete_function()`, which TensorFlow exports under no public name
        from tensorflow.python.eager.polymorphic_function.concrete_function import ConcreteFunction
        parameters = list(inspect.signature(ConcreteFunction._call_flat).parameters)
    except (ImportError, AttributeError, TypeError, ValueError):
        return False
    return parameters == ["self", "tensor_inputs", "captured_inputs"]


@functools.cache
def _host_cpu() -> str:
    return f"{context.context().host_address_space()}/device:CPU:0"


def _device() -> str:
    """Where `tf.convert_to_tensor` would put a tensor now (the host CPU outside a device scope), in full."""
    return context.context().device_name or _host_cpu()


@functools.cache
def _eager_tensor_takes_numpy() -> bool:
    if _EagerTensor is None:
        return False
    try:
        context.ensure_initialized()
        tensor = _EagerTensor(np.arange(3, dtype=np.uint8), _device(), tf.uint8.as_datatype_enum)
        return tensor.dtype == tf.uint8 and tensor.numpy().tolist() == [0, 1, 2]
    except (ImportError, AttributeError, TypeError, ValueError):
        return False


def _direct_call(concrete):
    """`concrete`'s graph run as `_call_flat` runs it eagerly with no tape watching, without its checks: the
    function op on the flat inputs, its outputs packed into the function's structure. None where an output
    carries handle data (a resource or variant), which `_call_flat` attaches."""
    atomic = concrete._inference_function
    outputs = atomic.function_type.flat_outputs
    if any(output.dtype._handle_data for output in outputs):
        return None
    ctx, name, count, pack = context.context(), atomic.name, len(outputs), atomic.function_type.pack_output
    return lambda tensors: pack(ctx.call_function(name, tensors, count))


@functools.cache
def _direct_call_works() -> bool:
    """Whether `_direct_call` gives what `_call_flat` gives, on a small graph with a variable and a nested output."""
    if record is None:
        return False
    try:
        with tf.init_scope():  # eagerly, even where the first FlatCall is made while a graph is being built
            return _probe_direct_call()
    except (AttributeError, TypeError, ValueError, tf.errors.OpError):
        return False


def _probe_direct_call() -> bool:
    offset = tf.Variable(10)
    probe = tf.function(lambda x: {"y": x + offset, "z": [x * 2]}, autograph=False,
                        input_signature=[tf.TensorSpec([None], tf.int32)]).get_concrete_function()
    x = tf.constant([1, 2])
    direct, flat = _direct_call(probe)([x, *probe.captured_inputs]), probe._call_flat([x], probe.captured_inputs)
    return all(a.numpy().tolist() == b.numpy().tolist() == expected for a, b, expected in (
        (direct["y"], flat["y"], [11, 12]), (direct["z"][0], flat["z"][0], [2, 4])))


def private_call_flat_ok() -> bool:
    """Whether `ConcreteFunction._call_flat`, the function op under it and `EagerTensor` may be used; warns
    once per process where not."""
    return private_api.private_path_ok("FlatCall", "TensorFlow", TF_VERSION, TF_VERIFIED,
                                       "ConcreteFunction._call_flat, its function call or EagerTensor",
                                       lambda: _call_flat_has_its_shape() and _eager_tensor_takes_numpy()
                                       and _direct_call_works(), "tf.convert_to_tensor, concrete(*tensors)")


class FlatCall:
    """Calls `function`'s concrete function (traced on first use, so never retraced) with flat tensors.

    Each argument's dtype and shape are checked against its spec with a one-line error; nothing is cast
    silently (Python numbers take the spec's dtype). Where the fence allows it and `use_private` is true
    (decided here, once), a NumPy array of the spec's dtype becomes a tensor on the current device from a
    copy (the caller may reuse its array at once), and the graph runs through its function op directly, or
    through `_call_flat` (TensorFlow's own path under `ConcreteFunction.__call__`) where a gradient tape
    may be watching or a graph is being built; else through `tf.convert_to_tensor` and
    `ConcreteFunction.__call__`. Tests pin the paths to the same results.

    `serial_rows`: a call whose first argument has at most this many rows runs on one intra-op thread
    (`intra_op`, where it is available): small enough that splitting it costs more than it saves."""

    def __init__(self, function: tf.types.experimental.PolymorphicFunction, use_private: bool = True,
                 serial_rows: int = 0):
        if function.input_signature is None:
            raise ValueError(f"{function.__name__} needs an input_signature to be called flat")
        self.function = function
        self._specs = function.input_signature
        self.private = use_private and private_call_flat_ok()
        self._run = self._run_flat if self.private else self._run_public
        if serial_rows and not self._specs[0].shape.rank:
            raise ValueError(f"{function.__name__}: serial_rows needs a first argument with rows")
        self.serial_rows = serial_rows if serial_rows > 0 and intra_op.available() else 0
        self._numpy_dtypes = [spec.dtype.as_numpy_dtype if self.private else None for spec in self._specs]

    @functools.cached_property
    def concrete(self) -> tf.types.experimental.ConcreteFunction:
        return self.function.get_concrete_function()

    def trace(self) -> "FlatCall":
        """Trace now, so that the first call (in a timed loop, say) is not charged for it."""
        _ = self._captures, self.private and self._direct
        return self

    @functools.cached_property
    def _captures(self) -> list:
        return self.concrete.captured_inputs

    @functools.cached_property
    def _direct(self):
        return _direct_call(self.concrete)

    def _run_flat(self, tensors: list):
        if self._direct is not None and context.executing_eagerly() and not record.could_possibly_record():
            return self._direct(tensors + self._captures)
        return self.concrete._call_flat(tensors, self._captures)

    def _run_public(self, tensors: list):
        return self.concrete(*tensors)

    def __call__(self, *args):
        if len(args) != len(self._specs):
            raise TypeError(f"{self.function.__name__} takes {len(self._specs)} arguments, got {len(args)}")
        tensors = []
        for spec, numpy_dtype, value in zip(self._specs, self._numpy_dtypes, args):
            if isinstance(value, np.ndarray) and value.dtype == numpy_dtype:
                tensor = _EagerTensor(value.copy(), _device(), spec.dtype.as_datatype_enum)
            else:
                tensor = tf.convert_to_tensor(value, spec.dtype if isinstance(value, (int, float)) else None)
            if tensor.dtype != spec.dtype or not spec.shape.is_compatible_with(tensor.shape):
                raise ValueError(f"{self.function.__name__}: got {tensor.dtype.name} {tensor.shape.as_list()}, "
                                 f"allowed is {spec.dtype.name} {spec.shape.as_list()} (None: any size)")
            tensors.append(tensor)
        if self.serial_rows and (rows := tensors[0].shape[0]) is not None and rows <= self.serial_rows:
            return intra_op.on_one_thread(self._run, tensors)
        return self._run(tensors)
