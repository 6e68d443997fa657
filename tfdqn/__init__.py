"""tfdqn: DQN in TensorFlow 2 with a compiled learner and measured utilisation.

The Python API, imported on first use so that `import tfdqn` does not start TensorFlow:

    DQNConfig    a run's configuration; DQNConfig.for_env("CartPole", {"run.total_steps": 3000})
    train        train(config) trains in this process and returns the run's summary
    load_policy  load_policy(run_or_policy_folder_or_tflite) acts on NumPy observations

`tfdqn.train` is the function; the command line is `python -m tfdqn.train`.
"""

__version__ = "0.1.0"
__all__ = ["DQNConfig", "train", "load_policy"]


def train(config=None, run_dir=None, logdir: str = "runs", quiet: bool = False, resume: bool = False,
          on_evaluation=None) -> dict:
    """Train `config` (a DQNConfig) in this process; returns the run's summary (summary.json's figures) with
    "run_dir" added.

    `run_dir`: a new or empty folder; None: a new folder in `logdir` named as the command line names it (with
    -2, -3, ... where that name is taken). `resume=True` continues the run in `run_dir` from its newest
    checkpoint: `config` None takes the run's own config.yaml, else `config` must be that run's, its
    run.total_steps aside (to train on); a run that already ended returns its summary. `quiet=True` prints
    nothing (the protocol and replay lines, progress, TensorFlow's start-up log). `on_evaluation`: called with
    each periodic evaluation's record (env_steps, run_seconds, return_mean, return_std, returns); returning
    True ends the run there, which then evaluates and exports its product as a run that reached its target.
    Bad input raises `tfdqn.errors.UserError` with one line naming the value and what is allowed."""
    import contextlib
    import os

    from tfdqn.run.run_dir import prepare_run

    run_dir, config, finished = prepare_run(config, run_dir, logdir, resume)
    if finished is not None:
        return {"run_dir": str(run_dir), **finished}
    with open(os.devnull, "w") as devnull, \
            (contextlib.redirect_stdout(devnull) if quiet else contextlib.nullcontext()):
        from tfdqn.cli import start_tensorflow

        start_tensorflow()  # its C++ start-up lines off stderr, as on the command line
        from tfdqn.run.loop import train as train_run

        summary = train_run(config, run_dir, quiet=quiet, resume=resume, on_evaluation=on_evaluation)
    return {"run_dir": str(run_dir), **summary}


def load_policy(path, checkpoint="latest", seed=None):
    """The policy of a run folder (its checkpoint "latest", "best" or an env step), of a policy folder
    (its SavedModel), or of a `.tflite` file `tfdqn export --format litert` wrote, which runs on LiteRT
    without importing TensorFlow; `act(observations, epsilon=0.0)` and `q_values(observations)` take NumPy."""
    if str(path).endswith(".tflite"):
        from tfdqn.policy.litert import load_litert_policy

        return load_litert_policy(path, seed)
    from tfdqn.policy.saved_model import load_policy as load_saved_policy

    return load_saved_policy(path, checkpoint, seed)


# `import tfdqn.train` (the command's module) rebinds the name `tfdqn.train` to that module, which calls this
_train_function = train


def __getattr__(name: str):
    if name == "DQNConfig":
        from tfdqn.config import DQNConfig

        return DQNConfig
    raise AttributeError(f"module 'tfdqn' has no attribute {name!r}")
