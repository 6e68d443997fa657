"""The custom-scalars tab: what a run's numbers say, one quantity per chart, grouped by the question each answers.

TensorBoard colours a custom-scalars series by its run alone (the plugin's `DataSeriesColorScale` reads the
run out of the series name), so the tags of one run on one chart share a colour, are told apart only by
marker shape, and share one axis whatever their units. One tag per chart avoids both: the title names the
quantity and its unit, the axis fits it, and when several runs are selected each is a line of its own
colour, the run selector being the legend. The categories keep related charts side by side, as the
scalars tab (one chart per tag, sorted by name) does not. A run's layout leaves out each chart whose tag its mode
never writes (`unwritten_tags`: the GPU's without one, the wait without an async learner or actors, evaluation
without periodic evaluation): the first view a user opens shows no blank chart.
"""

import re

from tensorboard.plugins.custom_scalar import layout_pb2

from tfdqn.telemetry.phase_timer import PHASES

# What each phase of `PhaseTimer` covers, in a chart's title; "other" is the time charged to none.
PHASE_TITLES = {"env_step": "env steps", "act": "acting", "replay_add": "replay: adding",
                "replay_sample": "replay: sampling", "update": "gradient updates",
                "wait": "async: waiting for the learner", "log": "summaries", "checkpoint": "checkpoints",
                "eval": "evaluation", "other": "other (the loop itself)"}

# (category title, ((chart title with its unit, the one tag it draws), ...)), in reading order
CATEGORIES = (
    ("learning", (
        ("episode return (training games, mean per summary)", "charts/episode_return"),
        ("eval return (greedy games, mean per evaluation)", "charts/eval_return"),
        ("TD loss (batch mean)", "losses/td_loss"),
        ("mean max-Q (expected return)", "losses/q_values"),
    )),
    ("speed", (
        ("env steps/s", "perf/env_steps_per_sec"),
        ("updates/s", "perf/updates_per_sec"),
    )),
    ("busy (share of time, 0 to 1)", (
        ("learner busy (share of wall time)", "perf/learner_busy_share"),
        ("CPU busy (share of all cores)", "system/cpu_util"),
        ("GPU busy (share of time; with a GPU)", "system/gpu_util"),
    )),
    ("memory (GiB)", (
        ("process resident memory (GiB)", "system/rss_gib"),
        ("replay, filled part (GiB)", "system/replay_gib"),
        ("GPU memory in use (GiB; with a GPU)", "system/gpu_mem_gib"),
    )),
    ("where the loop's time goes (share of its wall time, 0 to 1)",
     tuple((f"{PHASE_TITLES[phase]} (share of wall time)", f"perf/share_{phase}") for phase in (*PHASES, "other"))),
)
CHARTS = tuple(chart for _, charts in CATEGORIES for chart in charts)  # (title, tag) of every chart, in order


def tag_regex(tag: str) -> str:
    """The regex of a chart that draws exactly `tag` (TensorBoard matches it at the tag's start)."""
    return re.escape(tag) + "$"


def unwritten_tags(config, has_gpu: bool) -> set[str]:
    """The charts' tags a run of `config` never writes: the GPU's on a machine without one, the time waiting for
    the learner without an async learner or actors, evaluation's without periodic evaluation, and checkpoints'
    where the only one is saved after the last summary."""
    r = config.run
    return ({"system/gpu_util", "system/gpu_mem_gib"} if not has_gpu else set()) | \
        ({"perf/share_wait"} if not r.async_learner and config.actors.kind == "inline" else set()) | \
        ({"charts/eval_return", "perf/share_eval"} if r.eval_every == 0 else set()) | \
        ({"perf/share_checkpoint"} if not 0 < r.checkpoint_every < r.total_steps else set())


def run_layout(unwritten: set[str] = frozenset()) -> layout_pb2.Layout:
    """The layout proto of the tab: `CATEGORIES`, each chart a multiline chart of its one tag, less the charts of
    `unwritten` tags (and a category left with none)."""
    categories = [(category, [(title, tag) for title, tag in charts if tag not in unwritten])
                  for category, charts in CATEGORIES]
    return layout_pb2.Layout(category=[
        layout_pb2.Category(title=category, chart=[
            layout_pb2.Chart(title=title, multiline=layout_pb2.MultilineChartContent(tag=[tag_regex(tag)]))
            for title, tag in charts])
        for category, charts in categories if charts])
