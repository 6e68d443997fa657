"""The custom-scalars tab in a real browser: a short run's five charts are on the page, each drawing lines."""

import pytest

from tests.conftest import TINY, train_in_process
from tools import tensorboard_view
from tfdqn.telemetry.layout import CHARTS

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _browser():
    reason = tensorboard_view.missing()
    if reason:
        pytest.skip(reason)


def test_the_custom_scalars_tab_draws_every_chart_of_the_layout(tmp_path):
    result = train_in_process(*TINY, "--logdir", str(tmp_path), "--run-name", "run")
    assert result.returncode == 0, result.stderr
    with tensorboard_view.custom_scalars_page(tmp_path / "run", timeout=30) as page:
        lines = tensorboard_view.chart_lines(page)
        page.screenshot(path=str(tmp_path / "custom_scalars.png"), full_page=True)
    assert (tmp_path / "custom_scalars.png").stat().st_size > 0
    # every chart has two series or more in a CPU-only CartPole run, each drawn as one line or more
    assert {title: lines.get(title, 0) >= 2 for title, _ in CHARTS} == {title: True for title, _ in CHARTS}, lines
