"""The `fedpref` command line: `fedpref run CONFIG [--set k=v ...] [--out DIR]`."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fedpref.errors import FedprefError
from fedpref.results import RESULTS_FILE

# plots.FIGURE_FORMATS, spelled out: importing plots loads matplotlib, seconds every command would pay
FIGURE_FORMATS = ("png", "pdf", "svg")


def _options_epilog() -> str:
    from fedpref.algorithms.registry import help_rows
    from fedpref.config import option_help

    lines = ["config options (TOML sections, or --set section.key=value):"]
    lines += [f"  {key:38s} {help_} (default {default})" for key, default, help_ in option_help()]
    lines += ["", "methods (algorithm.methods) and their own options ([algorithm.options.NAME] tables, or --set):"]
    lines += [f"  {name:38s} {help_}" for name, help_ in help_rows()]
    return "\n".join(lines)


class _LazyEpilog(argparse.RawDescriptionHelpFormatter):
    """Takes the epilog as a function, called only when the help is printed: listing the methods imports
    every algorithm (and torch), seconds that no other command should pay."""

    def add_text(self, text: str | Callable[[], str] | None) -> None:
        super().add_text(text() if callable(text) else text)


# The flags of the commands that run something, defined once so that each means the same on every command.
SET_HELP = "override a config value, e.g. --set federation.rounds=10 (repeatable)"
METHOD_HELP = "run only this method (repeatable; sets algorithm.methods, e.g. --method FL --method CL)"
SEEDS_HELP = "comma-separated seeds, e.g. 0,1,2: one run per seed into OUT/seed=<seed>/, as `fedpref sweep` does"
OUT_HELP = "the run folder (default: runs/<name>)"
OVERWRITE_HELP = "replace an existing, non-empty output folder"
RESUME_HELP = "continue the run in --out from its last complete checkpoint"
ENGINE_HELP = "inprocess: all clients in this process (default); flower: Flower's Simulation Engine (docs/flower.md)"


def _add_set(parser: argparse.ArgumentParser, help_: str = SET_HELP) -> None:
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help_)


def _add_method(parser: argparse.ArgumentParser, help_: str = METHOD_HELP) -> None:
    parser.add_argument("--method", dest="methods", action="append", default=[], metavar="NAME", help=help_)


def _add_run_flags(parser: argparse.ArgumentParser, *flags: str, out_required: bool = False) -> None:
    """The shared flags, by name: out, overwrite, resume, engine, log, seeds (--set and --method: _add_set,
    _add_method)."""
    if "out" in flags:
        parser.add_argument("--out", type=Path, required=out_required, default=None, help=OUT_HELP)
    if "overwrite" in flags:
        parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    if "resume" in flags:
        parser.add_argument("--resume", action="store_true", help=RESUME_HELP)
    if "engine" in flags:
        parser.add_argument("--engine", choices=("inprocess", "flower"), default="inprocess", help=ENGINE_HELP)
    if "log" in flags:
        _add_log_argument(parser)
    if "seeds" in flags:
        parser.add_argument("--seeds", default=None, help=SEEDS_HELP)


def method_overrides(methods: list[str]) -> list[str]:
    """`--method A --method B` as the override algorithm.methods=["A","B"] (nothing without --method)."""
    return [f"algorithm.methods={json.dumps(methods)}"] if methods else []


def _version() -> str:
    from fedpref import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fedpref", description="Federated, personalized reward modelling (FedGD, FedVPA-GP and baselines)."
    )
    parser.add_argument("--version", action="version", version=f"fedpref {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run an experiment from a TOML config",
        epilog=_options_epilog,
        formatter_class=_LazyEpilog,
        description="Run every method of an experiment (global phase, then personalization of every client) "
        f"and write the run folder: config.toml, rounds.jsonl, {RESULTS_FILE}, table.md, personalization.png.",
    )
    run.add_argument(
        "config", type=Path, help="experiment or Stage 2 TOML file, or a shipped config's name (fedpref list configs)"
    )
    _add_set(run)
    _add_method(run)
    _add_run_flags(run, "out", "overwrite", "resume", "engine", "log", "seeds")
    run.add_argument(
        "--figure-format",
        choices=FIGURE_FORMATS,
        default="png",
        help="file format of the run's figures (default: png; pdf or svg for vector figures in a paper)",
    )
    diag = sub.add_parser(
        "diagnose",
        help="Gradient Quotient and Headroom of a finished run's initializations (Tables 1, 2, 5)",
        description="Recompute the diagnostics for every method of a finished run from its saved "
        f"initializations (RUN_DIR/models/*.pt); the numbers go into RUN_DIR/{RESULTS_FILE} and table.md.",
    )
    diag.add_argument("run_dir", type=Path, help="a finished run folder")
    _add_methods_and_settings(
        diag,
        "diagnose only this method (repeatable; default: every method of the run)",
        "override diagnostics options, e.g. --set diagnostics.eta=1e-4",
    )
    again = sub.add_parser(
        "personalize",
        help="personalize a finished run's initializations again, e.g. for longer (acc^80), into a new folder",
        description="Run only the personalization phase again from a finished run's saved initializations "
        "(RUN_DIR/models/*.pt) at other steps or personalization settings, and write a run folder of its own "
        "that `fedpref summarize` reads like any other. Steps the run measured give its numbers again.",
    )
    again.add_argument("run_dir", type=Path, help="a finished run folder")
    again.add_argument("--steps", required=True, help="local steps at which to test, increasing, e.g. 0,10,40,80")
    _add_run_flags(again, "out", "overwrite", out_required=True)
    _add_methods_and_settings(
        again,
        "only this method (repeatable; default: every method of the run)",
        "other personalization settings, e.g. --set personalization.lr=1e-5 (only personalization.*)",
    )
    again.add_argument("--figure-format", choices=FIGURE_FORMATS, default="png", help="file format of the figures")
    data = sub.add_parser("data", help="inspect an experiment's preference data, split a pooled file by user")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    stats = data_sub.add_parser("stats", help="clients, pairs per client and split sizes, before a long run")
    stats.add_argument("config", type=Path)
    _add_set(stats)
    split = data_sub.add_parser(
        "split-clients",
        help="one JSON-lines file per user of a pooled file: each node of a federation holds only its own",
    )
    split.add_argument("file", type=Path, help="a pooled JSON-lines file (optionally .gz) with a user column")
    split.add_argument("--out", type=Path, required=True, help="folder for <user>.jsonl files")
    split.add_argument("--user-key", default="user_id", help="the user column (as data.pairwise.user_key)")
    _add_estimate_parser(sub)
    _add_list_parser(sub)
    _add_stage2_parser(sub)
    _add_sweep_parser(sub)
    _add_summarize_parser(sub)
    _add_claims_parser(sub)
    _add_export_parser(sub)
    _add_federation_parser(sub)
    return parser


def _add_claims_parser(sub) -> None:
    """`fedpref claims`: every paper claim with the paper's number, ours and the verdict its rule decides."""
    claims = sub.add_parser(
        "claims",
        help="every paper claim: the paper's number, ours, and the verdict its fixed rule decides",
        description="Decide every claim of the two papers from summaries (`fedpref summarize --json` files): by "
        "default the committed ones (docs/results/*.json of the source checkout); with --summaries, your own, "
        "e.g. a rerun at another scale (claims are matched by summary file name where it is theirs, else by "
        "method, step and kind; only the claims with a number in them are listed). Rules: docs/results/index.md.",
    )
    claims.add_argument(
        "--summaries",
        type=Path,
        nargs="+",
        default=None,
        metavar="PATH",
        help="summary JSON files, or folders of them (default: the committed docs/results)",
    )
    claims.add_argument("--id", action="append", default=None, metavar="ID", help="only this claim (repeatable)")
    claims.add_argument("--format", choices=("md", "json"), default="md", help="Markdown table or JSON")


