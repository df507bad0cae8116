"""Reading dialog files: accepted shapes, the bundled dataset, and errors that name file and line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from finetune.config import resolve_data_path
from finetune.data import (
    CausalLMCollator,
    load_conversations,
    split_train_validation,
    tokenize_conversations,
)
from finetune.errors import ConfigError, DataError
from finetune.formats import IGNORE_INDEX, Conversation, get_format


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_paper_records_with_history_and_chat_records(tmp_path: Path) -> None:
    lines = [
        {"input": "I feel low.", "output": "I'm here for you.", "id": 7},
        {
            "input": "Still low.",
            "output": "Tell me more.",
            "history": [["Hi", "Hello"]],
            "system": "Be kind.",
        },
        {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
        [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "c"},
            {"role": "assistant", "content": "d"},
        ],
    ]
    path = write(tmp_path / "d.jsonl", "\n".join(json.dumps(r) for r in lines) + "\n\n")
    convs = load_conversations(path, system_prompt="default")
    assert convs == [
        Conversation((("I feel low.", "I'm here for you."),), None, "default"),
        Conversation((("Hi", "Hello"), ("Still low.", "Tell me more.")), None, "Be kind."),
        Conversation((("a", "b"),), None, "default"),
        Conversation((("c", "d"),), None, "S"),
    ]


def test_json_array_and_single_object_files(tmp_path: Path) -> None:
    array = write(tmp_path / "a.json", json.dumps([{"input": "q", "output": "a"}] * 3, indent=2))
    assert len(load_conversations(array)) == 3
    single = write(
        tmp_path / "s.json",
        json.dumps(
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, indent=2
        ),
    )
    assert load_conversations(single) == [Conversation((("q", "a"),))]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('{"input": "q", "output": "a"}\n{"input": "q", "output": }\n', 2, "not valid JSON"),
        ('{"input": "q", "output": "a"}\n\n{"input": "q"}\n', 3, "missing 'output'"),
        ('{"input": "", "output": "a"}\n', 1, "'input' must be a non-empty string"),
        (
            '{"input": "q", "output": "a", "history": [["only one"]]}\n',
            1,
            r"history\[0\] must be a \[user, reply\] pair",
        ),
        ('{"messages": [{"role": "user", "content": "q"}]}\n', 1, "last message must be an assistant reply"),
        ('{"messages": [{"role": "bot", "content": "q"}]}\n', 1, "unknown role 'bot'"),
        ('{"role": "user", "content": "q"}\n', 1, "single message"),
        ('"just text"\n', 1, "must be an object or a list of messages"),
    ],
)
def test_malformed_records_name_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = write(tmp_path / "bad.jsonl", text)
    with pytest.raises(DataError, match=rf"bad\.jsonl:{line}: .*{message}"):
        load_conversations(path)


def test_errors_in_a_json_array_give_the_records_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "bad.json", '[\n  {"input": "q", "output": "a"},\n  {"input": "q", "output": 3}\n]\n'
    )
    with pytest.raises(DataError, match=r"bad\.json:3: 'output' must be a non-empty string"):
        load_conversations(path)


def test_missing_empty_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        load_conversations(tmp_path / "nope.jsonl")
    with pytest.raises(DataError, match="no records"):
        load_conversations(write(tmp_path / "empty.jsonl", "\n"))
    (tmp_path / "latin.jsonl").write_bytes('{"input": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(DataError, match="not UTF-8"):
        load_conversations(tmp_path / "latin.jsonl")


@pytest.mark.parametrize(
    ("name", "script"), [("counselling_en", r"[A-Za-z]"), ("counselling_zh", r"[\u4e00-\u9fff]")]
)
def test_bundled_counselling_dataset(name: str, script: str) -> None:
    convs = load_conversations(resolve_data_path(f"builtin:{name}"))
    assert len(convs) >= 30
    replies = [c.turns[-1][1] for c in convs]
    assert all(re.search(script, r) for r in replies)
    assert len(set(replies)) == len(replies)
    with pytest.raises(ConfigError, match="known: builtin:counselling_en"):
        resolve_data_path("builtin:nope")


def test_split_is_seeded_and_disjoint() -> None:
    items = list(range(20))
    train, val = split_train_validation(items, 0.2, seed=1)
    assert (train, val) == split_train_validation(items, 0.2, seed=1)
    assert len(val) == 4 and sorted(train + val) == items
    assert split_train_validation(items, 0.2, seed=2) != (train, val)
    assert split_train_validation([1], 0.5, seed=0) == ([1], [])


def test_truncation_drops_dialogs_without_a_reply_token(tiny_tokenizer: Any) -> None:
    long_prompt = Conversation((("word " * 200, "short reply"),))
    ok = Conversation((("hi", "hello"),))
    features, stats = tokenize_conversations(
        [long_prompt, ok], get_format("belle"), tiny_tokenizer, max_length=32
    )
    assert (stats.examples, stats.dropped, stats.truncated) == (1, 1, 1)
    assert all(len(f["input_ids"]) <= 32 for f in features)


def test_collator_pads_right_with_ignored_labels() -> None:
    batch = CausalLMCollator(pad_token_id=0)(
        [
            {"input_ids": [5, 6, 7], "labels": [IGNORE_INDEX, 6, 7]},
            {"input_ids": [8], "labels": [8]},
        ]
    )
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch["labels"].tolist() == [[IGNORE_INDEX, 6, 7], [8, IGNORE_INDEX, IGNORE_INDEX]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    bare = CausalLMCollator(pad_token_id=0, with_attention_mask=False)([{"input_ids": [5], "labels": [5]}])
    assert set(bare) == {"input_ids", "labels"}


def test_files_that_crashed_or_lost_records_are_read_or_refused_in_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Two exports joined (everything after the first array was dropped with exit 0), a BOM
    (refused), a lone surrogate, JSON nested too deeply and a folder (tracebacks)."""
    from finetune.config import load_config
    from finetune.data import load_conversations
    from finetune.errors import ConfigError, DataError

    one = '[{"input": "I feel lonely.", "output": "I am here with you."}]'
    joined = tmp_path / "all.json"
    joined.write_text(one + "\n" + one, encoding="utf-8")
    with pytest.raises(DataError, match=r"all.json:2: more text after the closing"):
        load_conversations(joined)
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + one.encode())
    assert len(load_conversations(bom)) == 1
    surrogate = tmp_path / "s.jsonl"
    surrogate.write_text('{"input": "hi \\ud800", "output": "hello"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="lone surrogate"):
        load_conversations(surrogate)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(DataError):
        load_conversations(deep)
    with pytest.raises(DataError, match="is a folder"):
        load_conversations(tmp_path)
    latin = tmp_path / "c.yaml"
    latin.write_bytes("output_dir: caf\xe9".encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(latin)
    with pytest.raises(ConfigError, match="is a folder"):
        load_config(tmp_path)


def test_a_dialog_given_twice_is_never_in_both_training_and_validation(tmp_path: Path, tiny_tokenizer: Any) -> None:
    """The split was drawn after duplication: every validation dialog was also trained on, and the
    validation loss looked better than it was. A 'history' of 0 was read as no history."""
    from finetune.config import load_config
    from finetune.errors import DataError
    from finetune.sft import prepare_data

    records = [{"input": f"I feel sad today, number {i}.", "output": "I am here with you."} for i in range(5)]
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in records * 4), encoding="utf-8")
    config = load_config(None, {"output_dir": str(tmp_path / "out"), "train_files": [str(data)],
                                "validation_split": 0.2, "model_name_or_path": "builtin:tiny"})  # fmt: skip
    prepared = prepare_data(config, tiny_tokenizer)
    held = {c.turns for c in prepared.validation_conversations}
    assert held and len(prepared.train) == 20 - 4 * len(held)
    bad = tmp_path / "h.jsonl"
    bad.write_text('{"input": "hi", "output": "hello", "history": 0}\n', encoding="utf-8")
    with pytest.raises(DataError, match="'history' must be a list"):
        load_conversations(bad)


