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
    run.add_argument("config", type=Path, help="experiment TOML file (see configs/)")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set federation.rounds=10 (repeatable)",
    )
    run.add_argument("--out", type=Path, default=None, help="output folder (default: runs/<name>)")
    run.add_argument("--overwrite", action="store_true", help="replace an existing, non-empty output folder")
    run.add_argument(
        "--engine",
        choices=("inprocess", "flower"),
        default="inprocess",
        help="inprocess: all clients in this process (default); flower: Flower's Simulation Engine (docs/flower.md)",
    )
    run.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its last complete checkpoint"
    )
    run.add_argument(
        "--figure-format",
        choices=FIGURE_FORMATS,
        default="png",
        help="file format of the run's figures (default: png; pdf or svg for vector figures in a paper)",
    )
    _add_log_argument(run)
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
    again.add_argument("--out", type=Path, required=True, help="the new run folder")
    again.add_argument("--overwrite", action="store_true", help="replace a non-empty --out")
    _add_methods_and_settings(
        again,
        "only this method (repeatable; default: every method of the run)",
        "other personalization settings, e.g. --set personalization.lr=1e-5 (only personalization.*)",
    )
    again.add_argument("--figure-format", choices=FIGURE_FORMATS, default="png", help="file format of the figures")
    data = sub.add_parser("data", help="inspect or export an experiment's preference data")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    stats = data_sub.add_parser("stats", help="clients, pairs per client and split sizes, before a long run")
    stats.add_argument("config", type=Path)
    stats.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    export = data_sub.add_parser("export", help="write the experiment's pairs as JSON lines (fedpref's format)")
    export.add_argument("config", type=Path)
    export.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    export.add_argument("--out", type=Path, required=True, help="output .jsonl file")
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
    _add_export_parser(sub)
    _add_federation_parser(sub)
    return parser


def _add_list_parser(sub) -> None:
    """`fedpref list configs|methods`: what there is to run."""
    ls = sub.add_parser(
        "list",
        help="list the shipped configs or the implemented methods",
        description="`configs`: every TOML file under --dir (default: ./configs, else the configs folder beside "
        "the installed package), with its first header line. `methods`: every method of the registry, with its "
        "one-line help and flags.",
    )
    ls.add_argument("what", choices=("configs", "methods"))
    ls.add_argument("--dir", type=Path, default=None, help="the configs folder (default: ./configs)")


def config_folder(given: Path | None) -> Path:
    """The folder `fedpref list configs` reads: --dir, else ./configs, else the checkout's configs/."""
    if given is not None:
        candidates = [given]
    else:
        candidates = [Path("configs"), Path(__file__).resolve().parents[2] / "configs"]
    for folder in candidates:
        if folder.is_dir():
            return folder
    raise FedprefError(f"no configs folder: {', '.join(map(str, candidates))} (pass --dir)")


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
        from fedpref.algorithms.registry import help_rows

        table.add_column("method")
        table.add_column("what it is")
        for name, help_ in help_rows():
            if not name.startswith(" "):  # the methods' own options are in `fedpref run --help`
                table.add_row(name, help_)
    else:
        folder = config_folder(args.dir)
        table.add_column("config")
        table.add_column("what it is")
        for path in sorted(folder.rglob("*.toml")):
            table.add_row(str(path.relative_to(folder)), config_description(path))
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
    est.add_argument("config", type=Path, help="experiment TOML file (see configs/)")
    est.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
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
    fed.add_argument("--out", type=Path, required=True, help="the run folder")
    fed.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    fed.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for every method's results")
    fed.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its last complete checkpoint (e.g. after the SuperLink was killed)",
    )