def cmd_claims(args: argparse.Namespace, console: Console) -> None:
    from fedpref import claims

    strict = args.summaries is None
    summaries = claims.load_summaries(args.summaries or [claims.committed_summaries()])
    chosen = [c for c in claims.load_claims() if not args.id or c.id in args.id]
    if args.id and (unknown := set(args.id) - {c.id for c in chosen}):
        raise FedprefError(f"--id: no claim {', '.join(sorted(unknown))}")
    decisions = claims.decide_all(summaries, chosen, strict=strict)
    if not decisions:
        raise FedprefError("no claim has a number in these summaries")
    text = claims.to_json(decisions) if args.format == "json" else claims.to_markdown(decisions)
    sys.stdout.write(text)
    sys.stdout.flush()


def _add_list_parser(sub) -> None:
    """`fedpref list configs|methods`: what there is to run."""
    ls = sub.add_parser(
        "list",
        help="list the shipped configs or the implemented methods",
        description="`configs`: every shipped config (or every TOML file under --dir) with its name, its group "
        "and the first sentence of its header; `fedpref run NAME` runs one. `methods`: every method of the "
        "registry, with its one-line help and flags.",
    )
    ls.add_argument("what", choices=("configs", "methods"))
    ls.add_argument("--dir", type=Path, default=None, help="a folder of configs (default: the shipped ones)")


