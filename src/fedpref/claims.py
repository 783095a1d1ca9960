"""The papers' claims as data, and the fixed rules that decide each verdict from `fedpref summarize --json` files."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from fedpref.errors import FedprefError
from fedpref.reports.seed_stats import estimate

HOLDS, MIXED, DOES_NOT_HOLD = "holds", "mixed", "does not hold"
INDICATIVE, NOT_RUN, NO_SUMMARY = "indicative (1 seed)", "not run", "no summary"
VERDICTS = (HOLDS, MIXED, DOES_NOT_HOLD, INDICATIVE, NOT_RUN, NO_SUMMARY)

# How far apart two numbers may be and still count as "near" / "no worse", stated once per kind of quantity.
TOLERANCE = {"points": 2.0, "ari": 0.05, "silhouette": 0.05}  # ARI and silhouette: scores in [-1, 1]
UNIT_NAMES = {"points": "accuracy points", "ari": "ARI", "silhouette": "silhouette"}
PAIRED_KINDS = ("latent_silhouette",)  # per-seed kinds whose "A - B" is paired here, over the seeds A and B share
RULES = ("greater", "less", "near", "at_least")

# The rules, as the results page states them (`rule_lines`); `decide` implements exactly these.
RULE_TEXT = {
    "greater": "the quantity is above the reference (0 for a difference A - B, a number the paper states, or "
    "another method's row): **holds** if its 95% interval lies wholly above (above the other row's interval), "
    "**does not hold** if its mean is at or below, **mixed** otherwise",
    "less": "the mirror image of *greater*: **holds** if the interval lies wholly below, **does not hold** if the "
    "mean is at or above, **mixed** otherwise",
    "near": 'the quantity is near a value (0 for "A equals B"): **holds** if its interval lies within the value '
    "± the tolerance, **does not hold** if its mean is farther than the tolerance, **mixed** otherwise",
    "at_least": 'the quantity is no worse than a value ("A ≥ B": 0): **holds** if its interval\'s lower end is '
    "above the value minus the tolerance, **does not hold** if its mean is below it, **mixed** otherwise",
}


@dataclass(frozen=True)
class Quantity:
    """One number of a summary: the row (kind, method, step) of a group in a summary file; with `from_step`, the
    per-seed change of an accuracy from `from_step` to `step` (over the seeds of both rows)."""

    summary: str  # the summary file's name without .json, e.g. reproduce_rung2b
    group: str
    method: str
    step: int | None = None
    kind: str = ""  # default: paired_difference for "A - B", else accuracy; "A - B" of a PAIRED_KINDS kind: paired here
    from_step: int | None = None
    policy: str = ""  # Stage 2 rows: the policy (conditional DPO, FedDPO) or the selector's inputs
    context: str = ""  # Stage 2 rows: the type (G1, G2, 'worse type')

    @property
    def row_kind(self) -> str:
        return self.kind or ("paired_difference" if " - " in self.method else "accuracy")

    @property
    def unit(self) -> str:
        return {"ari": "ari", "latent_silhouette": "silhouette"}.get(self.row_kind, "points")

    def label(self) -> str:
        name = self.method if self.row_kind in ("accuracy", "paired_difference") else f"{self.row_kind} {self.method}"
        judge = self.group if self.policy and self.group.startswith("judge ") else ""  # Stage 2 rows: whose verdicts
        if self.policy or self.context:
            name += f" ({', '.join(x for x in (self.policy, self.context, judge) if x)})"
        if self.from_step is not None:
            return f"{name} acc^{self.step} - acc^{self.from_step}"
        if self.step is None:
            return name
        return (
            f"{name} after round {self.step}" if self.row_kind == "latent_silhouette" else f"{name} at acc^{self.step}"
        )


@dataclass(frozen=True)
class Check:
    """A rule applied to a quantity: against `value` (a threshold or target) or against another row `than`."""

    rule: str
    quantity: Quantity
    value: float = 0.0
    than: Quantity | None = None


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str  # FedGD | FedVPA-GP
    source: str  # the paper's table or figure
    statement: str  # the claim in a short line
    paper_number: str
    command: str  # the make target or command that measures ours
    sentence: str = ""  # the paper's own words ("" where only a table or figure makes the claim)
    checks: tuple[Check, ...] = ()
    llm_checks: tuple[Check, ...] = ()  # the same rules on the SmolLM2-135M-Instruct runs' summaries (LLM below)
    status: str = ""  # NOT_RUN or NO_SUMMARY for a claim without checks
    note: str = ""  # why there is no check, or what the checks leave out
    headline: bool = False
    old_verdict: str = ""  # the hand-typed verdict of the research notes, kept to list where the rule differs


@dataclass(frozen=True)
class Reading:
    """A measured quantity: mean, 95% interval (None with one seed) and the number of seeds."""

    mean: float
    low: float | None
    high: float | None
    seeds: int

    def text(self) -> str:
        ci = "" if self.low is None or self.high is None else f" [{self.low:.2f}, {self.high:.2f}]"
        return f"{self.mean:.2f}{ci} ({self.seeds} seed{'s' if self.seeds != 1 else ''})"


@dataclass
class Outcome:
    """One check's reading(s) and verdict."""

    check: Check
    reading: Reading | None
    reference: Reading | None = None
    verdict: str = NO_SUMMARY


