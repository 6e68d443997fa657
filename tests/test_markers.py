"""Checkpoint completion markers: their names, and which checkpoints of a folder count as complete."""

from tfdqn.run.markers import complete_steps, marker_path


def test_marker_path_names_the_checkpoint_by_its_env_step(tmp_path):
    assert marker_path(tmp_path, 1500) == tmp_path / "ckpt-1500.complete"
    assert marker_path(str(tmp_path), 0).name == "ckpt-0.complete"


def test_complete_steps_are_the_markers_env_steps_newest_first(tmp_path):
    for steps in (200, 30000, 1000, 4000):
        marker_path(tmp_path, steps).write_text("{}")
    # numbers, not names, are sorted: "ckpt-200" sorts after "ckpt-1000" and "ckpt-30000" as text
    assert complete_steps(tmp_path) == [30000, 4000, 1000, 200]


def test_complete_steps_ignore_every_other_file(tmp_path):
    marker_path(tmp_path, 1000).write_text("{}")
    others = ["ckpt-2000.index", "ckpt-2000.data-00000-of-00001", "ckpt-3000.complete.tmp", "ckpt-3000.broken",
              "ckpt-.complete", "ckpt-x1.complete", "xckpt-4000.complete", "state-5000.pkl", "checkpoint",
              "ckpt-6000.complete\n"]
    for name in others:
        (tmp_path / name).write_text("")
    assert complete_steps(tmp_path) == [1000]


def test_a_missing_folder_or_a_file_has_no_complete_checkpoints(tmp_path):
    assert complete_steps(tmp_path / "never-written") == []
    assert complete_steps(tmp_path) == []  # an empty folder
    a_file = tmp_path / "ckpt-10.complete"
    a_file.write_text("{}")
    assert complete_steps(a_file) == []
