"""Summaries of finished runs: per configuration, tables over seeds and paired differences, Markdown and CSV."""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fedpref.diagnostics.report import format_value
from fedpref.errors import FedprefError
from fedpref.models.variational_math import separation_over_rounds
from fedpref.reports.run_groups import NOT_CONFIGURATION, Group, Run, find_runs, group_runs, true_groups
from fedpref.reports.seed_stats import Estimate, estimate, paired_difference
from fedpref.results import RESULTS_FILE, MethodResult, RunResults


@dataclass
class Row:
    """One CSV row (and one Markdown table row) of the summary."""

    group: str
    # accuracy | ari | settled | bytes_down | bytes_up | s_per_round | client_s | server_s | transport_s
    # | peak_memory_mib | trainable_params | params_down | params_up | paired_difference | diagnostic:<quantity>
    # | across:<config key> | latent_silhouette (step: the round)
    kind: str
    method: str
    step: int | None
    unit: str  # what one value is: a seed's mean over clients, or one client (paired, one seed)
    est: Estimate
    seeds: list[int]


def accuracy_rows(group: Group) -> list[Row]:
    """Per method and personalization step: the runs' mean accuracy over clients, summarized over seeds."""
    rows = []
    for method in group.methods():
        runs = [r for r in group.runs if method in r.methods]
        curves = [r.methods[method].curves for r in runs]
        for i, step in enumerate(curves[0].steps):
            values = [c.acc_mean[i] for c in curves]
            rows.append(Row(group.label, "accuracy", method, step, "seed", estimate(values), [r.seed for r in runs]))
    return rows


def per_run_rows(group: Group, kind: str, value: Callable[[Run, str], float | None]) -> list[Row]:
    """Per method, `value(run, method)` summarized over the seeds where it is defined (ARI, settle round)."""
    rows = []
    for method in group.methods():
        pairs = [(r.seed, value(r, method)) for r in group.runs if method in r.methods]
        pairs = [(s, x) for s, x in pairs if x is not None]
        if pairs:
            est = estimate([x for _, x in pairs])
            rows.append(Row(group.label, kind, method, None, "seed", est, [s for s, _ in pairs]))
    return rows


def pair_rows(group: Group, a: str, b: str) -> list[Row]:
    """A - B per client and seed at each step (see `paired_difference`), over the seeds that have both (from one
    run or two); none when no seed has both."""
    return seed_pair_rows(group.label, "paired_difference", f"{a} - {b}", group.by_seed(a), group.by_seed(b))


def seed_pair_rows(
    label: str, kind: str, name: str, results_a: dict[int, MethodResult], results_b: dict[int, MethodResult]
) -> list[Row]:
    """A - B at each personalization step of A that B also has, over the seeds in both (seed -> method results)."""
    seeds = sorted(s for s in results_a if s in results_b)
    if not seeds:
        return []
    curves = [(results_a[s].curves, results_b[s].curves) for s in seeds]
    rows = []
    for i, step in enumerate(curves[0][0].steps):
        if step not in curves[0][1].steps:
            continue
        j = curves[0][1].steps.index(step)
        per_seed = [
            ({c: v[i] for c, v in ca.per_client.items()}, {c: v[j] for c, v in cb.per_client.items()})
            for ca, cb in curves
        ]
        est, unit = paired_difference(per_seed)
        rows.append(Row(label, kind, name, step, unit, est, seeds))
    return rows


# The FedGD paper's Tables 1-2 columns, as recorded by `fedpref diagnose` (key -> column title).
DIAGNOSTIC_COLUMNS = {
    "GQ_mean": "GQ(l)",
    "GQ_B": "GQ_B",
    "GQ_H": "GQ_H",
    "m0_R": "m0_R",
    "m0_W": "m0_W",
    "H+_R": "H+_R",
    "P10_R": "P10_R",
    "H+_W": "H+_W",
    "P10_W": "P10_W",
}


def communicated(key: str) -> Callable[[Run, str], float | None]:
    """A method's `communication[key]` in a run (bytes per client per round), None where it was not recorded."""

    def value(run: Run, method: str) -> float | None:
        carried = run.methods[method].communication
        return None if carried is None or key not in carried else float(carried[key])

    return value


