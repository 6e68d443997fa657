"""Set tfdqn Atari runs' training returns beside Dopamine's published training returns, iteration by iteration.

    python -m tools.beside_dopamine runs/pong-s0 runs/pong-s1 --agent jax_rainbow_cnn --agent tf_rainbow_legacy \\
        --out docs/beside-dopamine-pong.json --table docs/beside-dopamine-pong.md --plot docs/beside-dopamine-pong

Like with like: Dopamine publishes, per iteration of 250,000 agent steps, the mean unclipped return of the
training games that ended in it (epsilon-greedy policy, sticky actions; docs/dopamine-curves.json cites where
its code says so), 5 runs per agent. A tfdqn run's `episodes.csv` holds every whole game's raw return and the env
step it ended at, so its iteration i is the mean return of the games that ended in env steps (i*L, (i+1)*L]
(L = --iteration-steps), counted only once a game has ended past the iteration's end: an iteration still being
played is left out. Dopamine groups games by the iteration they start in (it plays whole games until 250,000
steps are reached), which differs by at most the one game that crosses each boundary.

tfdqn's env steps are agent steps summed over all its envs (run.num_envs, or every actor's), where Dopamine's
agent steps are one env's: a run with 8 envs reaches 250,000 env steps after 31,250 steps of each env. With an L
other than 250,000, each tfdqn iteration sits beside the Dopamine iteration whose steps hold its end.

Writes the record (`--out`: the command, the machine and code, each run with its seed, game, recipe hash, the
commit it trained with (summary.json's, where the run has written one), where its protocol is not Dopamine's,
its per-iteration means and game counts; each Dopamine agent's per-iteration min, median and max of its 5 values;
and where each run's mean sits among those 5), a Markdown table (`--table`) and the curves (`--plot PREFIX`:
PREFIX.png and PREFIX.svg, Dopamine's agents as min-max bands with their medians, the bench extra).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import statistics
import sys

from tfdqn import config as config_lib
from tfdqn.atomic import atomic_path
from tfdqn.bench.report import machine, publish, run_benchmark
from tfdqn.bench.runkey import recipe_hash
from tfdqn.cli import OneLineErrorParser, number
from tfdqn.errors import UserError
from tfdqn.extras import require
from tfdqn.run.csv_log import read_rows
from tfdqn.run.episodes import HEADER as EPISODES_HEADER
from tfdqn.run.run_dir import read_summary

REPO = pathlib.Path(__file__).resolve().parent.parent
CURVES = REPO / "docs" / "dopamine-curves.json"
PROG = "python -m tools.beside_dopamine"


def game_of(env_id: str, games: list[str]) -> str:
    """The Dopamine game a tfdqn env id plays (`ALE/Pong-v5`, `PongNoFrameskip-v4`, `pong` -> `Pong`), or the id's
    bare name where Dopamine's curves hold no such game."""
    name = re.sub(r"-v\d+$", "", env_id.rsplit("/", 1)[-1]).removesuffix("NoFrameskip")
    return {game.lower(): game for game in games}.get(name.lower(), name)


def training_iterations(episodes: list[dict], iteration_steps: int) -> list[dict]:
    """Per complete iteration (a game ended past its end), the mean raw return of the games that ended in its env
    steps, and how many there were (None and 0 where none ended in it)."""
    if not episodes:
        return []
    complete = (max(row["env_steps"] for row in episodes) - 1) // iteration_steps
    returns = [[] for _ in range(complete)]
    for row in episodes:
        iteration = (row["env_steps"] - 1) // iteration_steps  # the iteration (i*L, (i+1)*L] it ended in
        if iteration < complete:
            returns[iteration].append(row["return"])
    return [{"iteration": i, "env_steps_end": (i + 1) * iteration_steps,
             "return_mean": sum(games) / len(games) if games else None, "episodes": len(games)}
            for i, games in enumerate(returns)]