def config_folder(given: Path | None) -> Path:
    """The folder `fedpref list configs` reads: --dir, else the configs shipped inside the package."""
    from fedpref.config import SHIPPED_CONFIGS

    folder = SHIPPED_CONFIGS if given is None else given
    if not folder.is_dir():
        raise FedprefError(f"no configs folder: {folder} (pass --dir)")
    return folder


def config_description(path: Path) -> str:
    """The first sentence of a config's header comment ('' when it has none)."""
    header = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append(line.lstrip("#").strip())
    text = " ".join(header)
    # a sentence ends at ". " before a capital, except after the papers' abbreviations ("Sec. 5.1", "App. D")
    end = re.search(r"(?<!Sec)(?<!App)(?<!Fig)(?<!Eq)\.\s+(?=[A-Z])", text)
    return text if end is None else text[: end.start() + 1]


def cmd_list(args: argparse.Namespace, console: Console) -> None:
    table = Table(show_edge=False, box=None, pad_edge=False)
    if args.what == "methods":
        from fedpref.algorithms.registry import help_rows, methods

        table.add_column("method")
        table.add_column("paper")
        table.add_column("what it is")
        helps = dict(help_rows())  # the methods' own options (indented keys) are in `fedpref run --help`
        for name, spec in methods().items():
            table.add_row(name, spec.paper, helps[name])
    else:
        folder = config_folder(args.dir)
        table.add_column("config")
        table.add_column("group")
        table.add_column("what it is")
        for path in sorted(folder.rglob("*.toml"), key=lambda p: (p.parent.as_posix(), p.name)):
            group = path.parent.relative_to(folder).as_posix()
            table.add_row(path.stem, "" if group == "." else group, config_description(path))
    console.print(table, highlight=False, markup=False)


def _add_estimate_parser(sub) -> None:
    """`fedpref estimate CONFIG`: the predicted wall time of `fedpref run CONFIG`, before starting it."""
    est = sub.add_parser(
        "estimate",
        help="predict how long `fedpref run CONFIG` takes on this machine, before starting it",
        description="Prepare the run's data and model (timed), dry-run every method's rounds with stand-in "
        "replies to count each client task's steps and evaluated pairs, time the first tasks of each kind "
        "for real (a few steps), and print the predicted wall time per method and in total (in-process engine).",
    )
    est.add_argument(
        "config", type=Path, help="experiment TOML file, or a shipped config's name (fedpref list configs)"
    )
    _add_set(est)
    _add_method(est)
    est.add_argument("--probe-steps", type=int, default=8, help="most real local steps of a timed task (default 8)")
    est.add_argument("--out", type=Path, default=None, help="also write the estimate as JSON")


def _add_federation_parser(sub) -> None:
    """`fedpref federation CONFIG --clients-dir DIR --out RUN`: a loopback federation, one node per client file."""
    fed = sub.add_parser(
        "federation",
        help="run the federated methods on a local Flower federation: one SuperNode per client file",
        description="Start a SuperLink and one SuperNode per file of --clients-dir on free loopback ports (each "
        "node reads only its own file), run the config's federated methods with `flwr run`, write the run folder "
        f"(config.toml, rounds.jsonl, {RESULTS_FILE}, table.md, personalization.png, logs/) and stop every process "
        "it started, also on Ctrl-C and on error. docs/flower.md has the manual steps for real machines.",
    )
    fed.add_argument("config", type=Path)
    fed.add_argument("--clients-dir", type=Path, required=True, help="one JSON-lines file per client")
    _add_set(fed)
    _add_method(fed)
    _add_run_flags(fed, "out", "resume", out_required=True)
    fed.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for every method's results")