def seconds_per_round(run: Run, method: str) -> float | None:
    """The global phase's wall time over its round records (timing.global_s / rounds); None without both."""
    result = run.methods[method]
    rounds = len((result.communication or {}).get("rounds", []))
    global_s = (result.timing or {}).get("global_s")
    return None if not rounds or global_s is None else float(global_s) / rounds


def cost(key: str, scale: float = 1.0) -> Callable[[Run, str], float | None]:
    """A method's `cost.<key>` in a run over `scale`, None where it was not recorded (older runs)."""

    def value(run: Run, method: str) -> float | None:
        found = getattr(run.methods[method].cost, key, None)
        return None if found is None else float(found) / scale

    return value


MIB = 2**20
# (row kind, column title, value, digits); the columns after `seeds` are the method's cost (MethodResult.cost)
EFFICIENCY = (
    ("bytes_down", "bytes down / client / round", communicated("bytes_down_per_client_round"), 0),
    ("bytes_up", "bytes up / client / round", communicated("bytes_up_per_client_round"), 0),
    ("s_per_round", "s / round", seconds_per_round, 3),
)
COST = (
    ("client_s", "client s / round", cost("client_s_per_round"), 3),
    ("server_s", "server s / round", cost("server_s_per_round"), 3),
    ("transport_s", "transport s / round", cost("transport_s_per_round"), 3),
    ("peak_memory_mib", "peak memory MiB", cost("peak_memory_bytes", MIB), 1),
    ("trainable_params", "trainable params", cost("trainable_params"), 0),
    ("params_down", "params down / client / round", cost("params_down_per_client_round"), 0),
    ("params_up", "params up / client / round", cost("params_up_per_client_round"), 0),
)


def efficiency_lines(group: Group) -> tuple[list[str], list[Row]]:
    """Per method: bytes down / up per client per round, seconds per round, its split into client, server and
    transport, peak memory and the parameter counts, each as the mean [95% t-interval] over seeds."""
    rows = {kind: per_run_rows(group, kind, value) for kind, _, value, _ in EFFICIENCY + COST}
    seeds: dict[str, int] = {}
    for r in (r for kind in rows for r in rows[kind]):
        seeds[r.method] = max(seeds.get(r.method, 0), r.est.n)
    methods = [m for m in group.methods() if m in seeds]
    if not methods:
        return [], []
    titles = [title for _, title, _, _ in EFFICIENCY] + ["seeds"] + [title for _, title, _, _ in COST]
    lines = ["", "Efficiency per method: mean over seeds [95% t-interval] (seeds).", ""]
    lines += ["| method | " + " | ".join(titles) + " |", "|---" * (len(titles) + 1) + "|"]
    for method in methods:
        found = {kind: next((r for r in rows[kind] if r.method == method), None) for kind in rows}
        cells = [efficiency_cell(found[kind], digits) for kind, _, _, digits in EFFICIENCY] + [str(seeds[method])]
        cells += [efficiency_cell(found[kind], digits, kind.startswith(COUNTS)) for kind, _, _, digits in COST]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += memory_kind_lines(group, methods)
    return lines, [r for kind in rows for r in rows[kind] if r.method in methods]


COUNTS = ("trainable_params", "params_")  # the same on every seed: shown without an interval when they are


def memory_kind_lines(group: Group, methods: list[str]) -> list[str]:
    """Which peak memory the column shows (fedpref.client.cost), for the methods that recorded one."""
    kinds = sorted(
        {k for run in group.runs for m in methods if m in run.methods and (k := kind_of(run.methods[m].cost))}
    )
    if not kinds:
        return []
    return ["", "Peak memory: " + ", ".join(f"{k} ({MEMORY_KINDS.get(k, k)})" for k in kinds) + "."]


MEMORY_KINDS = {
    "cuda_max_allocated": "torch.cuda.max_memory_allocated during a client's task, the largest of any round",
    "cpu_max_rss": "the process's peak RSS, a high-water mark since it started, not one step's",
}


def kind_of(cost: object) -> str | None:
    return getattr(cost, "peak_memory_kind", None)


def efficiency_cell(row: Row | None, digits: int, constant_plain: bool = False) -> str:
    """'mean [lo, hi]' ('mean' alone without an interval, or with `constant_plain` when every seed agrees)."""
    if row is None:
        return "–"
    ci = row.est.interval
    if constant_plain and len(set(row.est.values)) == 1:
        ci = None
    return fmt(row.est.mean, digits) + (f" [{fmt(ci[0], digits)}, {fmt(ci[1], digits)}]" if ci else "")


