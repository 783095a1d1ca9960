"""TRL preference formats (explicit/implicit prompt, plain text or chat messages) from any `datasets` source."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from fedpref.data.files import check_names, hub_splits, is_hub_id, load_hub, load_local, local_files, one_line
from fedpref.data.pairs import PreferencePair
from fedpref.errors import DataError

Messages = list[dict[str, Any]]
# (prompt messages, completion messages) -> (prompt text, completion text)
Renderer = Callable[[Messages, Messages], tuple[str, str]]
# Files `Dataset.save_to_disk` / `DatasetDict.save_to_disk` write; they mark a saved folder.
_SAVED_MARKERS = ("dataset_dict.json", "state.json")


def plain_chat(messages: Messages) -> str:
    """Messages as "role: content" lines: the rendering when the tokenizer has no chat template."""
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


def chat_renderer(tokenizer: Any | None) -> Renderer:
    """Render like TRL's `maybe_apply_chat_template`: the prompt with the generation prompt, the completion as
    what the template adds after it; without a chat template, `plain_chat` of each part."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return lambda prompt, completion: (plain_chat(prompt), plain_chat(completion))

    def render(prompt: Messages, completion: Messages) -> tuple[str, str]:
        head = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        full = tokenizer.apply_chat_template(prompt + completion, tokenize=False)
        return head, full[len(head) :]

    return render


def _is_messages(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, Mapping) and "role" in m and "content" in m for m in value)
    )


def common_prefix(chosen: str, rejected: str) -> str:
    """The shared prompt of an implicit-prompt pair, as TRL's `extract_prompt` finds it (a trailing space
    stays with the responses)."""
    n = 0
    for a, b in zip(chosen, rejected):
        if a != b:
            break
        n += 1
    if n < min(len(chosen), len(rejected)) and n > 0 and chosen[n - 1] == " ":
        n -= 1
    return chosen[:n]


def _message_prefix(chosen: Messages, rejected: Messages) -> int:
    n = 0
    while n < min(len(chosen), len(rejected)) and chosen[n] == rejected[n]:
        n += 1
    return n


def trl_texts(prompt: Any, chosen: Any, rejected: Any, render: Renderer, where: str) -> tuple[str, str, str]:
    """(prompt, chosen, rejected) strings from one TRL row; `prompt` None means an implicit prompt."""
    if isinstance(chosen, str) and isinstance(rejected, str):
        if prompt is None:
            prompt = common_prefix(chosen, rejected)
            return prompt, chosen[len(prompt) :], rejected[len(prompt) :]
        if not isinstance(prompt, str):
            raise DataError(f"{where}: the prompt must be a string when chosen/rejected are strings")
        return prompt, chosen, rejected
    if not (_is_messages(chosen) and _is_messages(rejected)):
        raise DataError(f"{where}: chosen/rejected must both be strings or both be lists of {{role, content}} messages")
    chosen, rejected = [dict(m) for m in chosen], [dict(m) for m in rejected]
    if prompt is None:
        n = _message_prefix(chosen, rejected)
        prompt, chosen, rejected = chosen[:n], chosen[n:], rejected[n:]
    elif isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    elif _is_messages(prompt):
        prompt = [dict(m) for m in prompt]
    else:
        raise DataError(f"{where}: the prompt must be a string or a list of {{role, content}} messages")
    prompt_text, chosen_text = render(prompt, chosen)
    _, rejected_text = render(prompt, rejected)
    return prompt_text, chosen_text, rejected_text


def is_saved_dataset(path: Path) -> bool:
    """A folder written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk`."""
    return path.is_dir() and any((path / m).is_file() for m in _SAVED_MARKERS)


def _load_saved(path: Path) -> Any:
    import datasets

    try:
        return datasets.load_from_disk(str(path))
    except Exception as e:  # datasets raises many types; report them all alike
        raise DataError(f"{path}: could not read the saved data set ({one_line(e)})") from e


def dataset_splits(source: str | Path, split: str = "") -> Iterator[tuple[str, Any]]:
    """(label, rows) of a hub id, a saved `datasets` folder, a JSON/JSONL/parquet file or a folder of them;
    `split` picks one split of a hub id or saved DatasetDict ('' for all)."""
    if is_hub_id(source) or is_saved_dataset(Path(source)):
        data = load_hub(str(source)) if is_hub_id(source) else _load_saved(Path(source))
        splits = hub_splits(data)
        if split:
            check_names(source, [split], set(splits), "split")
            splits = {split: splits[split]}
        for name, rows in splits.items():
            yield f"{source} [{name}]", rows
        return
    for path in local_files(Path(source)):
        yield str(path), load_local(path)


def _check_columns(label: str, rows: Any, keys: Mapping[str, str], optional: Sequence[str]) -> None:
    columns = getattr(rows, "column_names", None)
    if columns is None:  # a plain list of dicts (tests): checked row by row
        return
    missing = [k for f, k in keys.items() if k not in columns and f not in optional]
    if not missing:
        return
    hint = ""
    if keys.get("client") in missing:
        hint = (
            "; federated learning needs one client per user: set data.pairwise.user_key to the column naming "
            "each pair's user"
        )
    raise DataError(f"{label}: missing column(s) {', '.join(missing)} (columns: {', '.join(columns)}){hint}")


def load_preferences(
    source: str | Path,
    *,
    keys: Mapping[str, str],
    group_key: str | None = None,
    split: str = "",
    render: Renderer | None = None,
) -> list[PreferencePair]:
    """Pairs in any TRL preference format, one client per distinct user id.

    `keys` maps prompt / chosen / rejected / client to column names; a prompt column absent from the data
    means an implicit prompt (the common prefix of chosen and rejected). `render` turns chat messages into
    text (default: `plain_chat`).
    """
    render = render or chat_renderer(None)
    wanted = dict(keys) | ({"group": group_key} if group_key else {})
    pairs = []
    for label, rows in dataset_splits(source, split):
        _check_columns(label, rows, wanted, optional=("prompt",))
        for i, row in enumerate(rows, start=1):
            pairs.append(_pair(row, f"{label} row {i}", wanted, render))
    if not pairs:
        raise DataError(f"{source}: no preference pairs")
    return pairs


def _pair(row: Any, where: str, keys: Mapping[str, str], render: Renderer) -> PreferencePair:
    if not isinstance(row, Mapping):
        raise DataError(f"{where}: expected a record, got {type(row).__name__}")
    missing = [k for f, k in keys.items() if f != "prompt" and row.get(k) is None]
    if missing:
        raise DataError(f"{where}: missing value(s) of {', '.join(missing)}")
    prompt, chosen, rejected = trl_texts(
        row.get(keys["prompt"]), row[keys["chosen"]], row[keys["rejected"]], render, where
    )
    group = str(row[keys["group"]]) if "group" in keys else None
    return PreferencePair(prompt, chosen, rejected, client=str(row[keys["client"]]), group=group)
