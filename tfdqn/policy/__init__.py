"""What leaves a run: a trained network found (`locate`), exported as a SavedModel policy folder and loaded
back (`saved_model`), the NumPy interface every loaded policy shares (`numpy_policy`), LiteRT conversion and
its runtime (`litert_export`, `litert`), evaluation outside the run (`evaluation`) and its video (`video`).

Nothing here is imported by this __init__: `locate`, `numpy_policy` and `litert` must stay usable without
TensorFlow."""