def diagnostic_rows(group: Group) -> list[Row]:
    """Per diagnostic quantity and method, the runs' client-averaged value summarized over seeds."""

    def quantity(key: str) -> Callable[[Run, str], float | None]:
        return lambda run, method: (run.methods[method].diagnostics or {}).get(key)

    return [row for key in DIAGNOSTIC_COLUMNS for row in per_run_rows(group, f"diagnostic:{key}", quantity(key))]


def diagnostic_markdown(rows: list[Row]) -> list[str]:
    """One line per method, the paper's columns, each cell `mean [95% CI]` over seeds (n in its own column)."""
    by_method: dict[str, dict[str, Row]] = {}
    for r in rows:
        by_method.setdefault(r.method, {})[r.kind.removeprefix("diagnostic:")] = r
    lines = [
        "| method | n | " + " | ".join(DIAGNOSTIC_COLUMNS.values()) + " |",
        "|---" * (len(DIAGNOSTIC_COLUMNS) + 2) + "|",
    ]
    for method, cells in by_method.items():
        n = max(r.est.n for r in cells.values())
        texts = [diagnostic_cell(cells.get(key)) for key in DIAGNOSTIC_COLUMNS]
        lines.append(f"| {method} | {n} | " + " | ".join(texts) + " |")
    return lines


def diagnostic_cell(row: Row | None) -> str:
    if row is None:
        return "–"
    ci = row.est.interval
    text = format_value(row.est.mean)
    return f"{text} [{format_value(ci[0])}, {format_value(ci[1])}]" if ci else text


