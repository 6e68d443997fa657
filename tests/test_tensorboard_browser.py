"""The custom-scalars tab in a real browser: every chart of the layout is on the page, draws one tag, and draws
each run in a colour of its own, so no chart mixes units and every line is told apart by its colour."""

import shutil

import pytest

from tests.conftest import tensorboard_tags
from tfdqn.telemetry.layout import CHARTS
from tools import tensorboard_view

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _browser():
    reason = tensorboard_view.missing()
    if reason:
        pytest.skip(reason)


def test_each_chart_draws_one_tag_with_a_colour_per_run(cartpole_run, tmp_path):
    # two runs in one logdir, as a user compares them: the CPU-only CartPole run's events under two names
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for events in cartpole_run[0].glob("events.out.tfevents.*"):
            shutil.copy(events, tmp_path / name)
    written = tensorboard_tags(cartpole_run[0])
    with tensorboard_view.custom_scalars_page(tmp_path, timeout=30) as page:
        charts = tensorboard_view.charts(page)
        tensorboard_view.show_whole_tab(page)
        bottom = page.locator(tensorboard_view.CARD).evaluate_all(
            "cards => Math.max(...cards.map(card => card.getBoundingClientRect().bottom))")
        height = page.viewport_size["height"]
    laid_out = [(title, tag) for title, tag in CHARTS if tag in written]  # the run's layout: its mode's tags only
    assert list(charts) == [title for title, _ in laid_out]
    drawn = {title: {name.rsplit(" (", 1)[0] for name in series} for title, (series, _) in charts.items()}
    assert drawn == {title: {tag} for title, tag in laid_out}
    # a chart with data lists the tag once per run and draws each in its own colour
    colours = {title: (len(series), len(strokes)) for title, (series, strokes) in charts.items() if series}
    assert colours and set(colours.values()) == {(2, 2)}, colours
    assert bottom <= height  # the window shows the whole tab, as the screenshot tool takes it