@dataclass
class Decision:
    claim: Claim
    verdict: str
    outcomes: list[Outcome] = field(default_factory=list)
    llm_verdict: str = ""  # "" where the claim has no llm_checks (or the summaries are a user's own)
    llm_outcomes: list[Outcome] = field(default_factory=list)


LLM = "SmolLM2-135M-Instruct"  # the pretrained LLM of the llm_checks: a 4-bit quantized 135M model


# ---------------------------------------------------------------------------------------------------- the rules


def decide(rule: str, x: Reading, value: float = 0.0, tolerance: float = 0.0, than: Reading | None = None) -> str:
    """The verdict of one rule on a reading (see RULE_TEXT); one seed, here or in `than`: indicative."""
    if rule not in RULES:
        raise FedprefError(f"unknown rule {rule!r} (one of {', '.join(RULES)})")
    if x.seeds < 2 or x.low is None or x.high is None or (than is not None and (than.seeds < 2 or than.low is None)):
        return INDICATIVE
    if rule in ("greater", "less"):
        sign = 1.0 if rule == "greater" else -1.0
        if than is None:
            edge, centre = value, value
        else:  # the other row's interval edge that faces ours
            edge = than.high if rule == "greater" else than.low
            centre = than.mean
        near_end = x.low if rule == "greater" else x.high
        if sign * (near_end - edge) > 0:
            return HOLDS
        return DOES_NOT_HOLD if sign * (x.mean - centre) <= 0 else MIXED
    if than is not None:
        raise FedprefError(f"rule {rule} compares with a value, not with another row")
    if rule == "near":
        if value - tolerance <= x.low and x.high <= value + tolerance:
            return HOLDS
        return DOES_NOT_HOLD if abs(x.mean - value) > tolerance else MIXED
    if x.low >= value - tolerance:  # at_least
        return HOLDS
    return DOES_NOT_HOLD if x.mean < value - tolerance else MIXED


def combine(verdicts: Sequence[str]) -> str:
    """A claim's verdict from its checks': the common one if all agree; else indicative if any is; else mixed.
    Checks without a summary number are left out; none left: no summary."""
    found = [v for v in verdicts if v != NO_SUMMARY]
    if not found:
        return NO_SUMMARY
    if len(set(found)) == 1:
        return found[0]
    return INDICATIVE if INDICATIVE in found else MIXED


# ------------------------------------------------------------------------------------------ claims and summaries


def quantity(entry: dict, defaults: dict) -> Quantity:
    known = {"summary", "group", "method", "step", "kind", "from_step", "policy", "context"}
    if extra := set(entry) - known:
        raise FedprefError(f"claims: unknown quantity key(s) {', '.join(sorted(extra))}")
    return Quantity(**({k: defaults[k] for k in ("summary", "group") if k in defaults} | entry))


