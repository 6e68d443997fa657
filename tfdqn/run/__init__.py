"""A training run: build it once, loop over collectors and update drivers, checkpoint, evaluate.

Nothing here is imported by this __init__: `markers` must stay readable without TensorFlow."""
