"""Command line: `python -m tfdqn.train --env CartPole` (see --help for every config key)."""

from __future__ import annotations

import argparse
import math
import pathlib
import shutil
import sys
import textwrap
import types

import yaml

from tfdqn import config as config_lib
from tfdqn.cli import OneLineErrorParser, run_cli, start_tensorflow
from tfdqn.config.presets import PRESETS
from tfdqn.errors import UserError
from tfdqn.run.clock import process_start
from tfdqn.run.lock import refuse_if_held
from tfdqn.run.run_dir import choose_run_dir, finished_summary, load_run_config
from tfdqn.run.signals import exit_code

NUMBER_FLAGS = {  # dedicated numeric flags and the config key each one sets; values are read as --set reads them
    "total_steps": "run.total_steps",
    "training_interval": "run.training_interval",
    "num_envs": "run.num_envs",
    "learning_starts": "run.learning_starts",
    "seed": "run.seed",
    "checkpoint_every": "run.checkpoint_every",
}


PROG = "python -m tfdqn.train"
DESCRIPTION = ("Train DQN with a compiled actor and learner. Configs: tfdqn/configs/cartpole.yaml for "
               "vector-observation envs, tfdqn/configs/atari.yaml for ALE games; flags and --set override them, and "
               "read numbers alike (1e5 and 100_000 are integers).")


def help_width() -> int:
    """The width argparse wraps help to (the terminal's, or COLUMNS, less 2), for the text it takes as it is."""
    return max(shutil.get_terminal_size().columns - 2, 40)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    docs = config_lib.field_docs()
    parser = OneLineErrorParser(
        prog=prog or PROG, formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False,
        description=textwrap.fill(DESCRIPTION, help_width()))  # the config keys' epilog is set by --help (help_text)
    parser.add_argument("-h", "--help", action="store_true",
                        help="show this help, with every config key's value in the config this command line would "
                             "run (its --env, --config, --preset, --set and flags) and where it comes from, and exit")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="continue RUN_DIR from its newest complete checkpoint with its saved config "
                             "(--total-steps N extends it); a complete run is reported and left as it is")
    parser.add_argument("--env", help=docs["env.id"])
    parser.add_argument("--config", action="append", default=[], metavar="FILE",
                        help="YAML config file; repeatable, later files win (default: chosen from --env)")
    parser.add_argument("--preset", metavar="NAME",
                        help=f"a published recipe on top of the config: {', '.join(PRESETS)} "
                             f"(docs/reference/presets.md); --set and flags still override it")
    parser.add_argument("--total-steps", metavar="N", help=docs["run.total_steps"])
    parser.add_argument("--training-interval", metavar="K", help=docs["run.training_interval"])
    parser.add_argument("--learning-starts", metavar="N", help=docs["run.learning_starts"])
    parser.add_argument("--num-envs", metavar="N", help=docs["run.num_envs"])
    parser.add_argument("--seed", metavar="S", help=docs["run.seed"])
    parser.add_argument("--checkpoint-every", metavar="N", help=docs["run.checkpoint_every"])
    parser.add_argument("--deterministic", action="store_true", help=docs["compute.deterministic"])
    parser.add_argument("--actors", metavar="KIND", help=docs["actors.kind"])
    parser.add_argument("--ray-address", metavar="ADDRESS", help=docs["actors.ray_address"])
    parser.add_argument("--track", action="store_true", help=docs["tracking.wandb"])
    parser.add_argument("--wandb-project", metavar="NAME", help=docs["tracking.wandb_project"])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override any config key (repeatable), e.g. --set learner.learning_rate=1e-4")
    parser.add_argument("--logdir", default="runs", metavar="DIR", help="folder that holds run folders")
    parser.add_argument("--run-name", metavar="NAME", help="run folder name (default: <env>-s<seed>-<time>)")
    parser.add_argument("--profile-steps", metavar="A:B",
                        help="record a TensorFlow profiler trace of env steps A to B into <run>/profile "
                             "(view it in TensorBoard's profile tab: pip install -e \".[profile]\")")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config as YAML and exit, making no run folder")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def help_text(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """--help: the options, then every config key with its value in the config this command line would run
    and where that value comes from, rather than the dataclass defaults (Breakout's replay holds 1,000,000
    transitions, not 50,000)."""
    sources = {}
    config = resolve_config(args, sources)
    width = help_width()
    entries = [_key_entry(config, sources, key, doc, width) for key, doc in config_lib.field_docs().items()]
    parser.epilog = "\n".join([textwrap.fill(_keys_header(args, config, parser.prog), width), *entries])
    return parser.format_help()


CONFIG_FLAGS = ("env", "config", "preset", "set", *NUMBER_FLAGS, "deterministic", "actors", "ray_address", "track",
                "wandb_project")  # the flags `resolve_config` reads


def _keys_header(args: argparse.Namespace, config: config_lib.DQNConfig, prog: str) -> str:
    files = ", ".join(args.config) or f"tfdqn/configs/{config_lib.default_config_file(config.env.id).name}"
    given = any(getattr(args, flag) not in (None, False, []) for flag in CONFIG_FLAGS)
    runs = "this command line would run" if given else f"{prog} runs with no --env, --config, --preset or --set"
    header = (f"config keys (--set KEY=VALUE), with the values of the config {runs}: env {config.env.id} "
              f"from {files}; [brackets] say where each value comes from (default: the dataclass default).")
    return header if given else f"{header} Another env's: {prog} --env Breakout --help, or --print-config."


def _key_entry(config: config_lib.DQNConfig, sources: dict, key: str, doc: str, width: int) -> str:
    """`  key: value  [origin]`, then the key's doc indented under it, each wrapped to `width`."""
    section, name = key.split(".")
    value = yaml.safe_dump({key: config_lib.to_dict(config)[section][name]}, default_flow_style=True,
                           width=1_000_000).strip()[1:-1]
    line = textwrap.fill(f"{value}  [{sources.get(key, 'default')}]", width, initial_indent="  ",
                         subsequent_indent="      ")
    return line + "\n" + textwrap.fill(doc, width, initial_indent="      ", subsequent_indent="      ")