def parse_checks(entries: list[dict], defaults: dict) -> tuple[Check, ...]:
    checks = []
    for c in entries:
        c = dict(c)
        rule, value, than = c.pop("rule"), float(c.pop("value", 0.0)), c.pop("than", None)
        checks.append(Check(rule, quantity(c, defaults), value, quantity(than, defaults) if than else None))
    return tuple(checks)


def parse_claim(entry: dict) -> Claim:
    defaults = {k: entry.pop(k) for k in ("summary", "group") if k in entry}
    llm_defaults = {k.removeprefix("llm_"): entry.pop(k) for k in ("llm_summary", "llm_group") if k in entry}
    checks = parse_checks(entry.pop("checks", []), defaults)
    llm_checks = parse_checks(entry.pop("llm_checks", []), llm_defaults)
    claim = Claim(**entry, checks=checks, llm_checks=llm_checks)
    if not claim.checks and claim.status not in (NOT_RUN, NO_SUMMARY):
        raise FedprefError(f"claim {claim.id}: no checks, so its status must be {NOT_RUN!r} or {NO_SUMMARY!r}")
    return claim


def load_claims(text: str | None = None) -> list[Claim]:
    """The claims of src/fedpref/claims.toml (or of `text`), in paper order."""
    if text is None:
        text = resources.files("fedpref").joinpath("claims.toml").read_text(encoding="utf-8")
    return [parse_claim(dict(entry)) for entry in tomllib.loads(text)["claim"]]


def load_summaries(paths: Iterable[Path]) -> dict[str, list[dict]]:
    """summary name (file stem) -> rows, from `fedpref summarize --json` files or the folders holding them."""
    files = []
    for path in paths:
        files += sorted(path.glob("*.json")) if path.is_dir() else [path]
    found = {}
    for f in files:
        document = json.loads(f.read_text(encoding="utf-8"))
        if not isinstance(document, dict) or not str(document.get("format", "")).startswith("fedpref-summary/"):
            continue  # another JSON file in the folder
        found[f.stem] = document["rows"]
    if not found:
        raise FedprefError("no summary JSON (`fedpref summarize --json`) in " + ", ".join(map(str, paths)))
    return found


def candidates(summaries: dict[str, list[dict]], q: Quantity, step: int | None, strict: bool) -> list[dict]:
    """Rows that `q` (at `step`) names. Strict: in its own summary file and group. Otherwise (a user's own
    summaries, other file names and groups): its file if given, else every file; its group where one matches."""
    if strict:
        pool = summaries.get(q.summary, [])
    else:
        pool = summaries[q.summary] if q.summary in summaries else [r for rows in summaries.values() for r in rows]
    rows = [
        r
        for r in pool
        if (r["kind"], r["method"], r["step"]) == (q.row_kind, q.method, step)
        and (r.get("policy", ""), r.get("context", "")) == (q.policy, q.context)
    ]
    same_group = [r for r in rows if r["group"] == q.group]
    return same_group if strict or same_group else rows


def seeds_of(row: dict) -> int:
    """How many seeds a row stands on: its seeds' count; converted rows without seeds: n per seed, one per client."""
    if row.get("seeds"):
        return len(row["seeds"])
    return row["n"] if row["unit"] == "seed" else 1


def reading_of(values: Sequence[float]) -> Reading:
    """Per-seed values as a reading: their mean and 95% t-interval."""
    est = estimate(values)
    low, high = est.interval or (None, None)
    return Reading(est.mean, low, high, est.n)