def cmd_federation(args: argparse.Namespace, console: Console) -> None:
    from fedpref.algorithms.registry import check_methods
    from fedpref.config import load_config
    from fedpref.experiments import plots, tables
    from fedpref.experiments.experiment import pools_raw_data
    from fedpref.experiments.federation import run_federation
    from fedpref.results import RunResults

    cfg = load_config(args.config, args.overrides)
    check_methods(cfg, str(args.config))
    methods = [name for name in cfg.algorithm.methods if not pools_raw_data(name)]
    if skipped := [name for name in cfg.algorithm.methods if pools_raw_data(name)]:
        console.print(f"skipping {', '.join(skipped)}: they pool raw data (centralized references)")
    if not methods:
        raise FedprefError(f"{args.config}: no federated method to run")
    if args.resume and not (args.out / "checkpoints").is_dir():
        raise FedprefError(f"{args.out}: nothing to resume (no checkpoints folder)")
    if not args.resume and ((args.out / "checkpoints").exists() or (args.out / "nodes").exists()):
        raise FedprefError(f"{args.out} holds a federation's run: continue it with --resume, or choose another --out")
    results = run_federation(
        args.config, args.clients_dir, args.out, methods, args.overrides, args.timeout, console.print, args.resume
    )
    typed = RunResults.from_dict(results)
    (args.out / "table.md").write_text(tables.results_markdown(typed.methods), encoding="utf-8")
    plots.plot_group_curves(typed.methods, args.out / "personalization.png")
    console.print(f"wrote {args.out}")


def _add_methods_and_settings(parser: argparse.ArgumentParser, methods_help: str, settings_help: str) -> None:
    """--method NAME (repeatable) and --set KEY=VALUE, for commands that work on a finished run."""
    parser.add_argument("--method", dest="methods", action="append", default=[], metavar="NAME", help=methods_help)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=settings_help)


def _add_export_parser(sub) -> None:
    """`fedpref export RUN --method M --client C --out DIR`: one client's personalized model for Hugging Face."""
    export = sub.add_parser(
        "export",
        help="write a client's personalized reward model as a PEFT folder plus its head (docs/formats.md)",
        description="Replay the client's personalization of the method exactly as the run did (its config and "
        "RUN/models/<method>.pt), then write DIR as a PEFT save_pretrained folder (PeftModel.from_pretrained), "
        "the tokenizer, the reward head (reward_head.safetensors) and fedpref_reward.json (how to score).",
    )
    export.add_argument("run_dir", type=Path, help="a finished run folder")
    export.add_argument("--method", required=True, help="the method whose initialization the client starts from")
    export.add_argument("--client", required=True, help="the client id")
    export.add_argument("--out", type=Path, required=True, help="output folder (new or empty)")
    export.add_argument("--merged", action="store_true", help="also write DIR/merged: the backbone with LoRA merged")


def cmd_export(args: argparse.Namespace, console: Console) -> None:
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
        "OUT/sweep.json lists the cells and their status. Every cell's config is validated before any run.",
    )
    sweep.add_argument("config", type=Path, help="experiment TOML file (see configs/)")
    sweep.add_argument("--seeds", default=None, help="comma-separated seeds, e.g. 0,1,2 (default: the config's seed)")
    sweep.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="sweep a config key over scalar values, parsed like --set values (repeatable: the product is run)",
    )
    sweep.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    sweep.add_argument("--out", type=Path, required=True, help="the sweep folder")
    sweep.add_argument("--engine", choices=("inprocess", "flower"), default="inprocess")
    _add_log_argument(sweep)


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
        "with their paired differences. Markdown on stdout.",
    )
    summarize.add_argument("dirs", type=Path, nargs="+", metavar="DIR")
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
    stage2.add_argument("config", type=Path, help="stage 2 TOML file, e.g. configs/stage2/stories.toml")
    stage2.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    stage2.add_argument("--out", type=Path, default=None, help="output folder (default: runs/<name>)")
    stage2.add_argument("--overwrite", action="store_true", help="replace an existing, non-empty output folder")
    stage2.add_argument(
        "--seeds",
        default=None,
        help="comma-separated seeds, each run into OUT/seed=<seed>/; a seed whose folder holds a finished "
        f"{RESULTS_FILE} is skipped, an unfinished one started again (default: the config's seed, into OUT)",
    )
    summary = sub.add_parser(
        "stage2-summary",
        help="win rates of finished `fedpref stage2` runs over seeds, per Stage 1 method, with 95%% t-intervals",
        description="Read the `fedpref stage2` folders in or below DIR: per Stage 1 method and policy (conditional "
        "DPO, FedDPO) each type's win rate and the worse-served type's, mean, std and 95%% Student-t interval over "
        "seeds; the Stage 1 selector's accuracy with z and from its base logits; per --pair, the paired difference "
        "of the two methods' conditional policies, one value per seed. Markdown on stdout.",
    )
    summary.add_argument("dirs", type=Path, nargs="+", metavar="DIR")
    summary.add_argument("--judge", default="oracle", help="whose verdicts: oracle, selector or chat (default oracle)")
    summary.add_argument(
        "--pair", action="append", default=None, metavar="A,B", help="Stage 1 methods to compare, e.g. FedVPA-GP,FedVPL"
    )
    summary.add_argument("--out", type=Path, default=None, help="also write the Markdown to this file")


