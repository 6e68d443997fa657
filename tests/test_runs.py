"""tfdqn.bench.runs: each process a benchmark starts for a run records the commit it imports, read as it starts,
so a run trained across commits names each stretch's own."""

import subprocess

from tfdqn.bench import runs
from tfdqn.bench.runkey import RunKey
from tfdqn.run import provenance


def _fake_git(monkeypatch, heads: list[str]):
    """`git rev-parse HEAD` answers the next of `heads` at each call (a commit made between calls); a clean tree."""
    answers = iter(heads)

    def run(command, **_):
        out = next(answers) + "\n" if command[1] == "rev-parse" else ""
        return subprocess.CompletedProcess(command, 0, stdout=out, stderr="")
    monkeypatch.setattr(provenance.subprocess, "run", run)


def test_code_now_reads_the_checkout_at_each_call_where_provenance_keeps_its_first(monkeypatch):
    provenance._taken.cache_clear()
    _fake_git(monkeypatch, ["a" * 40, "b" * 40, "c" * 40])
    assert provenance.provenance()["commit"] == "a" * 40
    assert provenance.code_now()["commit"] == "b" * 40
    assert provenance.provenance()["commit"] == "a" * 40  # the process's own code stays as taken
    assert provenance.code_now()["commit"] == "c" * 40
    provenance._taken.cache_clear()


def test_each_stretch_of_a_run_names_the_commit_its_process_started_at(monkeypatch, tmp_path):
    """A process killed by a signal is resumed once; a commit made in between is the second stretch's code."""
    _fake_git(monkeypatch, ["1" * 40, "2" * 40])
    exits = iter([-9, 0])
    monkeypatch.setattr(runs, "check_folder", lambda run_dir, key: None)
    monkeypatch.setattr(runs, "finished", lambda run_dir: None)
    monkeypatch.setattr(runs, "train_command", lambda run_dir, arguments: (["true"], "new"))
    monkeypatch.setattr(runs, "_run_process", lambda command, log, environment: next(exits))
    monkeypatch.setattr(runs, "code_of", lambda run_dir: {"commit": "2" * 40})
    planned = runs.PlannedRun("Pong", RunKey("Pong", "0123456789", 0), tmp_path / "run", (), "Pong seed 0")
    outcome = runs.train_to_end(planned, 1.0, lambda run_dir, key: {})
    assert outcome["starts"] == ["new", "new"]
    assert [(s["start"], s["commit"], s["commit_had_changes"]) for s in outcome["stretches"]] == [
        ("new", "1" * 40, False), ("new", "2" * 40, False)]
    assert all(s["began"] for s in outcome["stretches"])
