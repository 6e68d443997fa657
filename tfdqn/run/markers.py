"""Checkpoint completion markers and the best checkpoint's record, readable without TensorFlow (the command
line checks a run folder before starting TensorFlow; checkpoint.py writes and reads the same names).

A marker also records the versions that wrote its checkpoint, so a checkpoint that names a class an
upgrade moved can say which versions read it."""

import functools
import importlib.metadata
import json
import pathlib
import platform
import re

_MARKER = re.compile(r"ckpt-(\d+)\.complete")
BEST_FILE = "best.json"  # in checkpoints/: env step and returns of the best checkpoint, written last
# The distributions whose classes a checkpoint's pickled state or TensorFlow objects can name.
RECORDED_DISTRIBUTIONS = ("tfdqn", "gymnasium", "ale-py", "numpy", "tensorflow", "keras")


def marker_path(directory: pathlib.Path, env_steps: int) -> pathlib.Path:
    return pathlib.Path(directory) / f"ckpt-{env_steps}.complete"


def complete_steps(directory: pathlib.Path) -> list[int]:
    """Env steps of the checkpoints in `directory` whose marker exists, newest first."""
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        return []
    found = (_MARKER.fullmatch(p.name) for p in directory.iterdir())
    return sorted((int(m.group(1)) for m in found if m), reverse=True)


@functools.cache
def installed_versions() -> dict[str, str]:
    """Python's version and that of each recorded distribution installed here."""
    versions = {"python": platform.python_version()}
    for name in RECORDED_DISTRIBUTIONS:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def marker_record(env_steps: int) -> str:
    """What a marker holds: its env step and the versions writing it."""
    return json.dumps({"env_steps": env_steps, "versions": installed_versions()})


def written_by(directory: pathlib.Path, env_steps: int) -> dict[str, str] | None:
    """The versions that wrote checkpoint `env_steps`, or None where its marker does not say (written
    before markers recorded them, or unreadable)."""
    try:
        return json.loads(marker_path(directory, env_steps).read_text()).get("versions")
    except (OSError, ValueError, AttributeError):
        return None


def read_best(checkpoints: pathlib.Path) -> dict | None:
    """The best checkpoint's record ({"env_steps", "return_mean", "returns"}), or None if none was kept."""
    path = pathlib.Path(checkpoints) / BEST_FILE
    return json.loads(path.read_text()) if path.is_file() else None
