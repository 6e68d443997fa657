"""A policy exported for LiteRT (`policy.tflite`, `tfdqn export --format litert`) run by `ai_edge_litert`'s
interpreter, without TensorFlow: the deployment path to phones, boards and robots. Its signature is the
SavedModel's: `observation` in (any batch size; one input per part where the env's observations are not one
Box), the greedy `action` and the `q_values` out."""

from __future__ import annotations

import json
import pathlib

import numpy as np

from tfdqn.envs.observation_layout import ObservationLayout
from tfdqn.errors import UserError
from tfdqn.extras import require
from tfdqn.policy.locate import POLICY_FILE
from tfdqn.policy.numpy_policy import NumpyPolicy

LITERT_FILES = {"float32": "policy.tflite", "int8": "policy-int8.tflite"}  # in a policy folder
QUANTIZE = ("none", "int8")  # tfdqn export --quantize: int8 adds policy-int8.tflite
SIGNATURE = "serving_default"


class LiteRTPolicy(NumpyPolicy):
    """A `.tflite` policy as a `NumpyPolicy`; its interpreter takes any batch, resizing when the size changes."""

    def __init__(self, model: pathlib.Path | bytes, env_id: str, env_steps: int, seed: int | None = None,
                 layout=None):
        require("litert", "a LiteRT policy", instead="load the SavedModel beside it")
        from ai_edge_litert.interpreter import Interpreter

        self._interpreter = (Interpreter(model_content=model) if isinstance(model, bytes)
                             else Interpreter(model_path=str(model)))
        self._run = self._interpreter.get_signature_runner(SIGNATURE)
        outputs = self._run.get_output_details()["q_values"]
        if layout is None:
            inputs = self._run.get_input_details()["observation"]
            shape, dtype = tuple(int(d) for d in inputs["shape_signature"][1:]), inputs["dtype"]
        else:  # one input per part (policy.json's observation_layout)
            shape, dtype = (layout.width,), np.uint8
        super().__init__(shape, dtype, int(outputs["shape_signature"][-1]), env_id, env_steps, seed, layout)

    def outputs(self, batch) -> dict:
        return self._run(**batch) if isinstance(batch, dict) else self._run(observation=batch)


def load_litert_policy(path, seed: int | None = None) -> LiteRTPolicy:
    """The policy in a `.tflite` file that `tfdqn export --format litert` wrote into a policy folder (its
    policy.json, beside it, names the env and the env step)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise UserError(f"path {str(path)!r} is not a file; allowed: a .tflite file tfdqn export --format litert wrote")
    about_file = path.parent / POLICY_FILE
    about = json.loads(about_file.read_text()) if about_file.is_file() else {}
    layout = about.get("observation_layout")
    return LiteRTPolicy(path, about.get("env_id", "?"), about.get("env_steps", -1), seed,
                        None if layout is None else ObservationLayout.from_config(layout))
