"""Names of checkpoint completion markers, readable without TensorFlow (the command line checks a
run folder before starting TensorFlow; checkpoint.py writes and reads the same names)."""

import pathlib
import re

_MARKER = re.compile(r"ckpt-(\d+)\.complete")


def marker_path(directory: pathlib.Path, env_steps: int) -> pathlib.Path:
    return pathlib.Path(directory) / f"ckpt-{env_steps}.complete"


def complete_steps(directory: pathlib.Path) -> list[int]:
    """Env steps of the checkpoints in `directory` whose marker exists, newest first."""
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        return []
    found = (_MARKER.fullmatch(p.name) for p in directory.iterdir())
    return sorted((int(m.group(1)) for m in found if m), reverse=True)
