"""Where a trained network is read from, checked before TensorFlow starts: a checkpoint of a run folder
(the newest, the best or one env step's) or a policy folder written by the export.

Both kinds hold the run's `config.yaml`, so whoever reads them can rebuild the env the network played.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

from tfdqn.errors import UserError
from tfdqn.run.markers import complete_steps, read_best

POLICY_FILE = "policy.json"  # in a policy folder: what the SavedModel takes and where it came from


@dataclasses.dataclass(frozen=True)
class NetworkLocation:
    path: pathlib.Path
    checkpoint: str | int | None  # "latest", "best" or an env step; None for a policy folder

    @property
    def is_policy(self) -> bool:
        return self.checkpoint is None

    @property
    def config_file(self) -> pathlib.Path:
        return self.path / "config.yaml"

    @property
    def checkpoints(self) -> pathlib.Path:
        return self.path / "checkpoints"


def locate_network(path, checkpoint: str | int | None = None, policies: bool = True,
                   what: str = "RUN_DIR", flag: str = "--checkpoint") -> NetworkLocation:
    """Check `path` and `checkpoint` (None: the newest) and name what is allowed if they do not fit;
    `what` and `flag` are the names the caller's user knows them by."""
    path = pathlib.Path(path)
    is_policy = policies and (path / POLICY_FILE).is_file()
    if not (path / "config.yaml").is_file():
        folders = "a run folder written by tfdqn.train" + (" or a policy folder written by tfdqn.export"
                                                           if policies else "")
        raise UserError(f"{what} {str(path)!r} holds no config.yaml; allowed: {folders}")
    if is_policy:
        if checkpoint is not None:
            raise UserError(f"{flag} {checkpoint} chooses a checkpoint of a run folder, but {path} is a policy "
                            f"folder (one network); allowed: no {flag}")
        return NetworkLocation(path, None)
    if checkpoint is None or checkpoint == "latest":
        return NetworkLocation(path, "latest")
    steps = complete_steps(path / "checkpoints")
    has_best = read_best(path / "checkpoints") is not None
    allowed = ", ".join(["latest", *(["best"] if has_best else []), *map(str, sorted(steps))])
    if checkpoint == "best":
        if not has_best:
            raise UserError(f"{flag} best: {path} kept no best checkpoint (one is kept only with run.eval_every "
                            f"> 0); allowed: {allowed}")
        return NetworkLocation(path, "best")
    step = int(checkpoint) if str(checkpoint).isdigit() else None
    if step is None:
        raise UserError(f"{flag} {checkpoint!r} is not latest, best or an env step; allowed: {allowed}")
    if step not in steps:
        raise UserError(f"{flag} {step} is not a complete checkpoint of {path}; allowed: {allowed}")
    return NetworkLocation(path, step)


PRODUCT_DIR = "policy"  # a run's product: the network a run that ends by itself exports (run.summary.finish)


def product_checkpoint(run_dir: pathlib.Path, flag: str = "--checkpoint") -> str | int:
    """The checkpoint the run's product (`RUN_DIR/policy`) was exported from: "best", or the env step of the
    last network; a one-line error where the run has no product yet."""
    about = pathlib.Path(run_dir) / PRODUCT_DIR / POLICY_FILE
    if not about.is_file():
        raise UserError(f"{run_dir} has no product yet ({PRODUCT_DIR}/ is written when the run ends by itself); "
                        f"allowed: {flag} latest, best or an env step")
    written = json.loads(about.read_text())
    return "best" if written["checkpoint"] == "best" else int(written["env_steps"])