def paired_read(summaries: dict[str, list[dict]], q: Quantity, strict: bool) -> Reading | None:
    """The difference "A - B" of a per-seed kind that the summary does not pair (PAIRED_KINDS): the per-seed
    differences over the seeds both rows hold, their mean and 95% t-interval; None where a row is missing or they
    share no seed."""
    a, b = (candidates(summaries, replace(q, method=m), q.step, strict) for m in q.method.split(" - ", 1))
    if len(a) != 1 or len(b) != 1 or not a[0].get("seeds") or not b[0].get("seeds"):
        return None
    of_b = dict(zip(b[0]["seeds"], b[0]["values"], strict=True))
    differences = [x - of_b[s] for s, x in zip(a[0]["seeds"], a[0]["values"], strict=True) if s in of_b]
    if not differences:
        return None
    return reading_of(differences)


def read(summaries: dict[str, list[dict]], q: Quantity, strict: bool = True) -> Reading | None:
    """The quantity's reading; None where the summaries lack it (or, not strict, name it ambiguously)."""
    if q.row_kind in PAIRED_KINDS and " - " in q.method:
        return paired_read(summaries, q, strict)
    rows = candidates(summaries, q, q.step, strict)
    if len(rows) != 1:
        if strict and rows:
            raise FedprefError(f"{q.summary}: {len(rows)} rows match {q.label()} in group {q.group!r}")
        return None
    row = rows[0]
    if q.from_step is None:
        return Reading(row["mean"], row["ci_low"], row["ci_high"], seeds_of(row))
    start = candidates(summaries, q, q.from_step, strict)
    if len(start) != 1 or len(start[0]["values"]) != len(row["values"]) or not row["values"]:
        return None
    if start[0].get("seeds") and row.get("seeds") and start[0]["seeds"] != row["seeds"]:
        return None  # per-seed values pair up only over the same seeds
    return reading_of([b - a for a, b in zip(start[0]["values"], row["values"], strict=True)])


def decide_claim(claim: Claim, summaries: dict[str, list[dict]], strict: bool = True) -> Decision:
    """Every check of the claim read from the summaries and decided by its rule; the claim's verdict combined.
    Strict (the committed summaries): its llm_checks too, into a verdict of their own."""
    decision = Decision(claim, claim.status)
    if claim.checks:
        decision.outcomes = decide_checks(claim.checks, summaries, strict)
        decision.verdict = combine([o.verdict for o in decision.outcomes])
    if strict and claim.llm_checks:
        decision.llm_outcomes = decide_checks(claim.llm_checks, summaries, strict)
        decision.llm_verdict = combine([o.verdict for o in decision.llm_outcomes])
    return decision


def decide_checks(checks: Sequence[Check], summaries: dict[str, list[dict]], strict: bool) -> list[Outcome]:
    """Each check read from the summaries and decided by its rule."""
    outcomes = []
    for check in checks:
        x = read(summaries, check.quantity, strict)
        ref = read(summaries, check.than, strict) if check.than else None
        outcome = Outcome(check, x, ref)
        if x is not None and (check.than is None or ref is not None):
            tolerance = TOLERANCE[check.quantity.unit]
            outcome.verdict = decide(check.rule, x, check.value, tolerance, ref)
        outcomes.append(outcome)
    return outcomes


def decide_all(
    summaries: dict[str, list[dict]], claims: Sequence[Claim] | None = None, strict: bool = True
) -> list[Decision]:
    """The decision of every claim; not strict (a user's summaries): only the claims with a reading."""
    decisions = [decide_claim(c, summaries, strict) for c in (load_claims() if claims is None else claims)]
    if strict:
        return decisions
    return [d for d in decisions if any(o.reading is not None for o in d.outcomes)]


def committed_summaries() -> Path:
    """docs/results of the source checkout this package runs from (the committed summaries)."""
    folder = Path(__file__).resolve().parents[2] / "docs" / "results"
    if not folder.is_dir():
        raise FedprefError("the committed summaries (docs/results/*.json) are not here: pass --summaries")
    return folder


# ------------------------------------------------------------------------------------------------------ output