def resolve_config(args: argparse.Namespace, sources: dict | None = None) -> config_lib.DQNConfig:
    overrides = config_lib.parse_set(args.set)
    overrides.update({key: config_lib.parse_value(getattr(args, flag)) for flag, key in NUMBER_FLAGS.items()
                      if getattr(args, flag) is not None})
    if args.env is not None:
        overrides["env.id"] = args.env
    if args.deterministic:
        overrides["compute.deterministic"] = True
    if args.actors is not None:
        overrides["actors.kind"] = args.actors
    if args.ray_address is not None:
        overrides["actors.ray_address"] = args.ray_address
    if args.track:
        overrides["tracking.wandb"] = True
    if args.wandb_project is not None:
        overrides["tracking.wandb_project"] = args.wandb_project
    config = config_lib.resolve_config(args.config, overrides, args.preset, sources)
    if config.actors.ray_address and config.actors.kind != "ray":
        raise UserError(f"--ray-address {config.actors.ray_address!r} needs actors.kind = 'ray', not "
                        f"{config.actors.kind!r}; allowed: --actors ray")
    return config


def preset_differences(args: argparse.Namespace, config: config_lib.DQNConfig) -> str:
    """Where the preset's Atari recipe still differs from its reference run (none off Atari, where the preset
    is adapted, nor for a resumed run, which keeps its saved config)."""
    from tfdqn.envs.names import is_atari_name
    from tfdqn.config.presets import PRESETS

    if args.resume or not args.preset or not is_atari_name(config.env.id):
        return ""
    return PRESETS[args.preset].differences_text(args.preset)


def parse_profile_steps(text: str | None, total_steps: int) -> tuple[int, int] | None:
    """`A:B` with 1 <= A < B <= total_steps + 1 (each read as --set reads an integer), or a one-line error."""
    if text is None:
        return None
    first, sep, last = text.partition(":")
    steps = [config_lib.convert(config_lib.parse_value(part), int) for part in (first, last)] if sep else [None]
    if None not in steps and 1 <= steps[0] < steps[1] <= total_steps + 1:
        return steps[0], steps[1]
    raise UserError(f"--profile-steps {text!r} is not a step range; allowed: A:B with 1 <= A < B <= {total_steps + 1}")


RESUME_FLAGS = {"help", "resume", "total_steps", "print_config", "quiet", "debug"}


