"""Training data: dialog files in, masked token sequences out.

Accepted records (JSON array or JSON Lines, one record per line):

* the paper's counselling record ``{"input": user text, "output": counsellor reply}``, optionally with
  ``"history": [[user, reply], ...]`` (earlier turns) and ``"system": "..."``;
* a chat record ``{"messages": [{"role": "system"|"user"|"assistant", "content": ...}, ...]}`` or a bare
  list of such messages, ending with an assistant message.

Other keys (ids, topics) are ignored. Malformed records raise :class:`~finetune.errors.DataError`
naming the file and line. Tokenisation goes through :func:`finetune.formats.encode_conversation`, so
prompt tokens get label ``-100`` and only replies are learned. Nothing here imports torch at module
level; :class:`CausalLMCollator` imports it when called.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finetune.errors import DataError, FormatError
from finetune.files import read_user_text
from finetune.formats import IGNORE_INDEX, Conversation, PromptFormat, Supervise, encode_conversation

logger = logging.getLogger(__name__)


def load_conversations(path: str | Path, system_prompt: str | None = None) -> list[Conversation]:
    """Read every record of a ``.json`` or ``.jsonl`` file as a training :class:`Conversation`."""
    path = Path(path)
    text = read_user_text(path, "data file", DataError)
    try:
        records = list(_records(path, text))
        if (
            path.suffix != ".jsonl"
            and text.lstrip().startswith("[")
            and records
            and all(isinstance(r, dict) and "role" in r for _, r in records)
        ):  # the array is one dialog, a bare list of messages (not records of one message each)
            records = [(records[0][0], [r for _, r in records])]
        conversations = [
            record_to_conversation(record, f"{path}:{line}", system_prompt) for line, record in records
        ]
    except RecursionError:
        raise DataError(f"{path}: JSON nested too deeply to read; records are flat objects") from None
    if not conversations:
        raise DataError(f"{path}: no records found")
    return conversations


def load_files(paths: Sequence[str | Path], system_prompt: str | None = None) -> list[Conversation]:
    out: list[Conversation] = []
    for path in paths:
        loaded = load_conversations(path, system_prompt)
        logger.info("read %d dialogs from %s", len(loaded), path)
        out += loaded
    return out


def _records(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded record)`` for a JSON array, a single JSON object or JSON Lines."""
    stripped = text.lstrip()
    if stripped.startswith("[") and not (
        path.suffix == ".jsonl" and _one_line_json(stripped.split("\n", 1)[0])
    ):
        yield from _array_items(path, text)  # (a .jsonl whose first line is a whole list: one dialog a line)
        return
    if path.suffix == ".json" and stripped.startswith("{"):
        try:
            yield text[: len(text) - len(stripped)].count("\n") + 1, json.loads(text)
            return
        except json.JSONDecodeError as e:
            if e.msg != "Extra data":  # several objects: JSON Lines in a .json file
                raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg}, column {e.colno})") from e
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{number}: not valid JSON ({e.msg}, column {e.colno})") from e
        except ValueError as e:  # a number too long to read
            raise DataError(f"{path}:{number}: cannot read it ({e})") from e


def _one_line_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _array_items(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    decoder = json.JSONDecoder()
    pos, line, counted = text.index("[") + 1, 1, 0

    def skip(i: int) -> int:
        while i < len(text) and text[i].isspace():
            i += 1
        return i

    while True:
        pos = skip(pos)
        if pos < len(text) and text[pos] == "]":
            rest = skip(pos + 1)
            if rest < len(text):  # two files joined, or garbage after the array: never dropped silently
                raise DataError(
                    f"{path}:{text.count(chr(10), 0, rest) + 1}: more text after the closing ']' of the "
                    "records; one JSON array per file (or one record per line, JSONL)"
                )
            return
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            record, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg}, column {e.colno})") from e
        except ValueError as e:  # a number too long to read
            raise DataError(f"{path}:{line}: cannot read it ({e})") from e
        yield line, record
        pos = skip(end)
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos >= len(text) or text[pos] != "]":
            raise DataError(f"{path}:{text.count(chr(10), 0, pos) + 1}: expected ',' or ']' after a record")