def cmd_federation(args: argparse.Namespace, console: Console) -> None:
    from fedpref.apps.federation import run_federation
    from fedpref.config import load_config
    from fedpref.experiments.orchestrator import FLOWER, check_config
    from fedpref.reports import plots, tables
    from fedpref.results import RunResults

    overrides = args.overrides + method_overrides(args.methods)
    plan = check_config(load_config(args.config, overrides), str(args.config), FLOWER)
    if plan.centralized:
        console.print(f"skipping {', '.join(plan.centralized)}: they pool raw data (centralized references)")
    if not plan.federated:
        raise FedprefError(f"{args.config}: no federated method to run")
    if args.resume and not (args.out / "checkpoints").is_dir():
        raise FedprefError(f"{args.out}: nothing to resume (no checkpoints folder)")
    if not args.resume and ((args.out / "checkpoints").exists() or (args.out / "nodes").exists()):
        raise FedprefError(f"{args.out} holds a federation's run: continue it with --resume, or choose another --out")
    results = run_federation(
        args.config, args.clients_dir, args.out, plan.federated, overrides, args.timeout, console.print, args.resume
    )
    typed = RunResults.from_dict(results)
    (args.out / "table.md").write_text(tables.results_markdown(typed.methods), encoding="utf-8")
    plots.plot_group_curves(typed.methods, args.out / "personalization.png")
    console.print(f"wrote {args.out}")


def _add_methods_and_settings(parser: argparse.ArgumentParser, methods_help: str, settings_help: str) -> None:
    """--method NAME (repeatable) and --set KEY=VALUE, for commands that work on a finished run."""
    _add_method(parser, methods_help)
    _add_set(parser, settings_help)


def _add_export_parser(sub) -> None:
    """`fedpref export model RUN ...` (a client's personalized model) and `fedpref export pairs CONFIG ...`."""
    export = sub.add_parser("export", help="write a client's personalized model (model) or an experiment's pairs")
    kinds = export.add_subparsers(dest="export_command", required=True)
    model = kinds.add_parser(
        "model",
        help="a client's personalized reward model as a PEFT folder plus its head (docs/formats.md)",
        description="Replay the client's personalization of the method exactly as the run did (its config and "
        "RUN/models/<method>.pt), then write DIR as a PEFT save_pretrained folder (PeftModel.from_pretrained), "
        "the tokenizer, the reward head (reward_head.safetensors) and fedpref_reward.json (how to score).",
    )
    model.add_argument("run_dir", type=Path, help="a finished run folder")
    model.add_argument("--method", required=True, help="the method whose initialization the client starts from")
    model.add_argument("--client", required=True, help="the client id")
    model.add_argument("--out", type=Path, required=True, help="output folder (new or empty)")
    model.add_argument("--merged", action="store_true", help="also write DIR/merged: the backbone with LoRA merged")
    pairs = kinds.add_parser("pairs", help="an experiment's preference pairs as JSON lines (fedpref's format)")
    pairs.add_argument("config", type=Path)
    _add_set(pairs)
    pairs.add_argument("--out", type=Path, required=True, help="output .jsonl file")


def cmd_export(args: argparse.Namespace, console: Console) -> None:
    if args.export_command == "pairs":
        from fedpref.config import load_config
        from fedpref.data.pairs import write_jsonl
        from fedpref.experiments.setup import load_pairs

        pairs = load_pairs(load_config(args.config, args.overrides))
        write_jsonl(pairs, args.out)
        console.print(f"wrote {len(pairs)} pairs to {args.out}")
        return
    from fedpref.experiments.export import export_client

    done = export_client(args.run_dir, args.method, args.client, args.out, merged=args.merged)
    accuracy = done.accuracies[-1]
    console.print(f"{args.out}: {args.method} / {args.client}, test accuracy {accuracy:.3f}", highlight=False)


def _add_sweep_parser(sub) -> None:
    sweep = sub.add_parser(
        "sweep",
        help="run a config over seeds and a grid of values, one run folder per cell, resumable",
        description="Run CONFIG once per seed and combination of --grid values, into "
        "OUT/<key=value>/.../seed=<seed>/ (characters other than letters, digits and ._+=- become _). "
        "A finished cell is skipped, an interrupted one continued as with `fedpref run --resume`; "
        "OUT/sweep.json lists the cells and their status. Every cell's config is validated before any run. "
        "A Stage 2 config (`fedpref stage2`) sweeps the same way; an interrupted cell continues from its "
        "checkpoint as with `fedpref stage2 --resume`.",
    )
    sweep.add_argument(
        "config", type=Path, help="experiment or Stage 2 TOML file, or a shipped config's name (fedpref list configs)"
    )
    sweep.add_argument("--seeds", default=None, help="comma-separated seeds, e.g. 0,1,2 (default: the config's seed)")
    sweep.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="sweep a config key over scalar values, parsed like --set values (repeatable: the product is run)",
    )
    _add_set(sweep)
    _add_method(sweep)
    sweep.add_argument("--out", type=Path, required=True, help="the sweep folder")
    _add_run_flags(sweep, "engine", "log")