def resume_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> tuple[config_lib.DQNConfig, pathlib.Path]:
    """The saved config of RUN_DIR (with an extended --total-steps); any other flag is refused."""
    given = [name for name, value in vars(args).items()
             if name not in RESUME_FLAGS and value != parser.get_default(name)]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise UserError(f"{flag} cannot be used with --resume (the run keeps its saved config); allowed with "
                        f"--resume: --total-steps, --print-config, --quiet, --debug")
    run_dir = pathlib.Path(args.resume)
    total_steps = config_lib.parse_value(args.total_steps) if args.total_steps is not None else None
    return load_run_config(run_dir, total_steps), run_dir


def significant(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant digits in plain notation (0.958, 18.8, 175, 500; whole digits are never
    dropped: 1234): a return of 0.84 to 1.0 must not read as 1.0."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    return f"{value:.{max(0, digits - 1 - math.floor(math.log10(abs(value))))}f}"


def final_evaluation_line(summary: dict) -> str:
    """The product's evaluation, which network it is and where it was exported, and what the last network scored
    on the same games."""
    if "no_product" in summary:
        return f"no product: {summary['no_product']}; nothing was evaluated or exported"
    line = (f"final evaluation: {summary['final_eval_episodes']} episodes, return "
            f"{significant(summary['final_eval_return_mean'])} ± {significant(summary['final_eval_return_std'])}")
    network = summary.get("final_network")  # absent from summaries written before the run had a product
    if network is None:
        return line
    where = f"env step {network['env_steps']}, exported to {summary['policy_dir']}"
    if network["source"] == "last":
        return f"{line} (the last network, {where})"
    return (f"{line} (best-evaluated network, {where}; the last network: "
            f"{significant(summary['last_network_eval_return_mean'])})")


def _main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.help:
        print(help_text(args, parser), end="")
        return 0
    sources = {}
    if args.resume:
        config, run_dir = resume_config(args, parser)
        sources = {key: f"file {run_dir / 'config.yaml'}" for key in config_lib.field_docs()}
    else:
        config = resolve_config(args, sources)
    if args.print_config:
        from tfdqn.agent.network_fit import check_fits_env

        check_fits_env(config)  # as the run's start would: a config it refuses is not shown as one that runs
        print(config_lib.annotated_yaml(config, sources) + preset_differences(args, config), end="")
        return 0
    profile_steps = parse_profile_steps(args.profile_steps, config.run.total_steps)
    if args.resume:
        finished = finished_summary(run_dir, config.run.total_steps)
        if finished:  # resuming would only rewrite its files: leave every byte as it is
            print(f"run {run_dir} is complete ({finished['env_steps']} env steps), {final_evaluation_line(finished)}; "
                  f"nothing to do (to train on: --resume {run_dir} --total-steps N with a larger N)")
            return 0
        refuse_if_held(run_dir)
    else:
        run_dir = choose_run_dir(args.logdir, args.run_name, config)
    if config.actors.kind == "ray" and config.actors.ray_address:  # a wrong address: one line before TensorFlow
        from tfdqn.actors.ray_actors import check_answers

        check_answers(config.actors.ray_address, "actors.ray_address")
    start_tensorflow()
    from tfdqn.run.loop import train  # imports TensorFlow

    summary = train(config, run_dir, quiet=args.quiet, profile_steps=profile_steps, resume=bool(args.resume),
                    started=process_start())
    if "stopped_by" in summary:
        print(f"stopped by {summary['stopped_by']} at env step {summary['env_steps']}; checkpoint saved; "
              f"continue with: {parser.prog} --resume {run_dir}", file=sys.stderr)
        return exit_code(summary["stopped_by"])
    print(final_evaluation_line(summary))
    print(f"summary: {run_dir / 'summary.json'}")
    return 0


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """`prog` (e.g. "tfdqn train") names the command in its help and errors; default: python -m tfdqn.train."""
    parser = build_parser(prog)
    return run_cli(parser, lambda args: _main(args, parser), argv)


class _CallableCommandModule(types.ModuleType):
    """Importing this module (`from tfdqn.train import main`) makes it the package's `train` attribute, where
    the Python API's function lives: calling the module calls that function, so `tfdqn.train(config)` works
    whichever of the two the name holds."""

    def __call__(self, *args, **kwargs):
        import tfdqn

        return tfdqn._train_function(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableCommandModule

if __name__ == "__main__":
    sys.exit(main())
