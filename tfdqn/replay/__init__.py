"""Replay: the host NumPy ring, its tf.Variable twin sampled in the update graph, and the frame stack."""