def cmd_stage2(args: argparse.Namespace, console: Console) -> None:
    from fedpref.experiments.sweep import parse_seeds
    from fedpref.stage2.config import load_stage2_config

    cfg = load_stage2_config(args.config, args.overrides)
    out = args.out or Path("runs") / cfg.name
    if args.seeds is None:
        _run_stage2(cfg, out, args.overwrite, console)
        return
    seeds = parse_seeds(args.seeds)
    configs = [load_stage2_config(args.config, [*args.overrides, f"seed={seed}"]) for seed in seeds]
    for i, (seed, seed_cfg) in enumerate(zip(seeds, configs), start=1):
        run_dir = out / f"seed={seed}"
        if _stage2_finished(run_dir) and not args.overwrite:
            console.print(f"seed {seed} ({i} of {len(seeds)}): finished in {run_dir}, skipped", highlight=False)
            continue
        console.print(f"seed {seed} ({i} of {len(seeds)}) -> {run_dir}", highlight=False)
        _run_stage2(seed_cfg, run_dir, True, console)  # stage 2 has no --resume: an unfinished seed starts again


def _stage2_finished(run_dir: Path) -> bool:
    """Its results say finished (a Stage 2 run from before the schema wrote its file only at its end)."""
    from fedpref.results import ResultsError, has_results, load_results

    try:
        return has_results(run_dir) and load_results(run_dir).finished
    except ResultsError:
        return False


def _run_stage2(cfg, run_dir: Path, overwrite: bool, console: Console) -> None:
    from fedpref.experiments.outputs import prepare_run_dir
    from fedpref.results import ResultsWriter
    from fedpref.stage2.pipeline import run_pipeline

    prepare_run_dir(run_dir, overwrite, resumable=False)  # stage 2 has no --resume
    try:
        run_pipeline(cfg, run_dir, log=lambda line: console.print(line, highlight=False))
    except BaseException as e:  # the pipeline writes its results from the start: they must not stay 'running'
        ResultsWriter(run_dir).fail_existing(e)
        raise
    console.print((run_dir / "table.md").read_text(encoding="utf-8"), highlight=False)