def test_more_files_that_crashed_or_were_refused(tmp_path: Path) -> None:
    """A .jsonl of one bare dialog list a line was read as one array and refused; a number too
    long to read and a lone surrogate in a system message were tracebacks."""
    from finetune.errors import DataError

    lists = tmp_path / "lists.jsonl"
    dialog = [{"role": "user", "content": "I can't sleep."}, {"role": "assistant", "content": "I'm here."}]
    lists.write_text("\n".join(json.dumps(dialog) for _ in range(2)), encoding="utf-8")
    assert len(load_conversations(lists)) == 2
    big = tmp_path / "big.jsonl"
    big.write_text('{"input": "hi", "output": "hello", "n": ' + "9" * 5000 + "}\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"big.jsonl:1: cannot read it"):
        load_conversations(big)
    system = tmp_path / "system.jsonl"
    record = {"messages": [{"role": "system", "content": "be kind \ud800"}, *dialog]}
    system.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="lone surrogate"):
        load_conversations(system)


def test_a_json_file_of_one_bare_dialog_is_one_dialog(tmp_path: Path) -> None:
    """A .json file holding one dialog as a bare list of messages was read as records of one
    message each and refused; an array of such lists stays one dialog each."""
    dialog = [{"role": "user", "content": "I can't sleep."}, {"role": "assistant", "content": "I'm here."}]
    one = tmp_path / "one.json"
    one.write_text(json.dumps(dialog, indent=2), encoding="utf-8")
    assert load_conversations(one) == load_conversations_from(dialog)
    many = tmp_path / "many.json"
    many.write_text(json.dumps([dialog, dialog]), encoding="utf-8")
    assert len(load_conversations(many)) == 2


def load_conversations_from(dialog: list[dict[str, str]]) -> list[Any]:
    from finetune.data import record_to_conversation

    return [record_to_conversation(dialog, "test:1")]
