"""episodes.csv on resume: the complete rows up to the checkpoint, rewritten atomically, a line a crash
tore dropped with one warning line, and the appends going on after them."""

import numpy as np

from tfdqn.run.episodes import HEADER, EpisodeLog


def _rows(path):
    header, *rows = path.read_text().splitlines()
    assert header == HEADER
    return [(int(s), float(r), int(n)) for s, r, n in (row.split(",") for row in rows)]


def test_resume_keeps_the_rows_up_to_the_checkpoint_and_drops_a_torn_last_line(tmp_path, capsys):
    path = tmp_path / "episodes.csv"
    path.write_text(f"{HEADER}\n10,10,10\n25,15,15\n40,15,15\n55,1")  # killed while writing the row at 55
    log = EpisodeLog(path, resume_from=30)
    assert capsys.readouterr().err == f"warning: {path}: dropped 1 line(s) torn by a crash mid-write (first: '55,1')\n"
    assert _rows(path) == [(10, 10.0, 10), (25, 15.0, 15)] and log.count == 2 and list(log.recent) == [10.0, 15.0]
    log.record(31, [(0, 9.5, 6)])
    log.close()
    assert _rows(path) == [(10, 10.0, 10), (25, 15.0, 15), (31, 9.5, 6)]
    assert log.drain()["charts/episode_return"] == 9.5


def test_a_line_of_zeros_left_by_a_power_loss_is_dropped_too(tmp_path, capsys):
    path = tmp_path / "episodes.csv"
    path.write_text(f"{HEADER}\n10,10,10\n\0\0\0\0\0\n25,15,15\n")
    EpisodeLog(path, resume_from=30).close()
    assert "dropped 1 line(s)" in capsys.readouterr().err
    assert _rows(path) == [(10, 10.0, 10), (25, 15.0, 15)]


def test_complete_rows_are_kept_without_a_warning(tmp_path, capsys):
    path = tmp_path / "episodes.csv"
    path.write_text(f"{HEADER}\n10,nan,10\n25,-inf,15\n")
    EpisodeLog(path, resume_from=25).close()
    assert capsys.readouterr().err == ""
    rows = _rows(path)
    assert [r[0] for r in rows] == [10, 25] and np.isnan(rows[0][1]) and rows[1][1] == -np.inf


def test_a_new_run_starts_with_the_header_only(tmp_path):
    path = tmp_path / "episodes.csv"
    path.write_text(f"{HEADER}\n10,10,10\n")
    EpisodeLog(path).close()
    assert path.read_text() == f"{HEADER}\n"