def protocol_differences(config: config_lib.DQNConfig, protocol: dict) -> list[str]:
    """Where the run's training protocol is not Dopamine's, as `key ours (Dopamine: theirs)`."""
    env, exploration, epsilon = config.env, config.exploration, protocol["epsilon"]
    pairs = [("env.repeat_action_probability", env.repeat_action_probability,
              protocol["repeat_action_probability"]["value"]),
             ("env.fire_on_reset", env.fire_on_reset, protocol["fire_on_reset"]["value"]),
             ("env.noop_max", env.noop_max, protocol["noop_max"]["value"]),
             ("env.terminal_on_life_loss", env.terminal_on_life_loss, protocol["terminal_on_life_loss"]["value"]),
             ("env.frame_skip", env.frame_skip, protocol["frame_skip"]["value"]),
             ("env.max_episode_frames", env.max_episode_frames,  # whichever cap ends a game first
              min(protocol["max_num_frames_per_episode"]["value"],
                  protocol["max_steps_per_episode"]["value"] * protocol["frame_skip"]["value"])),
             ("exploration.epsilon_start", exploration.epsilon_start, epsilon["start"]),
             ("exploration.epsilon_delay_steps", exploration.epsilon_delay_steps, epsilon["hold_steps"]),
             ("exploration.epsilon_decay_steps", exploration.epsilon_decay_steps, epsilon["decay_steps"]),
             ("exploration.epsilon_end", exploration.epsilon_end, epsilon["end"]),
             ("envs stepped together", config.num_streams, 1)]
    return [f"{key} {ours} (Dopamine: {theirs})" for key, ours, theirs in pairs if ours != theirs]


def read_run(run_dir: pathlib.Path, iteration_steps: int, curves: dict) -> dict:
    """One run folder's facts and training iterations; a folder that is no tfdqn run is refused in one line."""
    for name in ("episodes.csv", "config.yaml"):
        if not (run_dir / name).is_file():
            raise UserError(f"RUN_DIR {str(run_dir)!r} holds no {name}; allowed: a run folder written by tfdqn train")
    config = config_lib.build_config([run_dir / "config.yaml"], {})
    episodes = read_rows(run_dir / "episodes.csv", EPISODES_HEADER)
    summary = read_summary(run_dir) or {}  # written at the run's end or at a stop signal: absent while it trains
    return {"run_dir": str(run_dir), "seed": config.run.seed, "env_id": config.env.id,
            "game": game_of(config.env.id, curves["games"]), "config_hash": recipe_hash(config),
            "code": summary.get("code"), "summary_env_steps": summary.get("env_steps"),
            "envs": config.num_streams, "episodes": len(episodes),
            "newest_episode_env_steps": max((row["env_steps"] for row in episodes), default=None),
            "protocol_differences": protocol_differences(config, curves["source"]["protocol"]),
            "iterations": training_iterations(episodes, iteration_steps)}


def dopamine_bands(values_per_iteration: list[list[float]], iteration_steps: int) -> list[dict]:
    """Per Dopamine iteration, the min, median and max of its published values (5 runs)."""
    return [{"iteration": i, "agent_steps_end": (i + 1) * iteration_steps, "min": min(values),
             "median": statistics.median(values), "max": max(values), "values": len(values)}
            for i, values in enumerate(values_per_iteration)]


def sits(mean: float, values: list[float]) -> dict:
    """How many of Dopamine's values the mean is below and above, and in words where that puts it."""
    below, above = sum(mean < value for value in values), sum(mean > value for value in values)
    where = f"below all {len(values)}" if below == len(values) else \
        f"above all {len(values)}" if above == len(values) else "within"
    return {"below": below, "above": above, "of": len(values), "sits": where}


def compare(runs: list[dict], curves: dict, agents: list[str], game: str) -> list[dict]:
    """Each run's iterations (those with games) beside the Dopamine iteration whose agent steps hold their end."""
    dopamine_steps = curves["iteration_agent_steps"]
    rows = []
    for run in runs:
        for agent in agents:
            published = curves["curves"][agent][game]
            for point in run["iterations"]:
                theirs = (point["env_steps_end"] - 1) // dopamine_steps
                if point["return_mean"] is None or theirs >= len(published):
                    continue
                rows.append({"run_dir": run["run_dir"], "seed": run["seed"], "agent": agent,
                             "iteration": point["iteration"], "env_steps_end": point["env_steps_end"],
                             "dopamine_iteration": theirs, "return_mean": point["return_mean"],
                             **sits(point["return_mean"], published[theirs])})
    return rows


