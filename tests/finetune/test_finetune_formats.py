"""Prompt formats and loss masking: what the model sees, and which tokens it learns."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from finetune.errors import FormatError
from finetune.formats import (
    IGNORE_INDEX,
    Conversation,
    TextFormat,
    available_formats,
    encode_conversation,
    get_format,
    register_format,
)

HISTORY = [("I failed my exam.", "I'm sorry, that sounds hard.")]
DIALOGS = {
    "en": [
        ("I can't sleep.", "That sounds exhausting."),
        ("My mind races at night.", "Writing thoughts down can help."),
    ],
    "zh": [("我睡不着。", "听起来你很累。"), ("晚上脑子停不下来。", "把念头写下来可能会有帮助。")],
}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "chatglm",
            "SYS\n\n[Round 0]\n问：I failed my exam.\n答：I'm sorry, that sounds hard.\n[Round 1]\n问：What now?\n答：",
        ),
        (
            "chatglm2",
            "SYS\n\n[Round 1]\n\n问：I failed my exam.\n\n答：I'm sorry, that sounds hard.\n\n[Round 2]\n\n问：What now?\n\n答：",
        ),
        (
            "belle",
            "SYS\n\nHuman: I failed my exam.\n\nAssistant: I'm sorry, that sounds hard.\n\nHuman: What now?\n\nAssistant: ",
        ),
        (
            "chatml",
            "<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\nI failed my exam.<|im_end|>\n<|im_start|>assistant\n"
            "I'm sorry, that sounds hard.<|im_end|>\n<|im_start|>user\nWhat now?<|im_end|>\n<|im_start|>assistant\n",
        ),
    ],
)
def test_build_prompt_with_history_and_system(name: str, expected: str) -> None:
    assert get_format(name).build_prompt("What now?", HISTORY, system="SYS") == expected


def test_chatglm_sends_a_lone_query_bare_like_its_chat_method() -> None:
    assert get_format("chatglm").build_prompt("你好") == "你好"
    assert get_format("chatglm2").build_prompt("你好") == "[Round 1]\n\n问：你好\n\n答："


@pytest.mark.parametrize("name", ["chatglm", "chatglm2", "belle", "chatml"])
def test_build_example_prompt_is_the_inference_prompt(name: str) -> None:
    fmt = get_format(name)
    prompt, response = fmt.build_example("What now?", "Rest first.", HISTORY, system="SYS")
    assert prompt == fmt.build_prompt("What now?", HISTORY, system="SYS")
    assert response.startswith("Rest first.")


def test_conversation_from_messages_reads_roles_and_text_parts() -> None:
    conv = Conversation.from_messages(
        [
            {"role": "system", "content": "Be kind."},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "help"},
        ]
    )
    assert conv == Conversation((("hi", "hello"),), "help", "Be kind.")
    assert Conversation.from_messages(conv.to_messages()) == conv


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "two user messages"),
        ([{"role": "assistant", "content": "a"}], "must follow a user"),
        ([{"role": "user", "content": "a"}, {"role": "system", "content": "s"}], "only come first"),
        ([{"role": "tool", "content": "a"}], "unknown role 'tool'"),
        ([{"content": "a"}], "'role' and 'content'"),
        ([{"role": "user", "content": [1, 2]}], "content part 0 must be a string"),  # was the text "1\n2"
        ([{"role": "user", "content": ["hi", {"type": "image_url", "image_url": {"url": "x"}}]}], "part 1"),
        ([{"role": "user", "content": [{"type": "text", "text": None}]}], "part 0"),
    ],
)
def test_conversation_from_messages_rejects_bad_sequences(
    messages: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(FormatError, match=message):
        Conversation.from_messages(messages)


def test_registry_names_known_formats_and_refuses_duplicates() -> None:
    assert {"chatglm", "chatglm2", "belle", "chatml", "chat_template"} <= set(available_formats())
    with pytest.raises(FormatError, match=r"known: .*belle"):
        get_format("alpaca")
    with pytest.raises(FormatError, match="already registered"):
        register_format(TextFormat(name="belle", description="dup", user_template="{query}"))


def _spans(labels: list[int]) -> list[tuple[int, int]]:
    """(start, end) of each run of supervised labels."""
    spans, start = [], None
    for i, label in enumerate([*labels, IGNORE_INDEX]):
        if label != IGNORE_INDEX and start is None:
            start = i
        elif label == IGNORE_INDEX and start is not None:
            spans.append((start, i))
            start = None
    return spans


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", ["belle", "chatglm2", "chatml", "chat_template", "chatglm"])
def test_single_turn_masks_the_prompt_and_supervises_the_reply(
    name: str, lang: str, tiny_tokenizer: Any
) -> None:
    fmt = get_format(name)
    query, reply = DIALOGS[lang][0]
    enc = encode_conversation(fmt, Conversation(((query, reply),), system="SYS"), tiny_tokenizer)
    prompt_ids = encode_conversation(fmt, Conversation((), query, "SYS"), tiny_tokenizer).input_ids
    n = len(prompt_ids)
    assert enc.input_ids[:n] == prompt_ids  # training sees exactly the inference prompt
    assert enc.labels[:n] == [IGNORE_INDEX] * n
    assert enc.labels[n:] == enc.input_ids[n:]  # every reply token (and its end marker) is learned
    learned = tiny_tokenizer.decode(enc.input_ids[n:])
    assert learned.startswith(reply)
    assert learned.rstrip().endswith("</s>" if fmt.append_eos else "<|im_end|>")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", ["belle", "chatglm2", "chatml", "chat_template"])
def test_multi_turn_supervises_every_assistant_turn_and_nothing_else(
    name: str, lang: str, tiny_tokenizer: Any
) -> None:
    conv = Conversation(tuple(DIALOGS[lang]), system="SYS")
    enc = encode_conversation(name, conv, tiny_tokenizer, supervise="all")
    spans = _spans(enc.labels)
    assert len(spans) == 2
    for (start, end), (query, reply) in zip(spans, DIALOGS[lang], strict=True):
        assert tiny_tokenizer.decode(enc.input_ids[start:end]).startswith(reply)
        assert query not in tiny_tokenizer.decode(enc.input_ids[start:end])
    prompt_text = tiny_tokenizer.decode(
        [t for t, label in zip(enc.input_ids, enc.labels, strict=True) if label == IGNORE_INDEX]
    )
    assert all(q in prompt_text for q, _ in DIALOGS[lang]) and "SYS" in prompt_text
    last = encode_conversation(name, conv, tiny_tokenizer, supervise="last")
    assert last.input_ids == enc.input_ids
    assert _spans(last.labels) == spans[-1:]


def test_chatglm_writes_history_into_the_prompt_and_supervises_the_last_reply(tiny_tokenizer: Any) -> None:
    conv = Conversation(tuple(DIALOGS["zh"]))
    enc = encode_conversation("chatglm", conv, tiny_tokenizer, supervise="all")
    ((start, end),) = _spans(enc.labels)
    assert tiny_tokenizer.decode(enc.input_ids[start:end]) == DIALOGS["zh"][1][1] + "</s>"
    assert "[Round 0]\n问：我睡不着。\n答：听起来你很累。\n[Round 1]" in tiny_tokenizer.decode(
        enc.input_ids[:start]
    )


def test_chat_template_segments_join_to_the_templates_own_rendering(tiny_tokenizer: Any) -> None:
    conv = Conversation(tuple(DIALOGS["en"]), "And now?", "SYS")
    rendered = get_format("chat_template").render(conv, tiny_tokenizer)
    expected = tiny_tokenizer.apply_chat_template(
        conv.to_messages(), tokenize=False, add_generation_prompt=True
    )
    assert rendered == expected


def test_chat_template_format_needs_a_tokenizer() -> None:
    with pytest.raises(FormatError, match=r"needs a tokenizer.*choose a prompt format instead, format: belle"):
        get_format("chat_template").build_prompt("hi")


def test_formats_module_imports_without_torch() -> None:
    code = "import sys, finetune.formats; sys.exit('torch' in sys.modules or 'transformers' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