def outcome_text(o: Outcome) -> str:
    """'FedGD - FL at acc^10 1.72 [-3.10, 6.54] (3 seeds) > 0: mixed'."""
    c = o.check
    sign = {"greater": ">", "less": "<", "near": "≈", "at_least": "≥"}[c.rule]
    ref = c.than.label() if c.than else f"{c.value:g}"
    if c.rule in ("near", "at_least"):
        ref += f" (± {TOLERANCE[c.quantity.unit]:g})" if c.rule == "near" else f" - {TOLERANCE[c.quantity.unit]:g}"
    ours = o.reading.text() if o.reading else "–"
    if c.than:
        ref += f" {o.reference.text()}" if o.reference else " –"
    return f"{c.quantity.label()} {ours} {sign} {ref}: {o.verdict}"


def outcome_record(o: Outcome) -> dict:
    return {
        "quantity": o.check.quantity.label(), "summary": o.check.quantity.summary, "rule": o.check.rule,
        "value": o.check.value, "than": o.check.than.label() if o.check.than else None,
        "ours": None if o.reading is None else vars(o.reading),
        "reference": None if o.reference is None else vars(o.reference), "verdict": o.verdict,
    }  # fmt: skip


def decision_record(d: Decision) -> dict:
    c = d.claim
    return {
        "id": c.id, "paper": c.paper, "source": c.source, "statement": c.statement, "sentence": c.sentence,
        "paper_number": c.paper_number,
        "command": c.command, "verdict": d.verdict, "headline": c.headline, "note": c.note,
        "checks": [outcome_record(o) for o in d.outcomes],
        "llm": LLM, "llm_verdict": d.llm_verdict or None, "llm_checks": [outcome_record(o) for o in d.llm_outcomes],
    }  # fmt: skip


def to_json(decisions: Sequence[Decision]) -> str:
    return json.dumps([decision_record(d) for d in decisions], indent=1, ensure_ascii=False) + "\n"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def ours_cell(d: Decision, link: str = "") -> str:
    if not d.outcomes:
        return d.claim.note or "–"
    parts = [outcome_text(o) for o in d.outcomes]
    return "; ".join(parts) + (f" {link}" if link else "")


def llm_cell(d: Decision, link: str = "") -> str:
    """The llm_checks' readings and their verdict ('–' without any)."""
    if not d.llm_outcomes:
        return "–"
    return "; ".join(outcome_text(o) for o in d.llm_outcomes) + (f" {link}" if link else "") + f": **{d.llm_verdict}**"


