"""A benchmark record shared by sweeps: each change lands on the file as it is, so no sweep drops another's runs."""

import json
import multiprocessing

import pytest

from tfdqn.bench.record import Record
from tfdqn.errors import UserError

IDENTITY = ("game", "config_hash", "seed")


def _run(game: str, seed: int) -> dict:
    return {"game": game, "config_hash": "abc", "seed": seed, "score": float(seed)}


def _put_runs(path, game: str, count: int) -> None:
    """One sweep's process: it opens the record once, as a sweep does at its start, and records runs as they end."""
    record = Record(path, "time-to-score", IDENTITY)
    for seed in range(count):
        record.put(_run(game, seed))


def _on_disk(path) -> set:
    return {(run["game"], run["seed"]) for run in json.loads(path.read_text())["runs"]}


def test_two_sweeps_opened_on_one_record_keep_each_others_runs(tmp_path):
    path = tmp_path / "record.json"
    first, second = (Record(path, "time-to-score", IDENTITY) for _ in range(2))
    first.put(_run("Pong", 0))
    second.put(_run("Breakout", 0))  # opened before Pong's run was written
    first.report("abc", {"command": "report"})
    assert _on_disk(path) == {("Pong", 0), ("Breakout", 0)}
    assert json.loads(path.read_text())["reports"] == {"abc": {"command": "report"}}


def test_processes_recording_at_once_lose_no_run(tmp_path):
    path = tmp_path / "nested" / "record.json"  # a folder that does not exist yet is made at the first write
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_put_runs, args=(path, game, 40)) for game in ("Pong", "Breakout", "Alien")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    assert _on_disk(path) == {(game, seed) for game in ("Pong", "Breakout", "Alien") for seed in range(40)}


def test_a_removal_naming_a_missing_run_writes_nothing(tmp_path):
    path = tmp_path / "record.json"
    record = Record(path, "time-to-score", IDENTITY)
    record.put(_run("Pong", 0))
    record.put(_run("Pong", 1))
    before = path.read_bytes()
    with pytest.raises(UserError, match="holds no run with game Pong, config_hash abc, seed 7"):
        record.remove([{"game": "Pong", "config_hash": "abc", "seed": 1},
                       {"game": "Pong", "config_hash": "abc", "seed": 7}])
    assert path.read_bytes() == before
    record.remove([{"game": "Pong", "config_hash": "abc", "seed": 1}])
    assert _on_disk(path) == {("Pong", 0)}