def _add_log_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log",
        default=None,
        metavar="BACKENDS",
        help="experiment trackers, comma-separated: tensorboard, wandb (offline unless WANDB_API_KEY or WANDB_MODE "
        "is set), csv; sets logging.backends (README, Tracking)",
    )


def log_overrides(backends: str | None) -> list[str]:
    """`--log a,b` as the override logging.backends=["a","b"] (nothing without --log)."""
    if backends is None:
        return []
    names = [name.strip() for name in backends.split(",") if name.strip()]
    return [f"logging.backends={json.dumps(names)}"]  # a JSON list of strings is a TOML array


def _add_summarize_parser(sub) -> None:
    summarize = sub.add_parser(
        "summarize",
        help="mean, std and 95%% t-intervals over seeds of finished runs, grouped by configuration",
        description="Summarize the finished runs in or below DIR (run or sweep folders): runs whose configs "
        "differ only in the seed form a group; per method and personalization step the mean over seeds, the "
        "sample std and the 95% Student-t interval of the mean; FedGD/FedBiscuit partition ARI, the final partition "
        "by true group and the round "
        "from which the partition no longer changes; per-group accuracies; the FedVPL/FedVPA-GP selector table; "
        "a paired difference per --pair; per --across KEY, the configurations that differ only in KEY side by side "
        "with their paired differences. Markdown on stdout. Stage 2 runs (`fedpref stage2`): per Stage 1 method and "
        "policy (conditional DPO, FedDPO) each type's win rate and the worse-served type's over seeds, the Stage 1 "
        "selector's accuracy, and per --pair the paired difference of two methods' conditional policies.",
    )
    summarize.add_argument(
        "dirs",
        type=Path,
        nargs="+",
        metavar="DIR",
        help="run or sweep folders; or summary JSON files (--json) of other seeds of the same configurations, "
        "e.g. run on other machines: their rows are merged with each other and with the runs given, per row over "
        "all seeds (a seed in two of them must have the same value; a group's settings must agree, but for data "
        "and cache locations and the device)",
    )
    summarize.add_argument(
        "--judge",
        default="oracle",
        help="Stage 2 runs: whose verdicts, one of the run's eval.judges: oracle (the story task), selector, "
        "reward_model, lm or chat (default oracle)",
    )
    summarize.add_argument(
        "--pair",
        action="append",
        default=None,
        metavar="A,B",
        help="paired per-client difference A - B (same clients, same seeds); repeat for several pairs",
    )
    summarize.add_argument(
        "--across",
        action="append",
        default=None,
        metavar="KEY[=REF]",
        help="compare configurations that differ only in this config key (e.g. algorithm.num_models=4): each "
        "method's accuracy per value and its paired difference against REF (default: the first value); repeatable",
    )
    summarize.add_argument("--out", type=Path, default=None, help="also write the Markdown to this file")
    summarize.add_argument("--csv", type=Path, default=None, help="write the numbers as CSV to this file")
    summarize.add_argument(
        "--json", type=Path, default=None, help="write the numbers as JSON to this file (what `fedpref claims` reads)"
    )
    summarize.add_argument(
        "--plot", type=Path, default=None, help="draw accuracy vs steps, mean and 95%% CI band per method, to this file"
    )
    summarize.add_argument(
        "--figure-format",
        choices=FIGURE_FORMATS,
        default=None,
        help="format of the --plot file, replacing its suffix (default: by the suffix: .png, .pdf or .svg)",
    )


