"""Adam whose per-variable step is TensorFlow's fused `ResourceApplyAdam` kernel.

Feeding the kernel Adam's slot variables takes Keras internals (`_get_variable_index`, `_momentums`,
`_velocities`, a variable's `.value.handle`), so they are fenced (`private_api`): on a Keras outside
`KERAS_VERIFIED`, or without those internals in their verified shape, `FusedAdam` warns once and steps
through Keras Adam's own `update_step`, with the same results.
"""

import inspect

import keras
import tensorflow as tf

from tfdqn.agent import private_api

KERAS_VERSION = keras.__version__
KERAS_VERIFIED = ("3.0", "3.15")  # 3.15.1 tested; 3.0 (TensorFlow 2.16's oldest Keras) has the same internals
_INTERNALS = "Adam._get_variable_index, ._momentums, ._velocities and Variable.value.handle"


def _internals_have_their_shape() -> bool:
    index = getattr(keras.optimizers.Adam, "_get_variable_index", None)
    return (callable(index) and list(inspect.signature(index).parameters) == ["self", "variable"]
            and all(isinstance(getattr(keras.Variable, name, None), property) for name in ("value", "handle")))


def _slots_have_their_shape(optimizer: keras.optimizers.Adam, var_list: list) -> bool:
    slots = [getattr(optimizer, name, None) for name in ("_momentums", "_velocities")]
    return all(isinstance(s, list) and len(s) == len(var_list)
               and all(hasattr(getattr(v, "value", None), "handle") for v in s) for s in slots)


def _private_ok(slots_ok=lambda: True) -> bool:
    """Whether the Keras internals may be used (`slots_ok()`: the optimizer's slots too); warns once per process
    where not."""
    return private_api.private_path_ok("FusedAdam", "Keras", KERAS_VERSION, KERAS_VERIFIED, _INTERNALS,
                                       lambda: slots_ok() and _internals_have_their_shape(), "Keras Adam.update_step")


class FusedAdam(keras.optimizers.Adam):
    """Keras Adam with the same arithmetic and the same slot variables (so checkpoints are
    interchangeable), but each variable's step is one fused kernel instead of about ten element-wise
    ops that each read and write the whole tensor: for the Nature CNN, a tenth of the update on a CPU
    (docs/experiments/performance.md has the timing).

    The fused path is taken where the fence allows it and `use_private` is true: decided at
    construction, and once more when `build` makes the slots, before any step."""

    def __init__(self, *args, use_private: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        if self.amsgrad:
            raise ValueError("FusedAdam: amsgrad=True is not supported (the fused kernel has no max of v)")
        self.private = use_private and _private_ok()

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self.private = self.private and _private_ok(lambda: _slots_have_their_shape(self, var_list))

    def update_step(self, gradient, variable, learning_rate):
        if not self.private:
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        index = self._get_variable_index(variable)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=self._momentums[index].value.handle, v=self._velocities[index].value.handle,
            beta1_power=tf.pow(beta_1, step), beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(learning_rate, dtype), beta1=beta_1, beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype), grad=tf.cast(gradient, dtype))
