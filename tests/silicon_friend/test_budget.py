"""Fitting prompts into the model's context: what is kept, what is trimmed, what is never cut."""

from __future__ import annotations

import pytest

from memory_bank.records import Memory, MemoryKind
from silicon_friend.budget import PromptPlan, estimate_tokens, fit_prompt
from silicon_friend.errors import PromptTooLongError
from silicon_friend.prompts import prompt_texts


def words(text: str) -> int:
    """A simple, exact counter for tests: one token per whitespace-separated word."""
    return len(text.split())


def memory(i: int, text: str, date: str = "2023-05-01") -> Memory:
    return Memory(
        memory_id=f"Emily_{date}_{i}", user="Emily", kind=MemoryKind.TURN, date=date, text=text,
        turn=i, query=text, response="",
    )  # fmt: skip


def plan(**kw) -> PromptPlan:  # type: ignore[no-untyped-def]
    base = {"texts": prompt_texts("en"), "user": "Emily", "today": "2023-05-04", "message": "How are you?"}
    return PromptPlan(**{**base, **kw})


def test_everything_fits_in_a_large_context() -> None:
    p = plan(
        memories=[memory(0, "I adopted a cat named Miso.", "2023-05-02")],
        portrait="Emily is warm and curious.",
        summary="Emily adopted a cat.",
        history=[("Hi", "Hello Emily!")],
    )
    fitted = fit_prompt(p, context_tokens=4096, max_new_tokens=256, count=words)
    system = fitted.system
    assert [m["role"] for m in fitted.messages] == ["system", "user", "assistant", "user"]
    assert fitted.messages[-1]["content"] == "How are you?"
    # The paper's order: role, memories (dated), portrait, summary.
    i_role, i_mem = system.index("You are SiliconFriend"), system.index("[2023-05-02] Emily: I adopted")
    i_portrait, i_summary = system.index("Emily is warm"), system.index("Emily adopted a cat.")
    assert i_role < i_mem < i_portrait < i_summary
    assert fitted.history_turns == 1 and fitted.portrait and fitted.summary and fitted.max_new_tokens == 256


def test_small_context_trims_history_and_memories_never_the_message() -> None:
    long_message = "word " * 60
    history = [(f"question {i} " * 10, f"answer {i} " * 10) for i in range(7)]
    mems = [memory(i, f"memory {i} " * 20) for i in range(5)]
    p = plan(
        message=long_message, history=history, memories=mems, portrait="kind " * 30, summary="events " * 30
    )
    fitted = fit_prompt(p, context_tokens=400, max_new_tokens=64, count=words)
    assert fitted.messages[-1]["content"] == long_message
    assert "You are SiliconFriend" in fitted.system and "Reply in English" in fitted.system
    assert fitted.prompt_tokens + fitted.max_new_tokens <= 400
    assert fitted.history_turns < 7 and len(fitted.memories) < 5
    # The kept history is the newest turns, contiguous.
    kept = [m["content"] for m in fitted.messages[1:-1] if m["role"] == "user"]
    assert kept == [q for q, _ in history[len(history) - len(kept) :]]


def test_the_latest_turn_and_best_memory_come_first() -> None:
    history = [(f"q{i} " * 20, f"a{i} " * 20) for i in range(3)]
    mems = [memory(0, "best " * 20), memory(1, "second " * 20)]
    p = plan(history=history, memories=mems)
    base = fit_prompt(plan(), context_tokens=10_000, max_new_tokens=32, count=words).prompt_tokens
    fitted = fit_prompt(p, context_tokens=base + 32 + 16 + 100, max_new_tokens=32, count=words)
    assert fitted.history_turns == 1 and fitted.messages[1]["content"] == history[-1][0]
    assert [m.memory_id for m in fitted.memories] == ["Emily_2023-05-01_0"]


def test_a_too_long_memory_is_shortened() -> None:
    p = plan(memories=[memory(0, "long " * 500)])
    fitted = fit_prompt(p, context_tokens=300, max_new_tokens=32, count=words)
    assert fitted.memories and "memory" in fitted.shortened
    assert fitted.system.count("long") < 500 and "[…]" in fitted.system
    assert fitted.prompt_tokens + 32 <= 300


def test_reply_budget_shrinks_before_failing_and_message_too_long_fails() -> None:
    p = plan(message="word " * 200)
    fitted = fit_prompt(p, context_tokens=350, max_new_tokens=256, count=words)
    assert 32 <= fitted.max_new_tokens < 256
    with pytest.raises(PromptTooLongError, match="too long"):
        fit_prompt(plan(message="word " * 400), context_tokens=350, max_new_tokens=256, count=words)


def test_max_new_tokens_below_the_floor_is_respected() -> None:
    fitted = fit_prompt(plan(), context_tokens=2048, max_new_tokens=8, count=words)
    assert fitted.max_new_tokens == 8


def test_first_time_prompt_welcomes_a_new_user() -> None:
    fitted = fit_prompt(plan(first_time=True), context_tokens=2048, max_new_tokens=64, count=estimate_tokens)
    assert "first conversation with Emily" in fitted.system
    assert (
        "first conversation"
        not in fit_prompt(plan(), context_tokens=2048, max_new_tokens=64, count=estimate_tokens).system
    )


def test_chinese_prompt() -> None:
    p = plan(
        texts=prompt_texts("zh"), user="小明", message="我今天很难过。", first_time=True,
        memories=[memory(0, "我养了一只猫叫咪咪。")], portrait="小明性格温和。",
    )  # fmt: skip
    system = fit_prompt(p, context_tokens=2048, max_new_tokens=64, count=estimate_tokens).system
    assert system.startswith("你是硅基朋友") and "第一次对话" in system and "请以硅基朋友的身份" in system
    assert "[2023-05-01] 小明: 我养了一只猫叫咪咪。" in system and "小明性格温和。" in system


def test_estimate_is_conservative_for_cjk() -> None:
    assert estimate_tokens("我昨天去了博物馆") == 16
    assert estimate_tokens("hello world!") == 4