def _add_stage2_parser(sub) -> None:
    """`fedpref stage2 CONFIG`: Stage 1 -> conditional DPO -> win rates, and FedDPO (docs/stage2.md)."""
    from fedpref.stage2.config import option_rows

    stage2 = sub.add_parser(
        "stage2",
        help="FedVPA-GP Stage 2: conditional DPO, FedDPO and win rates end to end (docs/stage2.md)",
        epilog="config options:\n" + "\n".join(f"  {k:30s} {h} (default {d})" for k, d, h in option_rows()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    stage2.add_argument("config", type=Path, help="stage 2 TOML file, or a shipped one's name, e.g. stage2/stories")
    _add_set(stage2)
    _add_run_flags(stage2, "out", "overwrite", "resume", "seeds")


def cmd_stage2(args: argparse.Namespace, console: Console) -> None:
    from fedpref.stage2.config import load_stage2_config
    from fedpref.stage2.pipeline import run_stage2

    if args.seeds is not None:  # one run per seed, through `fedpref sweep`
        _sweep_seeds(args, args.overrides, "inprocess", console)
        return
    cfg = load_stage2_config(args.config, args.overrides)
    out = args.out or Path("runs") / cfg.name
    run_stage2(cfg, out, args.overwrite, log=lambda line: console.print(line, highlight=False), resume=args.resume)
    console.print((out / "table.md").read_text(encoding="utf-8"), highlight=False)


def _sweep_seeds(args: argparse.Namespace, overrides: list[str], engine: str, console: Console) -> None:
    """`run --seeds` and `stage2 --seeds`: `fedpref sweep --seeds` into --out (default runs/<the config's name>)."""
    from fedpref.config import read_toml

    if getattr(args, "resume", False) or args.overwrite:
        raise FedprefError(
            "--seeds runs a sweep, which skips finished seeds and continues the others: drop "
            "--resume/--overwrite (or remove a seed's folder to run it again)"
        )
    out = args.out
    if out is None:
        _, raw = read_toml(args.config, args.overrides)
        out = Path("runs") / str(raw.get("name", args.config.stem))
    _sweep(args.config, args.seeds, [], overrides, out, engine, console)


def cmd_diagnose(args: argparse.Namespace, console: Console) -> None:
    from fedpref.experiments.experiment import diagnose_run

    diagnose_run(args.run_dir, console, args.overrides, args.methods or None)


def cmd_personalize(args: argparse.Namespace, console: Console) -> None:
    from fedpref.experiments.experiment import personalize_run

    steps = parse_steps(args.steps)
    methods = args.methods or None
    personalize_run(args.run_dir, args.out, steps, console, args.overrides, methods, args.overwrite, args.figure_format)


def parse_steps(text: str) -> list[int]:
    """'0,10,80' -> [0, 10, 80]; the config's own check then asks for increasing, non-negative steps."""
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise FedprefError(f"--steps {text!r}: expected integers separated by commas, e.g. --steps 0,10,80") from None


def cmd_data(args: argparse.Namespace, console: Console) -> None:
    from fedpref.config import load_config
    from fedpref.data.splits import split_clients
    from fedpref.experiments.setup import check_client_count, load_pairs

    if args.data_command == "split-clients":
        from fedpref.data.client_files import split_by_user

        written = split_by_user(args.file, args.user_key, args.out)
        console.print(f"wrote {len(written)} client files to {args.out}")
        return
    cfg = load_config(args.config, args.overrides)
    if args.data_command == "stats" and cfg.data.source == "tldr":
        _print_workers(console, cfg.data.path)  # before the filter, which may leave no worker
    pairs = load_pairs(cfg)
    splits = split_clients(pairs, cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)
    sizes = " / ".join(str(sum(len(getattr(s, part)) for s in splits)) for part in ("train", "val", "test"))
    table = Table(title=f"{len(splits)} clients, {len(pairs)} pairs", caption=f"train / val / test: {sizes}")
    for column in ("client", "group", "pairs", "train", "val", "test"):
        table.add_column(column)
    for s in splits:
        counts = [len(s.train), len(s.val), len(s.test)]
        table.add_row(s.client_id, s.group or "-", str(sum(counts)), *map(str, counts))
    console.print(table)
    check_client_count(cfg, len(splits))


def _print_workers(console: Console, path: str) -> None:
    """TL;DR comparisons per worker per split, before the worker filter."""
    from fedpref.data.tldr import worker_counts

    counts = worker_counts(path)
    names = sorted({split for c in counts.values() for split in c})
    console.print(f"{path}: {len(counts)} workers before the filter", highlight=False)
    table = Table(title="comparisons per worker and split")
    for column in ("worker", *names, "total"):
        table.add_column(column)
    for worker, c in sorted(counts.items(), key=lambda item: -sum(item[1].values())):
        table.add_row(worker, *(str(c.get(name, 0)) for name in names), str(sum(c.values())))
    console.print(table)


def cmd_sweep(args: argparse.Namespace, console: Console) -> None:
    overrides = args.overrides + method_overrides(args.methods) + log_overrides(args.log)
    _sweep(args.config, args.seeds, args.grid, overrides, args.out, args.engine, console)


def _sweep(config: Path, seeds_text: str | None, grid_items, overrides, out: Path, engine: str, console) -> None:
    """`fedpref sweep` (and `run`/`stage2 --seeds`): every cell checked before the first runs, then each run."""
    from fedpref.experiments.sweep import parse_grid, parse_seeds, plan_cells, run_sweep, sigterm_as_interrupt
    from fedpref.stage2.config import is_stage2_config

    seeds = parse_seeds(seeds_text) if seeds_text is not None else None
    grid = parse_grid(grid_items)
    kind = None
    if is_stage2_config(config):
        from fedpref.stage2.pipeline import STAGE2_SWEEP as kind
    cells = plan_cells(config, seeds, grid, overrides, out, kind)
    if kind is None:  # a typo in a method name stops the sweep before its first run
        from fedpref.experiments.orchestrator import check_config

        for cell in cells:
            check_config(cell.cfg, f"sweep cell {cell.label}: {config}", engine)
    spec = {"config": str(config), "seeds": seeds, "grid": grid, "overrides": overrides}
    with sigterm_as_interrupt():
        run_sweep(cells, out, console, spec | {"engine": engine}, engine=engine, kind=kind)


def cmd_summarize(args: argparse.Namespace, console: Console) -> None:
    from fedpref.reports.summary import configurations, parse_across, parse_pairs, summarize, to_csv, to_json

    files = [p for p in args.dirs if p.is_file()]
    if files:
        _merge_summaries(args, [p for p in args.dirs if not p.is_file()], files)
        return
    if _holds_stage2_runs(args.dirs):
        from fedpref.reports.summary import json_document
        from fedpref.stage2.seed_summary import stage2_configurations, stage2_summary

        _refuse_curves(args, "Stage 2 runs")
        markdown, records = stage2_summary(args.dirs, args.judge, parse_pairs(args.pair))
        if args.json:
            header = {"configurations": stage2_configurations(args.dirs, args.judge)}
            args.json.write_text(json_document(records, **header), encoding="utf-8")
        _write_markdown(markdown, args.out)
        return
    across = [parse_across(text) for text in args.across or ()]
    markdown, rows = summarize(args.dirs, parse_pairs(args.pair), across)
    _write_markdown(markdown, args.out)
    if args.csv:
        args.csv.write_text(to_csv(rows), encoding="utf-8")
    if args.json:
        args.json.write_text(to_json(rows, configurations(args.dirs)), encoding="utf-8")
    if args.plot:
        from fedpref.reports.plots import plot_seed_curves

        plot_seed_curves(rows, args.plot, args.figure_format)


def _merge_summaries(args: argparse.Namespace, folders: list[Path], files: list[Path]) -> None:
    """`fedpref summarize` given summary JSON files (and maybe run folders): their rows merged over seeds."""
    from fedpref.reports.merge import Summary, load_summary, merge_summaries, merged_markdown
    from fedpref.reports.summary import json_document, parse_pairs

    if args.across:
        raise FedprefError("--across: only for run folders, not with summary JSON files")
    summaries = []
    if folders:  # the runs, summarized as on their own, first
        if _holds_stage2_runs(folders):
            from fedpref.stage2.seed_summary import stage2_configurations, stage2_summary

            _, records = stage2_summary(folders, args.judge, parse_pairs(args.pair))
            settings = stage2_configurations(folders, args.judge)
        else:
            from fedpref.reports.summary import configurations, row_record, summarize

            _, rows = summarize(folders, parse_pairs(args.pair))
            records, settings = [row_record(r) for r in rows], configurations(folders)
        summaries.append(Summary(", ".join(map(str, folders)), records, settings))
    elif args.pair:
        raise FedprefError("--pair: only for run folders; a summary JSON holds the pairs it was written with")
    summaries += [load_summary(path) for path in files]
    merged = merge_summaries(summaries)
    if any("policy" in r for r in merged.rows):
        _refuse_curves(args, "Stage 2 summaries")
    for warning in merged.warnings:  # on stderr: the Markdown on stdout says the same
        Console(stderr=True).print(f"[yellow]note:[/yellow] {escape(warning)}", highlight=False, soft_wrap=True)
    _write_markdown(merged_markdown(merged, [s.source for s in summaries]), args.out)
    if args.json:
        text = json_document(merged.rows, configurations=merged.configurations)
        args.json.write_text(text, encoding="utf-8")
    if args.csv or args.plot:
        from fedpref.reports.summary import row_of, to_csv

        plain = [row_of(r) for r in merged.rows]
        if args.csv:
            args.csv.write_text(to_csv(plain), encoding="utf-8")
        if args.plot:
            from fedpref.reports.plots import plot_seed_curves

            plot_seed_curves(plain, args.plot, args.figure_format)


def _refuse_curves(args: argparse.Namespace, what: str) -> None:
    for flag, value in (("--csv", args.csv), ("--plot", args.plot), ("--across", args.across)):
        if value:
            raise FedprefError(f"{flag}: not for {what} (their numbers: --json; the figure: each run's win_rates.png)")


def _write_markdown(markdown: str, out: Path | None) -> None:
    sys.stdout.write(markdown)
    sys.stdout.flush()
    if out:
        out.write_text(markdown, encoding="utf-8")


def _holds_stage2_runs(dirs: list[Path]) -> bool:
    """Whether the runs in or below `dirs` are `fedpref stage2` runs (the first readable results' kind)."""
    from fedpref.results import STAGE2, ResultsError, load_results

    for folder in dirs:
        for path in sorted(folder.rglob(RESULTS_FILE)) if folder.is_dir() else []:
            try:
                return load_results(path.parent).kind == STAGE2
            except ResultsError:
                continue
    return False


def cmd_estimate(args: argparse.Namespace, console: Console) -> None:
    from fedpref.config import load_config
    from fedpref.experiments.estimate import estimate_json, estimate_run, estimate_tables
    from fedpref.experiments.orchestrator import check_config

    cfg = check_config(load_config(args.config, args.overrides + method_overrides(args.methods)), str(args.config)).cfg
    if args.probe_steps < 1:
        raise FedprefError("--probe-steps must be at least 1")
    estimate = estimate_run(cfg, lambda line: console.print(line, highlight=False), args.probe_steps)
    for table in estimate_tables(estimate):
        console.print(table)
    if args.out:
        args.out.write_text(json.dumps(estimate_json(estimate), indent=2), encoding="utf-8")
        console.print(f"wrote {args.out}")


def cmd_run(args: argparse.Namespace, console: Console) -> None:
    from fedpref.config import load_config
    from fedpref.experiments.experiment import execute
    from fedpref.experiments.orchestrator import check_config, open_run_dir
    from fedpref.stage2.config import is_stage2_config

    overrides = args.overrides + method_overrides(args.methods) + log_overrides(args.log)
    if args.seeds is not None:  # one run per seed, through `fedpref sweep`
        _sweep_seeds(args, overrides, args.engine, console)
        return
    if is_stage2_config(args.config):
        raise FedprefError(f"{args.config} is a Stage 2 config: run it with `fedpref stage2`")
    plan = check_config(load_config(args.config, overrides), str(args.config), args.engine)  # before any data loads
    run_dir = open_run_dir(args.out or Path("runs") / plan.cfg.name, args.overwrite, args.resume)
    execute(plan, run_dir, console, resume=args.resume, figure_format=args.figure_format)


# Old spellings that keep working: (command words) -> (new words), each printing a one-line notice.
ALIASES = {("data", "export"): ("export", "pairs"), ("stage2-summary",): ("summarize",)}
EXPORT_KINDS = ("model", "pairs", "-h", "--help")


def resolve_aliases(argv: list[str]) -> list[str]:
    """The arguments with a deprecated spelling replaced by the current one (a notice on stderr for each):
    `data export` -> `export pairs`, `stage2-summary` -> `summarize`, `export RUN ...` -> `export model RUN ...`."""
    for old, new in ALIASES.items():
        if tuple(argv[: len(old)]) == old:
            _notice(" ".join(old), " ".join(new))
            return [*new, *argv[len(old) :]]
    if argv[:1] == ["export"] and len(argv) > 1 and argv[1] not in EXPORT_KINDS:
        _notice("export RUN", "export model RUN")
        return ["export", "model", *argv[1:]]
    return argv


def _notice(old: str, new: str) -> None:
    Console(stderr=True).print(f"note: `fedpref {old}` is deprecated; use `fedpref {new}`", highlight=False)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    args = build_parser().parse_args(resolve_aliases(list(sys.argv[1:] if argv is None else argv)))
    console = Console() if sys.stdout.isatty() else Console(width=160)
    try:
        commands = {
            "run": cmd_run,
            "list": cmd_list,
            "estimate": cmd_estimate,
            "sweep": cmd_sweep,
            "summarize": cmd_summarize,
            "claims": cmd_claims,
            "data": cmd_data,
            "diagnose": cmd_diagnose,
            "personalize": cmd_personalize,
            "stage2": cmd_stage2,
            "export": cmd_export,
            "federation": cmd_federation,
        }
        commands[args.command](args, console)
    except FedprefError as e:
        # escaped: messages quote TOML ("in [train]", "['FL']"), which rich would take for markup and drop
        Console(stderr=True).print(f"[red]error:[/red] {escape(str(e))}", highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM during a sweep: no traceback, the shell's code for SIGINT
        Console(stderr=True).print("[red]interrupted[/red]", highlight=False)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
