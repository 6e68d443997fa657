"""Hyperparameter studies (`python -m tfdqn.tune`): search spaces, trials as real runs, workers, results."""
