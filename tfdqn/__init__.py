"""tfdqn: DQN in TensorFlow 2 with a compiled learner and measured utilisation.

The Python API, imported on first use so that `import tfdqn` does not start TensorFlow:

    DQNConfig    a run's configuration; DQNConfig.for_env("CartPole", {"run.total_steps": 3000})
    train        train(config) trains in this process and returns the run's summary
    load_policy  load_policy(run_or_policy_folder) acts on NumPy observations

`tfdqn.train` is the function; the command line is `python -m tfdqn.train`.
"""

__version__ = "0.1.0"
__all__ = ["DQNConfig", "train", "load_policy"]


def train(config, run_dir=None, logdir: str = "runs", quiet: bool = False) -> dict:
    """Train a new run of `config` (a DQNConfig) into `run_dir`, or else a new folder in `logdir` named
    as the command line names it; returns its summary (summary.json's figures) with "run_dir" added.
    The folder must be new or empty, as for `python -m tfdqn.train`."""
    import pathlib

    from tfdqn.run.loop import train as train_run
    from tfdqn.run.run_dir import choose_run_dir

    if run_dir is None:
        run_dir = choose_run_dir(logdir, None, config)
    else:
        run_dir = choose_run_dir(str(pathlib.Path(run_dir).parent), pathlib.Path(run_dir).name, config)
    return {"run_dir": str(run_dir), **train_run(config, run_dir, quiet=quiet)}


# `import tfdqn.train` (the command's module) rebinds the name `tfdqn.train` to that module, which calls this
_train_function = train


def __getattr__(name: str):
    if name == "DQNConfig":
        from tfdqn.config import DQNConfig

        return DQNConfig
    if name == "load_policy":
        from tfdqn.policy import load_policy

        return load_policy
    raise AttributeError(f"module 'tfdqn' has no attribute {name!r}")
