"""Env names: short names, ALE game names and gymnasium ids to one registered gymnasium id, and the
protocol (sticky actions, frame skip) that an ALE id implies.

Importing this module registers ale-py's envs with gymnasium (and quiets ALE's banner), so ALE ids resolve.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
import re
import sys

import ale_py
import gymnasium

from tfdqn.errors import UserError

gymnasium.register_envs(ale_py)
# ALE prints a two-line banner to stderr on its first env unless told to log errors only; the command
# lines promise one stderr line per error.
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)

_VERSIONED = re.compile(r"-v\d+$")


def _normalise(name: str) -> str:
    """`Space_Invaders`, `space-invaders`, `SpaceInvaders` -> `spaceinvaders`."""
    return re.sub(r"[\s_\-]", "", name).lower()


def is_atari_id(env_id: str) -> bool:
    entry_point = gymnasium.spec(env_id).entry_point
    return isinstance(entry_point, str) and entry_point.startswith("ale_py")


def is_atari_name(name: str) -> bool:
    """Whether a short name, game name or id (as `--env` takes) is an ALE game."""
    return is_atari_id(resolve_env_id(name))


@functools.lru_cache(maxsize=1)
def _name_tables() -> tuple[dict, dict, dict, list, list]:
    """Lookup tables over gymnasium's registry, built once.

    Returns (ids by lower-case id, ALE ids by normalised game name, newest id by normalised bare name,
    ALE game names for messages, non-Atari short names for messages).
    """
    ids_lower, ale_games, newest, versions = {}, {}, {}, {}
    for env_id, spec in gymnasium.registry.items():
        ids_lower[env_id.lower()] = env_id
        bare = f"{spec.namespace}/{spec.name}" if spec.namespace else spec.name
        version = spec.version if spec.version is not None else -1
        key = _normalise(bare)
        if version >= versions.get(key, -2):
            versions[key], newest[key] = version, env_id
        if spec.namespace == "ALE":
            ale_games.setdefault(_normalise(spec.name), {})[version] = (spec.name, env_id)
    games = {key: by_version[max(by_version)] for key, by_version in ale_games.items()}
    ale_ids = {key: env_id for key, (_, env_id) in games.items()}
    game_names = sorted(name for name, _ in games.values())
    short_names = sorted({spec.name for spec in gymnasium.registry.values()
                          if spec.namespace is None and not is_atari_id(spec.id)})
    return ids_lower, ale_ids, newest, game_names, short_names


def implied_settings(name: str) -> dict:
    """The config values an ALE id implies, as dotted keys: its sticky-action probability (v5 and v0:
    0.25, v4: 0) and, where the id skips a fixed number of frames (v5: 4), `env.frame_skip` (done by
    tfdqn's wrapper, with a max over the last two frames). `NoFrameskip` ids leave the frame skip to
    the wrapper's config. An id that skips a random number of frames (`Breakout-v4`, `Breakout-v0`) is
    refused: a fixed skip would silently change its protocol. Other envs imply nothing."""
    env_id = resolve_env_id(name)
    if not is_atari_id(env_id):
        return {}
    kwargs = gymnasium.spec(env_id).kwargs
    frameskip = kwargs.get("frameskip", 1)
    if not isinstance(frameskip, int):
        low, high = frameskip
        plain = env_id.split("/")[-1].rsplit("-v", 1)[0]
        raise UserError(f"env {env_id} skips a random {low} to {high - 1} frames per step, which "
                        f"tfdqn's fixed frame skip cannot reproduce; allowed: {plain}NoFrameskip-v4 (the v4 "
                        f"protocol: no sticky actions, frame skip by the wrapper) or ALE/{plain}-v5")
    implied = {"env.repeat_action_probability": float(kwargs.get("repeat_action_probability", 0.25))}
    if frameskip > 1:
        implied["env.frame_skip"] = frameskip
    return implied


def import_user_module(module: str, what: str, allowed: str) -> None:
    """Import a user's `module` as `python -m` finds it: the working folder first, which the `tfdqn` command's
    own path lacks (it stays on sys.path, for the module's own imports); one line naming `what` if it fails."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        importlib.import_module(module)
    except ImportError as error:
        raise UserError(f"{what} {module!r} cannot be imported ({error}); allowed: {allowed}") from None


def observes_images(env_id: str, kwargs: dict) -> bool:
    """Whether the env `env_id` (made with `kwargs`, then closed) observes uint8 images (or a Dict or Tuple of
    them among other parts); False where it cannot be made here (making it for the run then says why, in one
    line)."""
    from tfdqn.envs.wrappers import holds_image

    try:
        env = gymnasium.make(env_id, **kwargs)
    except Exception:  # noqa: BLE001 - any failure is make_env's to report, with its own message
        return False
    try:
        return holds_image(env.observation_space)
    finally:
        env.close()


def resolve_env_id(name: str) -> str:
    """A short name, ALE game name or gymnasium id to a registered gymnasium id.

    `CartPole` -> `CartPole-v1`, `Acrobot` -> `Acrobot-v1` (newest registered version), `Breakout`,
    `breakout`, `space_invaders` -> `ALE/<Game>-v5`; registered ids (`CartPole-v1`, `ALE/Pong-v5`,
    `BreakoutNoFrameskip-v4`) are returned as they are. `module:EnvId` imports `module` first, which
    registers a user's own env (gymnasium's convention). Anything else raises a one-line UserError.
    """
    text = str(name).strip()
    if ":" in text:
        module, _, text = text.partition(":")
        import_user_module(module, f"env {name!r}: module", "module:EnvId with an importable module that "
                                                            "registers EnvId")
    ids_lower, ale_ids, newest, game_names, short_names = _name_tables()
    if text in gymnasium.registry:
        return text
    if text.lower() in ids_lower:
        return ids_lower[text.lower()]
    if _VERSIONED.search(text):
        if f"ale/{text.lower()}" in ids_lower:  # `Breakout-v5` -> `ALE/Breakout-v5`
            return ids_lower[f"ale/{text.lower()}"]
    elif text:
        key = _normalise(text)
        game_key = key[len("ale/"):] if key.startswith("ale/") else key
        if game_key in ale_ids:
            return ale_ids[game_key]
        if key in newest:
            return newest[key]
    # One line: the bad value, the closest allowed name, and what is allowed.
    candidates = {_normalise(n): n for n in game_names + short_names}
    candidates.update({_normalise(i): i for i in ids_lower.values()})
    close = difflib.get_close_matches(_normalise(text), list(candidates), n=1, cutoff=0.75)
    hint = f"; did you mean {candidates[close[0]]}?" if close else ";"
    raise UserError(f"unknown env {name!r}{hint} allowed: a gymnasium id (CartPole-v1, Acrobot-v1, "
                    f"MountainCar-v0, ...), an ALE game name (Breakout, Pong, SpaceInvaders, ... "
                    f"{len(game_names)} games), or your own env as module:EnvId (tfdqn imports the module, "
                    f"which registers EnvId)")
