"""LLM failures: a chat model that raises, times out, or answers nothing or junk never loses the user's
words, and a failed summary run writes nothing, touches no turn, and is retried by the next run."""

from __future__ import annotations

import gradio as gr
import pytest

from memory_bank import MemoryBank, MemoryKind
from memory_bank.embeddings import HashingEncoder
from memory_bank.summaries import Summarizer
from memory_bank.summaries.config import SummaryConfig
from silicon_friend.engine import ChatSettings, SiliconFriend
from silicon_friend.models import prepare_model
from silicon_friend.web.app import WebApp
from tests.conftest import FixedClock
from tests.silicon_friend.fakes import EchoChatModel, steps
from tests.summaries.conftest import ScriptedChatModel, add_days

FAILURES = {
    "raises": lambda: EchoChatModel(mode="error"),
    "times out": lambda: EchoChatModel(mode="hang"),
    "empty": lambda: EchoChatModel(mode="empty"),
    "blank": lambda: EchoChatModel(reply="   \n\t  "),
}


@pytest.fixture
def bank(tmp_path):  # type: ignore[no-untyped-def]
    b = MemoryBank.open(tmp_path / "s", clock=FixedClock(), encoder_instance=HashingEncoder(64))
    yield b
    b.close()


def _friend(bank: MemoryBank, model: EchoChatModel) -> SiliconFriend:
    return SiliconFriend(
        bank,
        prepare_model(model, context_tokens=4096),
        settings=ChatSettings(max_new_tokens=32),
        first_token_timeout=0.3,
        idle_timeout=0.3,
    )


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_engine_keeps_the_users_turn_and_says_the_model_failed(bank, failure) -> None:  # type: ignore[no-untyped-def]
    model = FAILURES[failure]()
    friend = _friend(bank, model)
    session = friend.start("Ann")
    try:
        turn = friend.reply(session, "I adopted a cat named Miso.")
    finally:
        model.release()
    assert turn.failed and turn.error and turn.response == ""
    if failure == "times out":
        assert "the model gave no" in turn.error and "stuck" in turn.error
    stored = bank.history("Ann")
    assert [(m.query, m.response) for m in stored] == [("I adopted a cat named Miso.", "")]
    assert turn.memory_id == stored[0].memory_id
    # A later working reply still finds the kept words.
    good = _friend(bank, EchoChatModel(reply="Miso is a lovely name."))
    ok = good.reply(good.start("Ann"), "What is my cat called?")
    assert not ok.failed and len(bank.history("Ann")) == 2


def test_timeout_message_is_grammatical_and_names_the_limit(bank) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel(mode="hang")
    try:
        turn = _friend(bank, model).reply(_friend(bank, model).start("Ann"), "hello there")
    finally:
        model.release()
    assert turn.error == "the model gave no reply within 0.3 s (it may be busy or stuck)"


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_web_handler_shows_the_failure_and_keeps_the_message(bank, failure) -> None:  # type: ignore[no-untyped-def]
    model = FAILURES[failure]()
    app = WebApp(_friend(bank, model))
    try:
        with pytest.warns(UserWarning):  # gr.Warning outside a request
            outputs = list(steps(app.send("Remember my cat Miso.", "Ann", 0.7, 0.9, 32, 2, gr.Request())))
    finally:
        model.release()
    chatbot, _ = outputs[-1]
    assert chatbot[0]["content"] == "Remember my cat Miso."
    replies = [m for m in chatbot if m["role"] == "assistant" and not m.get("metadata")]  # not the notes
    assert replies[-1]["content"].startswith("⚠️ The model failed to reply")
    assert [m.query for m in bank.history("Ann")] == ["Remember my cat Miso."]


def _layers(bank: MemoryBank, user: str) -> list[str]:
    kinds = (MemoryKind.DAILY_SUMMARY, MemoryKind.DAILY_PERSONALITY, MemoryKind.GLOBAL_SUMMARY,
             MemoryKind.GLOBAL_PORTRAIT)  # fmt: skip
    return [m.text for m, _ in bank.memories(user, kinds=kinds)]


SUMMARY_FAILURES = {
    "raises": lambda: ScriptedChatModel(default="x", responses=[RuntimeError("backend down")] * 50),
    "times out": lambda: ScriptedChatModel(default="one two three four five six seven", delay_per_token=0.15),
    "empty": lambda: ScriptedChatModel(default=""),
    "junk": lambda: ScriptedChatModel(default="ok"),
    "refusal": lambda: ScriptedChatModel(
        default="I'm sorry, but as an AI language model I cannot help with that."
    ),
}


@pytest.mark.parametrize("failure", sorted(SUMMARY_FAILURES))
def test_failed_summaries_write_nothing_and_stay_due(bank, failure) -> None:  # type: ignore[no-untyped-def]
    add_days(bank, "Ann")
    before = [(m.memory_id, m.query, m.response, m.strength) for m in bank.history("Ann")]
    due = Summarizer(bank, ScriptedChatModel()).due_days("Ann")
    assert due == ["2023-04-27", "2023-04-28"]
    config = SummaryConfig(max_attempts=2, backoff_s=0, call_timeout_s=0.2)
    report = Summarizer(
        bank, SUMMARY_FAILURES[failure](), config=config, sleep=lambda s: None
    ).summarize_user("Ann")
    assert report.failed and not report.written
    assert _layers(bank, "Ann") == []  # nothing half-written
    assert bank.profile("Ann") == {"global_summary": "", "global_portrait": ""}
    assert [(m.memory_id, m.query, m.response, m.strength) for m in bank.history("Ann")] == before
    assert Summarizer(bank, ScriptedChatModel()).due_days("Ann") == due  # retried next run
    # The next run with a working model succeeds.
    report = Summarizer(bank, ScriptedChatModel(), config=config, sleep=lambda s: None).summarize_user("Ann")
    assert not report.failed and report.written
    assert Summarizer(bank, ScriptedChatModel()).due_days("Ann") == []
    profile = bank.profile("Ann")
    assert "MISO" in profile["global_summary"] and profile["global_portrait"]
    assert [(m.memory_id, m.query, m.response) for m in bank.history("Ann")] == [b[:3] for b in before]


def test_summary_failing_halfway_keeps_finished_days_and_retries_the_rest(bank) -> None:  # type: ignore[no-untyped-def]
    add_days(bank, "Ann")
    # Day one's two layers succeed, then every later call fails.
    model = ScriptedChatModel(responses=["Ann adopted a cat called MISO.", "Ann is caring and warm."]
                              + [RuntimeError("down")] * 50)  # fmt: skip
    config = SummaryConfig(max_attempts=1, backoff_s=0)
    report = Summarizer(bank, model, config=config, sleep=lambda s: None).summarize_user("Ann")
    assert report.failed and report.days == ["2023-04-27"]
    assert Summarizer(bank, ScriptedChatModel()).due_days("Ann") == ["2023-04-28"]
    assert bank.layer("Ann", MemoryKind.DAILY_SUMMARY, date="2023-04-28") is None
    assert bank.profile("Ann")["global_summary"] == ""  # not made from half the days
    Summarizer(bank, ScriptedChatModel(), config=config, sleep=lambda s: None).summarize_user("Ann")
    assert Summarizer(bank, ScriptedChatModel()).due_days("Ann") == []
    assert "BREAD" in bank.profile("Ann")["global_summary"]
