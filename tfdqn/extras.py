"""The optional extras a feature needs: checked before any work starts, and named by the `pip install` line
that brings them, so a light install (`pip install tfdqn`) fails in one line, never after hours of training."""

from __future__ import annotations

import importlib.util

from tfdqn.errors import UserError

# extra -> the modules tfdqn imports from it (setup.cfg's extras_require lists the packages)
EXTRAS = {"bench": ("matplotlib", "rliable"), "tune": ("optuna", "matplotlib"), "ray": ("ray",),
          "wandb": ("wandb",), "box2d": ("Box2D",), "litert": ("ai_edge_litert",)}


def missing(extra: str, modules: tuple[str, ...] | None = None) -> str | None:
    """The first of the extra's modules (or of `modules`) that is not installed, else None."""
    return next((name for name in modules or EXTRAS[extra] if importlib.util.find_spec(name) is None), None)


def require(extra: str, feature: str, modules: tuple[str, ...] | None = None, instead: str | None = None) -> None:
    """Raise a one-line UserError naming the pip install that brings `extra` (or what else to do, `instead`)
    if one of its modules is missing."""
    name = missing(extra, modules)
    if name is not None:
        other = f", or {instead}" if instead else ""
        raise UserError(f"{feature} needs {name}, which is not installed; allowed: pip install \"tfdqn[{extra}]\"{other}")