def run_label(run: dict) -> str:
    return f"tfdqn {run['config_hash']} seed {run['seed']}"


def markdown_table(record: dict) -> str:
    """One row per iteration: its end in agent steps, each run's mean (games), each Dopamine agent's band, and where
    each run sits among that agent's 5 values."""
    runs, bands, agents = record["runs"], record["dopamine"]["agents"], list(record["dopamine"]["agents"])
    where = {(c["run_dir"], c["agent"], c["iteration"]): c for c in record["comparison"]}
    header = ["iteration", "agent steps at its end", "Dopamine iteration"]
    header += [f"{run_label(run)} mean (games)" for run in runs]
    header += [f"Dopamine {agent} min to max (median)" for agent in agents]
    header += [f"{run_label(run)} vs {agent}" for run in runs for agent in agents]
    lines = [f"{record['game']}: tfdqn training returns beside Dopamine's (iterations of {record['iteration_steps']:,} "
             f"agent steps; Dopamine's: {record['dopamine']['iteration_agent_steps']:,})", "",
             "| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for i in range(max((len(run["iterations"]) for run in runs), default=0)):
        end = (i + 1) * record["iteration_steps"]
        theirs = (end - 1) // record["dopamine"]["iteration_agent_steps"]
        cells = [str(i), f"{end:,}", str(theirs) if theirs < len(bands[agents[0]]) else "-"]
        for run in runs:
            point = run["iterations"][i] if i < len(run["iterations"]) else None
            cells.append("-" if point is None else "- (0)" if point["return_mean"] is None
                         else f"{point['return_mean']:.2f} ({point['episodes']})")
        for agent in agents:
            band = bands[agent][theirs] if theirs < len(bands[agent]) else None
            cells.append("-" if band is None else f"{band['min']:.2f} to {band['max']:.2f} ({band['median']:.2f})")
        for run in runs:
            for agent in agents:
                c = where.get((run["run_dir"], agent, i))
                cells.append("-" if c is None else c["sits"] if c["sits"] != "within"
                             else f"within (above {c['above']} of {c['of']})")
        lines.append("| " + " | ".join(cells) + " |")
    for run in runs:
        if run["protocol_differences"]:
            lines.append(f"\n{run_label(run)} ({run['run_dir']}) differs from Dopamine's protocol: "
                         + "; ".join(run["protocol_differences"]))
    return "\n".join(lines) + "\n"


def plot(record: dict, prefix: str) -> None:
    """Dopamine's agents as shaded min-max bands with median lines, the runs as lines with markers, against agent
    steps; each file written whole or not at all."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = record["dopamine"]["iteration_agent_steps"]
    reached = max((point["env_steps_end"] for run in record["runs"] for point in run["iterations"]), default=steps)
    shown = (reached - 1) // steps + 1  # Dopamine's iterations up to the one the runs have reached
    fig, ax = plt.subplots(figsize=(9, 5), layout="constrained")
    colours = iter(plt.get_cmap("tab10").colors * 4)
    for agent, bands in record["dopamine"]["agents"].items():
        bands, colour = bands[:shown], next(colours)
        x = [band["agent_steps_end"] for band in bands]
        ax.fill_between(x, [b["min"] for b in bands], [b["max"] for b in bands], color=colour, alpha=0.2, lw=0)
        ax.vlines(x, [b["min"] for b in bands], [b["max"] for b in bands], color=colour, alpha=0.5)  # one point too
        ax.plot(x, [b["median"] for b in bands], "-", marker="D", ms=4, color=colour,
                label=f"Dopamine {agent}: median, min-max of 5")
    for run in record["runs"]:
        points = [point for point in run["iterations"] if point["return_mean"] is not None]
        ax.plot([p["env_steps_end"] for p in points], [p["return_mean"] for p in points], "-", marker="o", ms=4,
                color=next(colours), label=run_label(run))
    ax.set_title(f"{record['game']}: training returns, tfdqn beside Dopamine")
    ax.set_xlabel("agent steps (tfdqn: env steps, summed over its envs)")
    ax.set_ylabel("training return (mean of an iteration's games)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # the SVG keeps its labels as text: searchable, smaller
        for suffix in ("png", "svg"):
            with atomic_path(pathlib.Path(f"{prefix}.{suffix}")) as tmp:
                fig.savefig(tmp, format=suffix, dpi=110)
    plt.close(fig)


def build_parser(prog: str = PROG) -> OneLineErrorParser:
    parser = OneLineErrorParser(prog=prog, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a tfdqn run folder (episodes.csv, config.yaml)")
    parser.add_argument("--agent", dest="agents", action="append", required=True, metavar="NAME",
                        help="a Dopamine agent in docs/dopamine-curves.json (repeatable), e.g. jax_rainbow_cnn")
    parser.add_argument("--iteration-steps", type=number(int), default=250_000, metavar="L",
                        help="agent steps per iteration (default 250000, Dopamine's)")
    parser.add_argument("--out", required=True, metavar="FILE.json", help="the record")
    parser.add_argument("--table", metavar="FILE.md", help="also write the Markdown table here")
    parser.add_argument("--plot", metavar="PREFIX", help="write PREFIX.png and PREFIX.svg (the bench extra)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _check(args, curves: dict) -> None:
    """Refuse bad input before anything is read or written."""
    if args.iteration_steps < 1:
        raise UserError(f"--iteration-steps {args.iteration_steps} is out of range; allowed: an integer >= 1")
    for agent in args.agents:
        if agent not in curves["curves"]:
            raise UserError(f"--agent {agent!r} is not in {CURVES.relative_to(REPO)}; allowed: "
                            f"{', '.join(curves['curves'])}")
    for flag, path in (("--out", args.out), ("--table", args.table), ("--plot", args.plot)):
        if path and not pathlib.Path(path).resolve().parent.is_dir():
            raise UserError(f"{flag} {path!r}: its folder does not exist; allowed: a path in an existing folder")
    if len(set(args.run_dirs)) != len(args.run_dirs):
        raise UserError(f"RUN_DIR given twice in {' '.join(args.run_dirs)}; allowed: each run once")
    if args.plot:
        require("bench", "--plot", ("matplotlib",))


def _main(args) -> int:
    curves = json.loads(CURVES.read_text())
    args.agents = list(dict.fromkeys(args.agents))  # an agent named twice is one agent
    _check(args, curves)
    runs = [read_run(pathlib.Path(run_dir), args.iteration_steps, curves) for run_dir in args.run_dirs]
    games = sorted({run["game"] for run in runs})
    if len(games) > 1:
        raise UserError(f"RUN_DIRs play {', '.join(games)}; allowed: runs of one game")
    [game] = games
    if game not in curves["games"]:
        raise UserError(f"RUN_DIR {runs[0]['run_dir']!r} plays {runs[0]['env_id']}; allowed: a run of "
                        f"{' or '.join(curves['games'])}, the games in {CURVES.relative_to(REPO)}")
    dopamine_steps = curves["iteration_agent_steps"]
    record = {"command": args.command, "machine": machine(), "game": game, "iteration_steps": args.iteration_steps,
              "dopamine": {"file": str(CURVES.relative_to(REPO)), "repo": curves["source"]["repo"],
                           "commit": curves["source"]["commit"], "iteration_agent_steps": dopamine_steps,
                           "protocol": curves["source"]["protocol"],
                           "agents": {agent: dopamine_bands(curves["curves"][agent][game], dopamine_steps)
                                      for agent in args.agents}},
              "runs": runs, "comparison": compare(runs, curves, args.agents, game)}
    table = markdown_table(record)
    if args.plot:
        plot(record, args.plot)
    publish(record, table, args.out, args.table)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_benchmark(build_parser, _main, argv, PROG)


if __name__ == "__main__":
    sys.exit(main())