def fmt(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def markdown_rows(rows: list[Row], digits: int = 2) -> list[str]:
    """| method | step | n | mean | std | 95% CI | values |"""
    lines = ["| method | step | n | mean | std | 95% CI | per seed |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        ci = r.est.interval
        ci_text = f"[{fmt(ci[0], digits)}, {fmt(ci[1], digits)}]" if ci else "–"
        values = ", ".join(fmt(v, digits) for v in r.est.values) if r.unit == "seed" else f"({r.est.n} clients)"
        step = "" if r.step is None else str(r.step)
        cells = [r.method, step, str(r.est.n), fmt(r.est.mean, digits), fmt(r.est.std, digits), ci_text, values]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def group_markdown(group: Group, pairs: Sequence[tuple[str, str]] = ()) -> tuple[list[str], list[Row]]:
    """The Markdown section of one group and the rows it shows."""
    seeds = ", ".join(str(s) for s in dict.fromkeys(sorted(r.seed for r in group.runs)))
    lines = [f"## {group.label}", "", f"{len(group.runs)} run(s), seeds {seeds}: "]
    lines[-1] += ", ".join(f"`{r.path}`" for r in group.runs)
    if group.left_out:
        lines += ["", "Left out, as a second copy of a result above: " + ", ".join(group.left_out)]
    acc = accuracy_rows(group)
    lines += ["", "Accuracy (%) per personalization step: mean over clients per seed; mean, sample std and 95% "]
    lines[-1] += "t-interval over seeds."
    lines += ["", *markdown_rows(acc)]
    rows = list(acc)
    if ari := per_run_rows(group, "ari", Run.ari):
        lines += ["", "Partition ARI against the true groups (FedGD's frozen groups, FedBiscuit's final selection):"]
        lines += ["", *markdown_rows(ari, digits=3)]
        rows += ari
    lines += partition_lines(group)
    if settled := per_run_rows(group, "settled", Run.settled):
        lines += ["", "Round from which the partition no longer changes (FedGD Phase 1, FedBiscuit's clustering):"]
        lines += ["", *markdown_rows(settled, digits=1)]
        rows += settled
    if diagnostics := diagnostic_rows(group):
        lines += ["", "Diagnostics (FedGD paper Tables 1-2; `fedpref diagnose`): mean over seeds [95% t-interval]:"]
        lines += ["", *diagnostic_markdown(diagnostics)]
        rows += diagnostics
    efficiency, shown = efficiency_lines(group)
    lines += efficiency
    rows += shown
    for pair in pairs:
        rows += pair_markdown(group, pair, lines)
    separation = separation_rows(group)
    lines += [
        "",
        *group_lines(group),
        *selector_lines(group),
        *separation_lines(separation),
        *client_interval_lines(group),
        *client_interval_lines(group, "unseen"),
    ]
    return lines, rows + separation


def partition_lines(group: Group) -> list[str]:
    """Per method and seed, the final partition by true group (FedGD paper, Fig. 4)."""
    lines = [
        f"- {method} (seed {run.seed}): {text}"
        for method in group.methods()
        for run in group.runs
        if method in run.methods and (text := run.partition(method))
    ]
    return ["", "Final partition, true groups per model (each seed):", "", *lines] if lines else []


def pair_markdown(group: Group, pair: tuple[str, str], lines: list[str]) -> list[Row]:
    rows = pair_rows(group, *pair)
    a, b = pair
    if not rows:
        lines += ["", f"No seed of this group has both {a} and {b}."]
        return rows
    unit = "one value per seed: the mean over clients of" if rows[0].unit == "seed" else "one value per client:"
    lines += ["", f"Paired difference {a} - {b} in accuracy points ({unit} A - B on the same client):", ""]
    lines += markdown_rows(rows)
    return rows


def group_lines(group: Group) -> list[str]:
    """Per true group, acc^0 -> acc^last of each method and seed."""
    lines = []
    for method in group.methods():
        for run in group.runs:
            result = run.methods.get(method)
            if result is not None and result.curves.by_group:
                text = ", ".join(f"{g} {v[0]:.0f}->{v[-1]:.0f}" for g, v in result.curves.by_group.items())
                lines.append(f"- {method} (seed {run.seed}): {text}")
    return ["Per group, acc^0 -> acc^last (each seed):", "", *lines] if lines else []


def client_groups(results: RunResults, config: dict) -> dict[str, tuple[str, str]]:
    """client -> (true group, 'seen' or 'unseen'), from any latent-conditioned method's evaluation, else (a
    synthetic run of baselines only, with held-out clients) from the client order and the held-out list."""
    for r in results.methods.values():
        if r.selector:
            sel = r.selector
            kinds = [k for k in ("seen", "unseen") if k in sel]
            return {c: (v["group"], k) for k in kinds for c, v in sel[k]["per_client"].items()}
    unseen = set((results.data or {}).get("unseen_clients", []))
    if config["data"].get("source", "synthetic") != "synthetic" or not unseen:  # not a latent-selector experiment
        return {}
    return {c: (g, "unseen" if c in unseen else "seen") for c, g in true_groups(config).items()}


def baseline_entry(result: MethodResult, group_of: dict[str, tuple[str, str]]) -> dict:
    """A monolithic baseline's acc^0 (its reward model, no z) in the selector table's shape."""
    acc0 = {c: curve[0] for c, curve in result.curves.per_client.items()}
    seen = [c for c in acc0 if group_of[c][1] == "seen"]
    unseen = [c for c in acc0 if group_of[c][1] == "unseen"]
    groups = sorted({group_of[c][0] for c in seen})
    by_group = {g: {"acc": statistics.fmean(acc0[c] for c in seen if group_of[c][0] == g)} for g in groups}
    entry = {"seen": {"acc_mean": statistics.fmean(acc0[c] for c in seen), "by_group": by_group}}
    if unseen:
        entry["unseen"] = {"acc_mean": statistics.fmean(acc0[c] for c in unseen)}
    return entry


def mean_std(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "–"
    est = estimate(present)
    return f"{est.mean:.2f} ± {fmt(est.std)}"


def selector_lines(group: Group) -> list[str]:
    """Mean ± sample std over seeds of the selector evaluation (FedVPA-GP paper, Tables 1-2), with the baselines'
    acc^0 in the same shape."""
    entries: dict[str, list[dict]] = {}
    for run in group.runs:
        for name, r in run.methods.items():
            if r.selector:
                entries.setdefault(name, []).append(r.selector)
            elif group_of := client_groups(run.results, run.config):
                entries.setdefault(name, []).append(baseline_entry(r, group_of))
    if not entries:
        return []
    groups = sorted({g for runs in entries.values() for s in runs for g in s["seen"]["by_group"]})
    header = ["method", "seeds", "acc"] + [f"{g} acc" for g in groups]
    header += ["silhouette", "probe acc", "KL to N(0,I)", "spread", "unseen acc"]
    lines = ["", "Selector (seen clients unless noted; mean ± std over seeds):", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, runs in entries.items():
        seen = [s["seen"] for s in runs]
        cells = [name, str(len(runs)), mean_std([s["acc_mean"] for s in seen])]
        cells += [mean_std([s["by_group"].get(g, {}).get("acc") for s in seen]) for g in groups]
        cells += [mean_std([s.get("separation", {}).get(k) for s in seen]) for k in ("silhouette", "probe_acc")]
        cells += [mean_std([s.get("collapse", {}).get(k) for s in seen]) for k in ("kl_standard_mean", "mean_spread")]
        cells.append(mean_std([s["unseen"]["acc_mean"] for s in runs if "unseen" in s]))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def separation_rows(group: Group) -> list[Row]:
    """Per latent-conditioned method and round, the silhouette by true type of the clients' latest uploaded means
    (`separation_over_rounds`), summarized over the seeds where it is defined."""
    by_round: dict[str, dict[int, list[tuple[int, float]]]] = {}
    for run in group.runs:
        for name, r in run.methods.items():
            trace = (r.selector or {}).get("latent_trace")
            if not trace:
                continue
            group_of = {c: v["group"] for c, v in r.selector["seen"]["per_client"].items()}
            for rnd, silhouette in separation_over_rounds(trace, group_of):
                if silhouette is not None:
                    by_round.setdefault(name, {}).setdefault(rnd, []).append((run.seed, silhouette))
    return [
        Row(group.label, "latent_silhouette", name, rnd, "seed", estimate([x for _, x in v]), [s for s, _ in v])
        for name, rounds in by_round.items()
        for rnd, v in sorted(rounds.items())
    ]


def separation_lines(rows: list[Row], shown: int = 10) -> list[str]:
    """A method per line, at most `shown` rounds evenly spaced (always the last); every round is in the CSV."""
    if not rows:
        return []
    rounds = sorted({r.step for r in rows})
    if len(rounds) > shown:
        rounds = [rounds[round(i * (len(rounds) - 1) / (shown - 1))] for i in range(shown)]
    cell = {(r.method, r.step): r for r in rows}
    lines = ["", "Latent separation over rounds (FedVPA-GP paper, Fig. 3): silhouette by true type of every client's "]
    lines[-1] += "latest uploaded mean after round r (0-based, as in rounds.jsonl); mean ± std over seeds (n):"
    header = ["method", *(f"r={r}" for r in rounds)]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for method in dict.fromkeys(r.method for r in rows):
        cells = [method]
        for rnd in rounds:
            row = cell.get((method, rnd))
            cells.append(f"{row.est.mean:.2f} ± {fmt(row.est.std)} ({row.est.n})" if row else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def client_accuracies(
    result: MethodResult, group_of: dict[str, tuple[str, str]], kind: str
) -> dict[str, tuple[str, float]]:
    """client -> (true group, accuracy) of one method on the `kind` ('seen' or 'unseen') clients: the selector's
    with z, or a monolithic baseline's acc^0."""
    if result.selector:
        per_client = result.selector.get(kind, {}).get("per_client", {})
        return {c: (v["group"], v["acc"]) for c, v in per_client.items()}
    curves = result.curves.per_client
    return {c: (group_of[c][0], curves[c][0]) for c in curves if group_of.get(c, ("", ""))[1] == kind}


def client_interval_lines(group: Group, kind: str = "seen") -> list[str]:
    """Per method and true type: the mean accuracy over every (seed, client) of that type and its 95% t-interval
    over those clients (the selector with z; the baselines' acc^0)."""
    by_method: dict[str, dict[str, list[float]]] = {}
    for run in group.runs:
        group_of = client_groups(run.results, run.config)
        if not group_of:
            return []
        for name, r in run.methods.items():
            for g, acc in client_accuracies(r, group_of, kind).values():
                by_method.setdefault(name, {}).setdefault(g, []).append(acc)
    types = sorted({g for accs in by_method.values() for g in accs})
    if not types:
        return []
    header = ["method", *(f"{g} acc [95% CI over clients] (n)" for g in types)]
    lines = ["", f"Per type, {kind} clients of every seed (95% t-interval over the clients):", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, accs in by_method.items():
        cells = [name, *(interval_cell(accs.get(g, [])) for g in types)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def interval_cell(values: list[float]) -> str:
    """'mean [lo, hi] (n)'; one value: 'mean (1)'; none: '–'."""
    if not values:
        return "–"
    est = estimate(values)
    ci = f" [{est.interval[0]:.2f}, {est.interval[1]:.2f}]" if est.interval else ""
    return f"{est.mean:.2f}{ci} ({est.n})"


CSV_COLUMNS = ["group", "kind", "method", "step", "unit", "n", "mean", "std", "ci_low", "ci_high", "seeds", "values"]


def to_csv(rows: list[Row]) -> str:
    """One line per summary row; `values` are the per-seed (or, paired with one seed, per-client) values."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        ci = r.est.interval or (None, None)
        numbers = [r.est.mean, r.est.std, *ci]
        writer.writerow(
            [r.group, r.kind, r.method, "" if r.step is None else r.step, r.unit, r.est.n]
            + ["" if x is None else round(x, 4) for x in numbers]
            + [";".join(map(str, r.seeds)), ";".join(str(round(v, 4)) for v in r.est.values)]
        )
    return out.getvalue()


SUMMARY_JSON_FORMAT = "fedpref-summary/1"


def row_record(r: Row) -> dict:
    """One summary row as a JSON object, the CSV's columns (`seeds` and `values` as lists; no CI: null)."""
    ci = r.est.interval or (None, None)
    return {
        "group": r.group, "kind": r.kind, "method": r.method, "step": r.step, "unit": r.unit, "n": r.est.n,
        "mean": r.est.mean, "std": r.est.std, "ci_low": ci[0], "ci_high": ci[1],
        "seeds": list(r.seeds), "values": list(r.est.values),
    }  # fmt: skip


def row_of(record: dict) -> Row:
    """A JSON row (`row_record`) as a Row again, e.g. for `plot_seed_curves` of merged summaries."""
    half = None if record["ci_low"] is None else (record["ci_high"] - record["ci_low"]) / 2
    est = Estimate(record["n"], record["mean"], record["std"], half, tuple(record["values"]))
    return Row(record["group"], record["kind"], record["method"], record["step"], record["unit"], est, record["seeds"])


def to_json(rows: list[Row], configurations: dict[str, dict] | None = None) -> str:
    """The summary's rows as JSON (`fedpref summarize --json`), what `fedpref claims` reads; with each group's
    settings, so that summaries of other seeds can be merged with it safely (`reports.merge`)."""
    header = {} if configurations is None else {"configurations": configurations}
    return json_document([row_record(r) for r in rows], **header)


def json_document(records: list[dict], **header: object) -> str:
    """{"format": ..., **header, "rows": [...]}, one row a line."""
    head = json.dumps({"format": SUMMARY_JSON_FORMAT, **header}, default=str)[:-1]
    return head + ', "rows": [\n' + ",\n".join(json.dumps(r) for r in records) + "\n]}\n"


def parse_across(text: str) -> tuple[str, str | None]:
    """`--across KEY` or `--across KEY=REF` as (KEY, REF or None)."""
    key, sep, ref = (part.strip() for part in text.partition("="))
    ref = ref.strip("'\"")
    if not key or (sep and not ref):
        raise FedprefError(
            f"--across {text}: expected a config key and optionally its reference value, e.g. "
            "--across algorithm.num_models=4"
        )
    if key in NOT_CONFIGURATION:
        raise FedprefError(f"--across {key}: runs that differ only in {key} are one configuration already")
    return key, ref if sep else None


def value_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def is_value(value: object, text: str) -> bool:
    """Whether a config value is the one written as `text` on the command line (1e-3 is 0.001)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    return value_text(value) == text


def families(groups: Sequence[Group], key: str) -> list[list[Group]]:
    """Configurations that differ only in `key`, each family ordered by its values (numbers first, then text)."""
    found: dict[str, list[Group]] = {}
    for group in groups:
        if key in group.settings:
            rest = {k: v for k, v in group.settings.items() if k != key}
            found.setdefault(json.dumps(rest, sort_keys=True, default=str), []).append(group)
    order = [
        sorted(family, key=lambda g: (isinstance(g.settings[key], str), g.settings[key])) for family in found.values()
    ]
    return [family for family in order if len(family) > 1]


def across_markdown(groups: Sequence[Group], key: str, ref: str | None) -> tuple[list[str], list[Row]]:
    """Per family of configurations differing only in `key`: each method's last-step accuracy per value, and the
    paired difference (same method, same seeds and clients) of each value against the reference value (the first
    value unless `ref` names one)."""
    lines, rows = [], []
    found = families(groups, key)
    if not found:
        raise FedprefError(f"--across {key}: no two configurations of these runs differ only in {key}")
    for family in found:
        reference = family[0] if ref is None else next((g for g in family if is_value(g.settings[key], ref)), None)
        if reference is not None:
            section, shown = across_family(family, key, reference)
            lines += section
            rows += shown
    if not rows and not lines:
        values = sorted({value_text(g.settings[key]) for family in found for g in family})
        raise FedprefError(f"--across {key}={ref}: no configuration has {key} = {ref} (values: {', '.join(values)})")
    return lines, rows


def across_family(family: list[Group], key: str, reference: Group) -> tuple[list[str], list[Row]]:
    label = ", ".join(p for p in reference.label.split(", ") if not p.startswith(f"{key}="))
    names = {id(g): f"{key}={value_text(g.settings[key])}" for g in family}
    lines = [f"## Across {key}: {label}", "", "Accuracy (%) at the last personalization step, mean over seeds "]
    lines[-1] += "[95% t-interval] (number of seeds):"
    lines += ["", "| method | " + " | ".join(names.values()) + " |", "|---" * (len(family) + 1) + "|"]
    rows = []
    for method in reference.methods():
        lines.append(f"| {method} | " + " | ".join(last_step_cell(g, method) for g in family) + " |")
        for group in family:
            if group is not reference:
                name = f"{method}: {names[id(group)]} - {names[id(reference)]}"
                rows += seed_pair_rows(label, f"across:{key}", name, group.by_seed(method), reference.by_seed(method))
    lines += ["", f"Paired difference against {names[id(reference)]} in accuracy points (same method, seeds and "]
    lines[-1] += "clients; one value per seed: the mean over clients):"
    lines += ["", *markdown_rows(rows)] if rows else ["", "No seed is in both configurations."]
    return [*lines, ""], rows


def last_step_cell(group: Group, method: str) -> str:
    """'mean [lo, hi] (n) at acc^step' of the method's mean accuracy over clients, over seeds; '–' if absent."""
    curves = [r.curves for r in group.by_seed(method).values()]
    if not curves:
        return "–"
    return f"{interval_cell([c.acc_mean[-1] for c in curves])} at step {curves[0].steps[-1]}"


def parse_pairs(texts: Sequence[str] | None) -> list[tuple[str, str]]:
    """Each `--pair A,B` as (A, B)."""
    return [parse_pair(text) for text in texts or ()]


def parse_pair(text: str) -> tuple[str, str]:
    names = [n.strip() for n in text.split(",")]
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise FedprefError(f"--pair {text}: expected two different method names, e.g. --pair FedGD,FL")
    return names[0], names[1]


def configurations(paths: Sequence[Path]) -> dict[str, dict]:
    """Group label -> its settings (the flattened config without `NOT_CONFIGURATION`), grouped as `summarize`
    groups the finished runs in or below `paths`."""
    return {g.label: g.settings for g in group_runs([r for r in find_runs(paths) if r.finished])}


def summarize(
    paths: Sequence[Path], pairs: Sequence[tuple[str, str]] = (), across: Sequence[tuple[str, str | None]] = ()
) -> tuple[str, list[Row]]:
    """(Markdown, rows) for the finished runs in or below `paths`, one section per configuration; a paired
    difference for each (A, B) in `pairs`, and for each (key, reference value) in `across` between configurations
    that differ only in that key."""
    runs = find_runs(paths)
    finished = [r for r in runs if r.finished]
    if not finished:
        raise FedprefError(f"no finished run ({RESULTS_FILE} with status finished) in " + ", ".join(map(str, paths)))
    known = {m for r in finished for m in r.methods}
    for pair in pairs:
        if missing := [m for m in pair if m not in known]:
            raise FedprefError(f"--pair: no method {', '.join(missing)} in these runs ({', '.join(sorted(known))})")
    lines, rows = ["# Summary of runs", ""], []
    if unfinished := [r for r in runs if not r.finished]:
        lines += [f"Left out {len(unfinished)} unfinished run(s): " + ", ".join(f"`{r.path}`" for r in unfinished), ""]
    groups = group_runs(finished)
    for group in groups:
        section, shown = group_markdown(group, pairs)
        lines += [*section, ""]
        rows += shown
    for key, ref in across:
        section, shown = across_markdown(groups, key, ref)
        lines += section
        rows += shown
    return "\n".join(lines).rstrip() + "\n", rows