def cmd_stage2_summary(args: argparse.Namespace, console: Console) -> None:
    from fedpref.experiments.summary import parse_pairs
    from fedpref.stage2.seed_summary import summarize_stage2

    markdown = summarize_stage2(args.dirs, args.judge, parse_pairs(args.pair))
    sys.stdout.write(markdown)
    sys.stdout.flush()
    if args.out:
        args.out.write_text(markdown, encoding="utf-8")


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
    from fedpref.data.pairs import write_jsonl
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
    if args.data_command == "export":
        write_jsonl(pairs, args.out)
        console.print(f"wrote {len(pairs)} pairs to {args.out}")
        return
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
    from fedpref.algorithms.registry import check_methods
    from fedpref.experiments.sweep import parse_grid, parse_seeds, plan_cells, run_sweep, sigterm_as_interrupt

    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    grid = parse_grid(args.grid)
    args.overrides = args.overrides + log_overrides(args.log)
    cells = plan_cells(args.config, seeds, grid, args.overrides, args.out)
    for cell in cells:  # a typo in a method name stops the sweep before its first run
        check_methods(cell.cfg, f"sweep cell {cell.label}: {args.config}")
    spec = {"config": str(args.config), "seeds": seeds, "grid": grid, "overrides": args.overrides}
    with sigterm_as_interrupt():
        run_sweep(cells, args.out, console, spec | {"engine": args.engine}, engine=args.engine)


def cmd_summarize(args: argparse.Namespace, console: Console) -> None:
    from fedpref.experiments.summary import parse_across, parse_pairs, summarize, to_csv

    across = [parse_across(text) for text in args.across or ()]
    markdown, rows = summarize(args.dirs, parse_pairs(args.pair), across)
    sys.stdout.write(markdown)
    sys.stdout.flush()
    if args.out:
        args.out.write_text(markdown, encoding="utf-8")
    if args.csv:
        args.csv.write_text(to_csv(rows), encoding="utf-8")
    if args.plot:
        from fedpref.experiments.plots import plot_seed_curves

        plot_seed_curves(rows, args.plot, args.figure_format)


def cmd_estimate(args: argparse.Namespace, console: Console) -> None:
    from fedpref.algorithms.registry import check_methods
    from fedpref.config import load_config
    from fedpref.experiments.estimate import estimate_json, estimate_run, estimate_tables
    from fedpref.models.factory import check_model_config

    cfg = load_config(args.config, args.overrides)
    check_methods(cfg, str(args.config))
    check_model_config(cfg)
    if args.probe_steps < 1:
        raise FedprefError("--probe-steps must be at least 1")
    estimate = estimate_run(cfg, lambda line: console.print(line, highlight=False), args.probe_steps)
    for table in estimate_tables(estimate):
        console.print(table)
    if args.out:
        args.out.write_text(json.dumps(estimate_json(estimate), indent=2), encoding="utf-8")
        console.print(f"wrote {args.out}")


def cmd_run(args: argparse.Namespace, console: Console) -> None:
    from fedpref.algorithms.registry import check_methods
    from fedpref.config import load_config
    from fedpref.experiments.experiment import run_experiment
    from fedpref.experiments.outputs import prepare_run_dir
    from fedpref.models.factory import check_model_config

    cfg = load_config(args.config, args.overrides + log_overrides(args.log))
    check_methods(cfg, str(args.config))  # before any data or model loads
    check_model_config(cfg)  # device and head, before the run folder is made
    if args.resume and args.overwrite:
        raise FedprefError("--resume and --overwrite exclude each other")
    run_dir = args.out or Path("runs") / cfg.name
    if not args.resume:
        prepare_run_dir(run_dir, args.overwrite)
    elif not (run_dir / "config.toml").is_file():
        raise FedprefError(f"{run_dir}: nothing to resume (no config.toml)")
    run_experiment(cfg, run_dir, console, resume=args.resume, engine=args.engine, figure_format=args.figure_format)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    args = build_parser().parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=160)
    try:
        commands = {
            "run": cmd_run,
            "list": cmd_list,
            "estimate": cmd_estimate,
            "sweep": cmd_sweep,
            "summarize": cmd_summarize,
            "data": cmd_data,
            "diagnose": cmd_diagnose,
            "personalize": cmd_personalize,
            "stage2": cmd_stage2,
            "stage2-summary": cmd_stage2_summary,
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