def to_markdown(decisions: Sequence[Decision], summary_link: str = "") -> str:
    """One table: claim, paper and table, statement, the paper's number, ours (each check), verdict, ours on the
    LLM (each llm check, its verdict), command."""
    lines = [f"| claim | source | statement | paper | ours | verdict | on {LLM} | command |", "|" + "---|" * 8]
    for d in decisions:
        c = d.claim
        files = list(dict.fromkeys(o.check.quantity.summary for o in d.outcomes))
        link = ", ".join(f"[{f}]({summary_link}{f}.md)" for f in files) if summary_link else ""
        cells = [c.id, f"{c.paper} {c.source}", c.statement, c.paper_number, ours_cell(d, link), d.verdict]
        cells.append(llm_cell(d))
        lines.append("| " + " | ".join(cell(x) for x in cells) + f" | `{cell(c.command)}` |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------- generated pages

RESULTS_PAGE = Path("docs/results/index.md")
NOTES_PAGE = Path("docs/notes/reproduction.md")
README = Path("README.md")
START, END = "<!-- claims:start -->", "<!-- claims:end -->"
GENERATED = "<!-- generated by `make reference` from src/fedpref/claims.toml and docs/results/*.json -->"


def anchor(claim_id: str) -> str:
    return claim_id.lower()


def primary_source(source: str) -> str:
    """'Tables 1, 3, Fig. 2' -> 'Table 1'; 'Sec. 3.2, App. B.1' -> 'Sec. 3.2'."""
    first = source.split(",")[0].split(" (")[0].strip()
    return first.replace("Tables ", "Table ")


def rule_lines() -> list[str]:
    lines = [f"- **{name}**: {text}." for name, text in RULE_TEXT.items()]
    tolerances = ", ".join(f"{v:g} for {UNIT_NAMES[k]}" for k, v in TOLERANCE.items())
    lines += [
        f"- The tolerance of *near* and *at_least*, once for every claim: {tolerances}.",
        f"- **{INDICATIVE}**: the reading (or the row it is compared with) stands on one seed, whatever it shows.",
        "- A claim with several checks (several settings, or a sentence with several parts) takes the verdict its "
        "checks share; where they differ, *indicative* if one of them is, else *mixed*.",
        f"- **{NOT_RUN}**: nothing was measured; **{NO_SUMMARY}**: what was measured is not a number of a summary "
        "(per-seed lists, selector tables, Stage 2 win rates, a parameter count): see the research notes.",
    ]
    return lines


def results_page(decisions: Sequence[Decision]) -> str:
    """docs/results/index.md: the rules, then per paper and table every claim with ours and its verdict."""
    lines = [
        "# Results: the papers' claims and our verdicts",
        "",
        GENERATED,
        "",
        "Every table and figure claim of the FedGD and FedVPA-GP papers, with the paper's number, ours (mean, 95% "
        "t-interval and number of seeds, read from a committed summary on this page's folder) and the verdict "
        "that a fixed rule decides from it. Our numbers come from reduced scale on CPUs (MiniLM, SmolLM2-135M, "
        "stories260K): they test the papers' directions, not their absolute values. The runs behind each number, "
        "and what they mean, are in the [research notes](../notes/reproduction.md).",
        "",
        "`fedpref claims` prints this table; `fedpref claims --summaries DIR` decides the same rules on your own "
        "`fedpref summarize --json` files (for example a rerun on a GPU with the paper's model).",
        "",
        "## The rules",
        "",
        "Each claim names a quantity of a summary (a method's accuracy, a paired difference A - B over the same "
        "clients and seeds, a diagnostic) and one rule, chosen by the kind of sentence the paper writes:",
        "",
        *rule_lines(),
        "",
    ]
    lines += [
        f"The column *on {LLM}* decides the same claim by the same rule on the summaries of runs with "
        f"{LLM} as the backbone (the papers' own formulation: an A/B selector on a pretrained causal LM). It is a "
        "4-bit quantized 135M model, not the papers' Qwen-2 0.5B-1.5B or Gemma-2B, at a budget two CPU cores "
        "allow; its settings are on each summary's page.",
        "",
    ]
    counts = {v: sum(d.verdict == v for d in decisions) for v in VERDICTS}
    lines += ["Verdicts: " + ", ".join(f"{v} {n}" for v, n in counts.items() if n) + f" (of {len(decisions)}).", ""]
    llm = [d.llm_verdict for d in decisions if d.llm_verdict]
    llm_counts = ", ".join(f"{v} {n}" for v in VERDICTS if (n := llm.count(v)))
    lines += [f"On {LLM}: {llm_counts} (of {len(llm)} claims with a check there).", ""] if llm else []
    for paper in dict.fromkeys(d.claim.paper for d in decisions):
        lines += [f"## {paper} paper", ""]
        mine = [d for d in decisions if d.claim.paper == paper]
        for source in dict.fromkeys(primary_source(d.claim.source) for d in mine):
            lines += [f"### {source}", "", f"| claim | statement | paper | ours | verdict | on {LLM} | command |"]
            lines += ["|---|---|---|---|---|---|---|"]
            for d in (d for d in mine if primary_source(d.claim.source) == source):
                lines.append(claim_row(d))
            lines.append("")
    changed = [d for d in decisions if d.claim.old_verdict and d.claim.old_verdict != d.verdict]
    lines += [
        "## Where the rules differ from the earlier hand-written verdicts",
        "",
        "Before these rules, the research notes gave each claim a verdict by hand. Where the rule decides "
        "otherwise, the rule's verdict stands (the rules were not changed to match):",
        "",
        "| claim | by hand | by the rule | the rule's reading |",
        "|---|---|---|---|",
    ]
    for d in changed:
        lines.append(
            f"| [{d.claim.id}](#{anchor(d.claim.id)}) | {d.claim.old_verdict} | {d.verdict} | {cell(ours_cell(d))} |"
        )
    return "\n".join(lines).rstrip() + "\n"


def summary_links(outcomes: Sequence[Outcome]) -> str:
    """'(summary)' or '(summary 1, summary 2)': links to the summary pages the outcomes read, in their order."""
    files = list(dict.fromkeys(o.check.quantity.summary for o in outcomes))
    names = ["summary"] if len(files) == 1 else [f"summary {i}" for i in range(1, len(files) + 1)]
    links = ", ".join(f"[{name}]({f}.md)" for name, f in zip(names, files, strict=True))
    return f"({links})" if links else ""


def claim_row(d: Decision) -> str:
    c = d.claim
    ours = " ".join(x for x in (ours_cell(d), summary_links(d.outcomes)) if x)
    llm = llm_cell(d, summary_links(d.llm_outcomes))
    first = f'<a id="{anchor(c.id)}"></a>{c.id}'
    quote = f'<br>*"{c.sentence}"*' if c.sentence else ""
    cells = [f"{c.statement} ({c.source}){quote}", c.paper_number, ours, f"**{d.verdict}**", llm, f"`{c.command}`"]
    return f"| {first} | " + " | ".join(cell(x) for x in cells) + " |"


def readme_table(decisions: Sequence[Decision]) -> list[str]:
    """The README's results at a glance: the headline claims, the first check's reading."""
    lines = ["| claim | paper | ours | verdict |", "|---|---|---|---|"]
    for d in decisions:
        if not d.claim.headline:
            continue
        c, first = d.claim, d.outcomes[0]
        more = f" (+{len(d.outcomes) - 1} more)" if len(d.outcomes) > 1 else ""
        ours = f"{first.check.quantity.label()}: {first.reading.text() if first.reading else '–'}{more}"
        link = f"[{c.statement}]({RESULTS_PAGE.as_posix()}#{anchor(c.id)})"
        lines.append(f"| {link} ({c.paper} {c.source}) | {cell(c.paper_number)} | {cell(ours)} | {d.verdict} |")
    return lines


def splice(text: str, block: list[str]) -> str:
    """`text` with the lines between the claims markers replaced by `block`."""
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise FedprefError(f"no {START} ... {END} markers")
    return head + start + "\n" + "\n".join(block) + "\n" + end + tail


def notes_verdicts(text: str, decisions: Sequence[Decision]) -> str:
    """The research notes' table with each claim's verdict cell (the 6th column) replaced by the rule's verdict,
    linked to its row on the results page."""
    verdict = {d.claim.id: d.verdict for d in decisions}
    llm = {d.claim.id: d.llm_verdict for d in decisions}
    out = []
    for line in text.splitlines(keepends=True):
        parts = line.split(" | ")
        claim_id = parts[0].removeprefix("| ").strip() if line.startswith("| F") else ""
        if claim_id in verdict and len(parts) >= 7:
            link = f"(../results/index.md#{anchor(claim_id)})"
            parts[5] = f"[{verdict[claim_id]}]{link}" + (
                f"; on {LLM}: [{llm[claim_id]}]{link}" if llm[claim_id] else ""
            )
            line = " | ".join(parts)
        out.append(line)
    return "".join(out)


def generated_files(root: Path) -> dict[Path, str]:
    """Path (under `root`, a source checkout) -> its text with the generated parts current: the results page,
    the README's glance table and the research notes' verdict column, all from the committed summaries."""
    decisions = decide_all(load_summaries([root / "docs" / "results"]))
    return {
        RESULTS_PAGE: results_page(decisions),
        README: splice((root / README).read_text(encoding="utf-8"), readme_table(decisions)),
        NOTES_PAGE: notes_verdicts((root / NOTES_PAGE).read_text(encoding="utf-8"), decisions),
    }