def _text(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: {what} must be a non-empty string, got {value!r:.60}")
    bad = next((i for i, c in enumerate(value) if "\ud800" <= c <= "\udfff"), None)
    if bad is not None:  # an unpaired \ud800 escape: not Unicode, the tokenizer fails on it
        raise DataError(
            f"{where}: {what} has a lone surrogate at position {bad} (not valid Unicode); fix the text"
        )
    return value


def record_to_conversation(record: Any, where: str, system_prompt: str | None = None) -> Conversation:
    """One record as a :class:`Conversation`; ``where`` (``file:line``) prefixes every error."""
    if isinstance(record, list):
        record = {"messages": record}
    if not isinstance(record, dict):
        raise DataError(
            f"{where}: a record must be an object or a list of messages, got {type(record).__name__}"
        )
    system = record.get("system", system_prompt)
    if system is not None:
        system = _text(system, "'system'", where)
    if "messages" in record:
        messages = record["messages"]
        if not isinstance(messages, list) or not messages:
            raise DataError(f"{where}: 'messages' must be a non-empty list")
        try:
            conv = Conversation.from_messages(messages)
        except FormatError as e:
            raise DataError(f"{where}: {e}") from None
        if conv.query is not None or not conv.turns:
            raise DataError(f"{where}: the last message must be an assistant reply to learn from")
        if conv.system is not None:
            _text(conv.system, "'system' message", where)
        for i, (query, reply) in enumerate(conv.turns):
            _text(query, f"user message of turn {i + 1}", where)
            _text(reply, f"assistant message of turn {i + 1}", where)
        return Conversation(conv.turns, None, conv.system or system)
    if "role" in record:
        raise DataError(f'{where}: this is a single message; wrap the dialog as {{"messages": [...]}}')
    missing = [key for key in ("input", "output") if key not in record]
    if missing:
        raise DataError(
            f"{where}: missing {' and '.join(repr(m) for m in missing)}; expected "
            '{"input": ..., "output": ...} or {"messages": [...]}'
        )
    history = record.get("history")
    history = [] if history is None else history
    if not isinstance(history, list):
        raise DataError(f"{where}: 'history' must be a list of [user, reply] pairs")
    turns = []
    for i, pair in enumerate(history):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise DataError(f"{where}: history[{i}] must be a [user, reply] pair, got {pair!r:.60}")
        turns.append((_text(pair[0], f"history[{i}][0]", where), _text(pair[1], f"history[{i}][1]", where)))
    turns.append((_text(record["input"], "'input'", where), _text(record["output"], "'output'", where)))
    return Conversation(tuple(turns), None, system)


def split_train_validation(items: Sequence[Any], fraction: float, seed: int) -> tuple[list[Any], list[Any]]:
    """Shuffle with ``seed`` and hold out ``fraction`` (at least one item when fraction > 0)."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    n_val = (
        min(max(1, round(len(items) * fraction)), len(items) - 1) if fraction > 0 and len(items) > 1 else 0
    )
    return [items[i] for i in order[n_val:]], [items[i] for i in order[:n_val]]


@dataclass
class TokenStats:
    """What tokenisation kept, cut and dropped."""

    examples: int = 0
    dropped: int = 0
    truncated: int = 0
    tokens: int = 0
    supervised_tokens: int = 0


def tokenize_conversations(
    conversations: Sequence[Conversation],
    fmt: PromptFormat,
    tokenizer: Any,
    max_length: int,
    supervise: Supervise = "all",
) -> tuple[list[dict[str, list[int]]], TokenStats]:
    """Encode and cut to ``max_length``; examples left with no supervised token are dropped."""
    features: list[dict[str, list[int]]] = []
    stats = TokenStats()
    for conv in conversations:
        enc = encode_conversation(fmt, conv, tokenizer, supervise)
        ids, labels = enc.input_ids[:max_length], enc.labels[:max_length]
        stats.truncated += len(enc.input_ids) > max_length
        supervised = sum(label != IGNORE_INDEX for label in labels)
        if supervised == 0:
            stats.dropped += 1
            continue
        features.append({"input_ids": ids, "labels": labels})
        stats.examples += 1
        stats.tokens += len(ids)
        stats.supervised_tokens += supervised
    if stats.dropped or stats.truncated:
        logger.warning(
            "%d of %d dialogs longer than max_length=%d were cut; %d dropped (no reply token left)",
            stats.truncated,
            len(conversations),
            max_length,
            stats.dropped,
        )
    return features, stats


@dataclass
class CausalLMCollator:
    """Pad a batch on the right: ``pad_token_id`` for ids, ``-100`` for labels, 0 in the attention mask.

    ``with_attention_mask=False`` leaves the mask out, for models that derive it from the ids (ChatGLM-6B).
    """

    pad_token_id: int
    pad_to_multiple_of: int | None = None
    with_attention_mask: bool = True

    def __call__(self, features: Sequence[dict[str, list[int]]]) -> dict[str, Any]:
        import torch

        longest = max(len(f["input_ids"]) for f in features)
        if self.pad_to_multiple_of:
            longest = -(-longest // self.pad_to_multiple_of) * self.pad_to_multiple_of
        ids, labels, mask = [], [], []
        for f in features:
            pad = longest - len(f["input_ids"])
            ids.append(list(f["input_ids"]) + [self.pad_token_id] * pad)
            labels.append(list(f["labels"]) + [IGNORE_INDEX] * pad)
            mask.append([1] * len(f["input_ids"]) + [0] * pad)
        batch = {
            "input_ids": torch.tensor(ids, dtype=torch.long),
            "labels": torch.tensor(labels, dtype=torch.long),
        }
        if self.with_attention_mask:
            batch["attention_mask"] = torch.tensor(mask, dtype=torch.long)
        return batch
