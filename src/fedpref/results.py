"""The typed, versioned schema of a run folder's results.json: its one writer and its one reader."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedpref.errors import FedprefError

SCHEMA_VERSION = 1
"""1: `schema_version`, `status` and `kind` recorded; 0: files written before the schema (upgraded on read)."""
RESULTS_FILE = "results.json"

RUNNING, INTERRUPTED, FINISHED, FAILED = "running", "interrupted", "finished", "failed"
STATUSES = (RUNNING, INTERRUPTED, FINISHED, FAILED)
RUN, STAGE2 = "run", "stage2"  # `fedpref run` (and personalize, the Flower app) or `fedpref stage2`


class ResultsError(FedprefError):
    """A results.json that cannot be read: not JSON, not an object, or written by a newer fedpref."""


def _help(text: str, default: Any = None, factory: Any = None) -> Any:
    """A field with its documentation (rendered by `fields_markdown`); None means 'absent from the file'."""
    if factory is not None:
        return field(default_factory=factory, metadata={"help": text})
    return field(default=default, metadata={"help": text})


def _extra() -> Any:
    return field(default_factory=dict, metadata={"help": "keys this schema does not name, kept as read", "extra": True})


def _named(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("extra")]


def _split(cls: type, data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`data` as (the fields `cls` names, everything else): unknown keys travel in `extra`, never dropped."""
    names = {f.name for f in _named(cls)}
    return {k: v for k, v in data.items() if k in names}, {k: v for k, v in data.items() if k not in names}


def _plain(obj: Any) -> dict[str, Any]:
    """A record's named fields (None: absent, so not written) followed by its extra keys."""
    out = {f.name: getattr(obj, f.name) for f in _named(type(obj)) if getattr(obj, f.name) is not None}
    return out | obj.extra


class _Flat:
    """A record of named fields and `extra` keys, nothing nested: read and written as is."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        named, extra = _split(cls, data)
        return cls(**named, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass
class Curves(_Flat):
    """A method's personalization: test accuracy (%) after each of the personalization steps."""

    steps: list[int] = _help("personalization steps t at which accuracy was measured", factory=list)
    acc_mean: list[float] = _help("mean over clients of the test accuracy at each step", factory=list)
    acc_std: list[float] = _help("population std over clients at each step", factory=list)
    by_group: dict[str, list[float]] = _help("mean accuracy per true group at each step", factory=dict)
    per_client: dict[str, list[float]] = _help("each client's accuracy at each step", factory=dict)
    missing: list[str] | None = _help("clients that did not answer (absent when every client did)")
    extra: dict[str, Any] = _extra()


@dataclass
class Cost(_Flat):
    """What a method's global phase cost: parameter counts, peak memory, and its time split per round."""

    trainable_params: int | None = _help(
        "parameters one model of the method trains: LoRA adapters and head (FedVPA family: and its variational modules)"
    )
    params_down_per_client_round: float | None = _help("numbers sent to a client per round (tensor elements)")
    params_up_per_client_round: float | None = _help("numbers a client sends back: state and numeric metrics")
    peak_memory_bytes: int | None = _help("the largest peak memory a client reported for a round's task")
    peak_memory_kind: str | None = _help("cuda_max_allocated (per task) or cpu_max_rss (process high-water)")
    client_s_per_round: float | None = _help("client compute per round (each stage's critical path)")
    server_s_per_round: float | None = _help("the server's own work per round: next_tasks, aggregation")
    transport_s_per_round: float | None = _help("the rest of each round (the three sum to its wall_s)")
    rounds: int | None = _help("the rounds the time split is the mean of")
    extra: dict[str, Any] = _extra()


