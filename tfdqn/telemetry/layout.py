"""The custom-scalars tab: the five charts that say how a run goes, each several tags on one chart.

The scalars tab draws one tag per chart, sorted by name, so comparing phase shares or the learner's
load with the CPU's there means flipping between charts; this layout puts them side by side once.
"""

from tensorboard.plugins.custom_scalar import layout_pb2

# (chart title with its unit, regex of the tags it draws: TensorBoard matches it at the tag's start)
CHARTS = (
    ("where the time goes (share of the loop's wall time)", r"perf/share_"),
    ("throughput (env steps/s, updates/s)", r"perf/(env_steps|updates)_per_sec$"),
    ("utilisation (share, 0 to 1: learner busy, CPU, GPU)", r"perf/learner_busy_share$|system/(cpu|gpu)_util$"),
    ("memory (GiB: process RSS, replay filled, GPU)", r"system/\w+_gib$"),
    ("learning (episode and eval return, TD loss, mean max-Q)",
     r"charts/(episode|eval)_return$|losses/(td_loss|q_values)$"),
)
CATEGORY = "tfdqn run"


def run_layout() -> layout_pb2.Layout:
    """The layout proto of the tab, one category with the charts of `CHARTS`."""
    charts = [layout_pb2.Chart(title=title, multiline=layout_pb2.MultilineChartContent(tag=[regex]))
              for title, regex in CHARTS]
    return layout_pb2.Layout(category=[layout_pb2.Category(title=CATEGORY, chart=charts)])
