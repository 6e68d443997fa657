"""tfdqn: DQN in TensorFlow 2 with a compiled learner and measured utilisation."""

__version__ = "0.1.0"
