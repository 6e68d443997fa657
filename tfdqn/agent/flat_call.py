"""Calling a `tf.function` with a fixed input signature through its one concrete function, flat.

`tf.function.__call__` and `ConcreteFunction.__call__` bind their arguments against the traced Python
signature on every call, a cost that shows in a batch-1 act (docs/performance.md has the figures). The
act and both update graphs are called through `FlatCall` instead.

Skipping the binding takes TensorFlow's private `ConcreteFunction._call_flat`, so it is fenced
(`private_api`): on a TensorFlow outside `TF_VERIFIED`, or without that method in its verified shape,
`FlatCall` warns once and calls the concrete function publicly, with the same results.
"""

import functools
import inspect

import tensorflow as tf

from tfdqn.agent import private_api

TF_VERSION = tf.__version__
TF_VERIFIED = ("2.16", "2.21")  # 2.21.0 tested; 2.16 is the package's oldest tensorflow


def _call_flat_has_its_shape() -> bool:
    try:  # the class behind `get_concrete_function()`, which TensorFlow exports under no public name
        from tensorflow.python.eager.polymorphic_function.concrete_function import ConcreteFunction
        parameters = list(inspect.signature(ConcreteFunction._call_flat).parameters)
    except (ImportError, AttributeError, TypeError, ValueError):
        return False
    return parameters == ["self", "tensor_inputs", "captured_inputs"]


def private_call_flat_ok() -> bool:
    """Whether `ConcreteFunction._call_flat` may be used; warns once per process where not."""
    return private_api.private_path_ok("FlatCall", "TensorFlow", TF_VERSION, TF_VERIFIED,
                                       "ConcreteFunction._call_flat", _call_flat_has_its_shape(),
                                       "concrete(*tensors)")


class FlatCall:
    """Calls `function`'s concrete function (traced on first use, so never retraced) with flat tensors.

    Each argument's dtype and shape are checked against its spec with a one-line error; nothing is cast
    silently (Python numbers take the spec's dtype). The graph is then called through `_call_flat`,
    TensorFlow's own path under `ConcreteFunction.__call__`, where the fence allows it and `use_private`
    is true (decided here, once), else through `ConcreteFunction.__call__`; tests pin the two to the
    same results."""

    def __init__(self, function: tf.types.experimental.PolymorphicFunction, use_private: bool = True):
        if function.input_signature is None:
            raise ValueError(f"{function.__name__} needs an input_signature to be called flat")
        self.function = function
        self._specs = function.input_signature
        self.private = use_private and private_call_flat_ok()
        self._run = self._run_flat if self.private else self._run_public

    @functools.cached_property
    def concrete(self) -> tf.types.experimental.ConcreteFunction:
        return self.function.get_concrete_function()

    def trace(self) -> "FlatCall":
        """Trace now, so that the first call (in a timed loop, say) is not charged for it."""
        _ = self._captures
        return self

    @functools.cached_property
    def _captures(self) -> list:
        return self.concrete.captured_inputs

    def _run_flat(self, tensors: list):
        return self.concrete._call_flat(tensors, self._captures)

    def _run_public(self, tensors: list):
        return self.concrete(*tensors)

    def __call__(self, *args):
        if len(args) != len(self._specs):
            raise TypeError(f"{self.function.__name__} takes {len(self._specs)} arguments, got {len(args)}")
        tensors = []
        for spec, value in zip(self._specs, args):
            tensor = tf.convert_to_tensor(value, spec.dtype if isinstance(value, (int, float)) else None)
            if tensor.dtype != spec.dtype or not spec.shape.is_compatible_with(tensor.shape):
                raise ValueError(f"{self.function.__name__}: got {tensor.dtype.name} {tensor.shape.as_list()}, "
                                 f"allowed is {spec.dtype.name} {spec.shape.as_list()} (None: any size)")
            tensors.append(tensor)
        return self._run(tensors)