@dataclass
class MethodResult:
    """One method's entry in `methods`: its curves and what else the method recorded."""

    personalization: Curves | None = _help("the personalization curves (`Curves` below)")
    diagnostics: dict[str, Any] | None = _help("Gradient Quotient and Headroom (client-averaged; {} when not run)")
    assignments: list[dict[str, Any]] | None = _help("clustering records: round, assignment (client -> model), ...")
    timing: dict[str, float] | None = _help("wall_s (the whole method) and global_s (its global rounds)")
    partition_ari: float | None = _help("ARI of the final partition against the true groups (when known)")
    selector: dict[str, Any] | None = _help("a latent selector's seen/unseen accuracy, separation, latent trace")
    privacy: dict[str, Any] | None = _help("client-level DP: clip_norm, noise_multiplier, releases, epsilon, delta")
    communication: dict[str, Any] | None = _help(
        "bytes_down_per_client_round / bytes_up_per_client_round (mean over each round's clients) "
        "and per round the bytes down and up by client (tensors at their dtype's size, 8 bytes per numeric metric)"
    )
    engine: str | None = _help("where it ran when not the in-process engine (flower; the centralized references)")
    cost: Cost | None = _help("parameter counts, peak memory and the time split (`Cost` below; absent in older files)")
    extra: dict[str, Any] = _extra()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MethodResult:
        named, extra = _split(cls, data)
        if isinstance(named.get("personalization"), Mapping):
            named["personalization"] = Curves.from_dict(named["personalization"])
        if isinstance(named.get("cost"), Mapping):
            named["cost"] = Cost.from_dict(named["cost"])
        return cls(**named, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        out = _plain(self)
        for name in ("personalization", "cost"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name).to_dict()
        return out

    @property
    def curves(self) -> Curves:
        """The personalization curves; empty ones for a hand-written entry without them."""
        return self.personalization if self.personalization is not None else Curves()


def as_methods(methods: Mapping[str, MethodResult | Mapping[str, Any]]) -> dict[str, MethodResult]:
    """`methods` as typed entries: the tables and plots take a run's methods or hand-built plain dicts alike."""
    return {name: r if isinstance(r, MethodResult) else MethodResult.from_dict(r) for name, r in methods.items()}


def as_curves(curves: Curves | Mapping[str, Any]) -> Curves:
    return curves if isinstance(curves, Curves) else Curves.from_dict(curves)


@dataclass
class Provenance:
    """What produced the run (top-level keys of results.json)."""

    fedpref_version: str | None = _help("fedpref's version")
    config_hash: str | None = _help("digest of the resolved config (what resuming checks)")
    python: str | None = _help("Python version")
    torch: str | None = _help("torch version")
    versions: dict[str, str] | None = _help("versions of the main packages (fedpref, torch, transformers, ...)")
    git_commit: str | None = _help("the source tree's git commit, when it is a checkout")
    extra: dict[str, Any] = _extra()


NOT_JUDGES = ("examples", "distinct_2")  # win_rates entries that are not a judge's verdicts
STAGE2_POLICIES = (("stage2", "conditional DPO"), ("feddpo", "FedDPO"))  # a Stage 2 run's policies: key, label


@dataclass
class PolicyResult(_Flat):
    """A Stage 2 policy (`stage2`: conditional DPO, `feddpo`: FedDPO) and its win rates."""

    win_rates: dict[str, dict[str, Any]] = _help(
        "judge -> context -> {win_rate, ci95, ...}; also 'examples' and 'distinct_2' (NOT_JUDGES)", factory=dict
    )
    reward: str | None = _help("whose labels trained conditional DPO (selector or oracle)")
    training: dict[str, Any] | None = _help("DPO steps, pairs, first/last loss and implicit-reward accuracy")
    rounds: list[dict[str, Any]] | None = _help("FedDPO's per-round records")
    extra: dict[str, Any] = _extra()


@dataclass
class Stage2Results:
    """A `fedpref stage2` run's sections (top-level keys of its results.json)."""

    config: dict[str, Any] | None = _help("the resolved Stage 2 config")
    task: dict[str, Any] | None = _help("task name, its types and the Stage 1 contexts")
    stage1: dict[str, Any] | None = _help("Stage 1 selector accuracy per type (seen and, if any, unseen clients)")
    judges: dict[str, Any] | None = _help("each judge's agreement with held-out human labels")
    stage2: PolicyResult | None = _help("the conditional DPO policy (`PolicyResult` below)")
    feddpo: PolicyResult | None = _help("the FedDPO policy, when enabled (`PolicyResult` below)")
    extra: dict[str, Any] = _extra()

    def policy(self, name: str) -> PolicyResult | None:
        """'stage2' (conditional DPO) or 'feddpo'."""
        return {"stage2": self.stage2, "feddpo": self.feddpo}.get(name)

    @property
    def types(self) -> tuple[str, ...]:
        return tuple((self.task or {}).get("types", ()))


_STAGE2_KEYS = {f.name for f in _named(Stage2Results)}
_PROVENANCE_KEYS = {f.name for f in _named(Provenance)}


@dataclass
class RunResults:
    """A run folder's results.json. Provenance and the Stage 2 sections are stored as top-level keys."""

    schema_version: int = _help("version of this layout (files without one are version 0)", SCHEMA_VERSION)
    status: str = _help("running, interrupted, finished or failed", RUNNING)
    kind: str = _help("run (`fedpref run`, `personalize`, the Flower app) or stage2 (`fedpref stage2`)", RUN)
    seed: int | None = _help("the run's seed")
    provenance: Provenance = _help("what produced the run (`Provenance` below)", factory=Provenance)
    data: dict[str, Any] | None = _help("clients, train_pairs, val/test pairs per client, unseen_clients")
    methods: dict[str, MethodResult] = _help("method name -> `MethodResult` (below), in the order run", factory=dict)
    engine: str | None = _help("flower for a Flower deployment run")
    personalized_from: dict[str, Any] | None = _help("`fedpref personalize`: the source run and its config_hash")
    timing: dict[str, float] | None = _help("wall_s of the whole run (Stage 2: also each stage's seconds)")
    error: str | None = _help("why a failed or interrupted run stopped")
    stage2: Stage2Results | None = _help("a Stage 2 run's sections (`Stage2Results` below)")
    extra: dict[str, Any] = _extra()

    @property
    def finished(self) -> bool:
        return self.status == FINISHED

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResults:
        """A results.json object of any version (older ones upgraded, see `upgrade`)."""
        data = upgrade(data)
        named, rest = _split(cls, data)
        for flat in ("provenance", "stage2"):  # stored flat: a key of that name is something else, kept as read
            if flat in named and not (flat == "stage2" and named.get("kind") == STAGE2):
                rest[flat] = named[flat]
            named.pop(flat, None)
        provenance = Provenance(**{k: v for k, v in rest.items() if k in _PROVENANCE_KEYS})
        rest = {k: v for k, v in rest.items() if k not in _PROVENANCE_KEYS}
        stage2 = None
        if named.get("kind") == STAGE2:
            sections = {k: v for k, v in data.items() if k in _STAGE2_KEYS}
            for policy in ("stage2", "feddpo"):
                if isinstance(sections.get(policy), Mapping):
                    sections[policy] = PolicyResult.from_dict(sections[policy])
            stage2 = Stage2Results(**sections)
            rest = {k: v for k, v in rest.items() if k not in _STAGE2_KEYS}
        named["methods"] = {name: MethodResult.from_dict(r) for name, r in (named.get("methods") or {}).items()}
        return cls(**named, provenance=provenance, stage2=stage2, extra=rest)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object written: the v0 layout (what older readers expect) plus schema_version and status."""
        out: dict[str, Any] = {"schema_version": self.schema_version, "status": self.status, "kind": self.kind}
        if self.seed is not None:
            out["seed"] = self.seed
        out |= _plain(self.provenance)
        for name in ("data", "engine", "personalized_from"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.kind == RUN or self.methods:  # a Stage 2 run has no methods; a `fedpref run` always has the key
            out["methods"] = {name: r.to_dict() for name, r in self.methods.items()}
        if self.stage2 is not None:
            sections = _plain(self.stage2)
            for policy in ("stage2", "feddpo"):
                if isinstance(sections.get(policy), PolicyResult):
                    sections[policy] = sections[policy].to_dict()
            out |= sections
        for name in ("timing", "error"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out | self.extra


def stage2_results(sections: Mapping[str, Any], status: str = RUNNING) -> RunResults:
    """A `fedpref stage2` run's results from the pipeline's plain sections (config, task, stage1, ...)."""
    data = {**sections, "schema_version": SCHEMA_VERSION, "status": status, "kind": STAGE2}
    data.setdefault("seed", (sections.get("config") or {}).get("seed"))
    return RunResults.from_dict(data)


def upgrade(data: Mapping[str, Any]) -> dict[str, Any]:
    """A results.json object brought to SCHEMA_VERSION. Version 0 (no `schema_version`) gets `kind` and the
    `status` the readers used to infer: a Stage 2 run wrote its file once, at the end (finished); a `fedpref run`
    wrote its top-level `timing` only after its last method (finished with it, else interrupted)."""
    if not isinstance(data, Mapping):
        raise ResultsError(f"expected a JSON object, not {type(data).__name__}")
    out = dict(data)
    version = out.get("schema_version", 0)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ResultsError(f"schema_version {version!r}: written by a newer fedpref (this one reads {SCHEMA_VERSION})")
    if version == 0:
        stage2 = "stage1" in out and "config" in out
        out["kind"] = STAGE2 if stage2 else RUN
        out["status"] = FINISHED if stage2 or "timing" in out else INTERRUPTED
    out["schema_version"] = SCHEMA_VERSION
    if out.get("status") not in STATUSES:
        raise ResultsError(f"status {out.get('status')!r}: expected one of {', '.join(STATUSES)}")
    return out


def results_path(run_dir: Path) -> Path:
    return Path(run_dir) / RESULTS_FILE


def has_results(run_dir: Path) -> bool:
    """Whether `run_dir` holds a results.json (of any status)."""
    return results_path(run_dir).is_file()


def load_results(path: Path) -> RunResults:
    """The results.json at `path` (a run folder or the file itself), upgraded to the current schema."""
    path = Path(path)
    if path.is_dir():
        path = results_path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultsError(f"{path}: not readable as JSON ({e})") from None
    try:
        return RunResults.from_dict(data)
    except (ResultsError, TypeError) as e:
        raise ResultsError(f"{path}: {e}") from None


class ResultsWriter:
    """The one writer of results.json: every write replaces the whole file atomically (a tmp file then
    os.replace), so a reader, or a run killed mid-write, never sees half a file. `run_dir` None writes nothing
    (a Flower app without out-dir)."""

    def __init__(self, run_dir: Path | None):
        self.path = results_path(run_dir) if run_dir is not None else None

    def write(self, results: RunResults, status: str | None = None) -> None:
        if status is not None:
            results.status = status
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(results.to_dict(), indent=2), encoding="utf-8")
        os.replace(tmp, self.path)

    def start(self, results: RunResults) -> None:
        results.error = None  # a resumed run's earlier failure no longer describes it
        self.write(results, RUNNING)

    def finish(self, results: RunResults) -> None:
        self.write(results, FINISHED)

    def fail(self, results: RunResults, error: BaseException) -> None:
        """Record why the run stopped: Ctrl-C is an interruption (resumable as any), anything else a failure."""
        results.error = f"{type(error).__name__}: {error}"
        self.write(results, INTERRUPTED if isinstance(error, KeyboardInterrupt) else FAILED)

    def fail_existing(self, error: BaseException) -> None:
        """Mark the results.json already in the folder failed (a writer that could not catch it itself)."""
        if self.path is not None and self.path.is_file():
            results = load_results(self.path)
            if not results.finished:
                self.fail(results, error)


RUN_FOLDER = (
    ("config.toml", "the resolved config and its `config_version`; `--resume` checks its hash (or an older one's)"),
    (
        "rounds.jsonl",
        "one JSON line per global round: method, round, train_loss, wall_s and its split client_s / server_s / "
        "transport_s, peak_memory_bytes and _kind, dropped clients, val_*, bytes_down / bytes_up and "
        "params_down / params_up by client",
    ),
    (RESULTS_FILE, "the results (below); rewritten whole at the start, after each method (not Stage 2) and at the end"),
    ("table.md", "the run's tables in Markdown (what the console printed)"),
    ("personalization.png, assignments.png, latents.png", "the figures (`--figure-format` png, pdf or svg)"),
    ("checkpoints/", "the last complete checkpoint and its predecessor (what `--resume` continues from)"),
    ("models/METHOD.pt", "each method's client initializations (`diagnose`, `personalize`, `export`)"),
    ("csv/, tensorboard/", "the trackers of `--log` (logging.backends)"),
    ("stage1_pairs.jsonl", "`fedpref stage2`: the Stage 1 pairs (a Stage 2 folder holds it, results and table.md)"),
)


def results_page() -> str:
    """The reference page of the run folder and results.json (docs/reference/results.md)."""
    lines = ["# Run folder and results.json", ""]
    lines += [
        f"What `fedpref run` (and `personalize`, `stage2`, the Flower app) writes into its output folder, and the "
        f"fields of `{RESULTS_FILE}`, from the dataclasses of `fedpref.results` (schema version {SCHEMA_VERSION}). "
        "Read a run with `fedpref.results.load_results(folder)`.",
        "",
        "| file | what it holds |",
        "|---|---|",
        *(f"| `{name}` | {text} |" for name, text in RUN_FOLDER),
        "",
        "## Status and versions",
        "",
        f"`status` is `{RUNNING}` from the start, `{FINISHED}` after the last method (the top-level `timing` is "
        f"written then), `{FAILED}` when the run raised (`error` says what) and `{INTERRUPTED}` after Ctrl-C; a "
        f"process killed outright leaves `{RUNNING}`. A `fedpref run` not `{FINISHED}` is continued by `--resume` "
        f"from its last checkpoint (Stage 2 runs start again); `summarize`, `stage2-summary`, `stage2 --seeds` and "
        f"`sweep` count only `{FINISHED}` runs. "
        "A Flower deployment (`flwr run .`) writes the file only once its first method is done.",
        "",
        "Files without `schema_version` (version 0, written before the schema) are upgraded on read: a Stage 2 "
        f"file (it has `stage1` and `config`) is `{FINISHED}`, since it was written once, at the end; a run's file "
        f"is `{FINISHED}` when it has the top-level `timing`, else `{INTERRUPTED}`. Keys the schema does not "
        "name are kept (`extra`) and written back unchanged. A file from a newer fedpref is refused.",
        "",
        "The file keeps the version 0 layout: provenance and the Stage 2 sections are top-level keys, so a reader "
        "of older files reads newer ones too. A field shown as `None`-able is absent from the file when unset.",
        "",
        "## Fields",
        "",
        fields_markdown(),
    ]
    return "\n".join(lines)


def fields_markdown() -> str:
    """The fields of results.json as Markdown tables, one per record, from the dataclasses' help."""
    lines: list[str] = []
    for cls in (RunResults, Provenance, MethodResult, Curves, Cost, Stage2Results, PolicyResult):
        lines += [f"### `{cls.__name__}`", "", (cls.__doc__ or "").strip(), ""]
        lines += ["| key | type | meaning |", "|---|---|---|"]
        for f in _named(cls):
            kind = str(f.type).replace("|", "\\|")
            lines.append(f"| `{f.name}` | `{kind}` | {f.metadata.get('help', '')} |")
        lines.append("")
    return "\n".join(lines)
