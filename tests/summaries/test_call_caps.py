"""Each summary call is bounded: its answer (max_output_tokens) and its material (max_input_tokens)."""

from __future__ import annotations

from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from memory_bank.summaries import Summarizer, SummaryConfig, Task
from memory_bank.summaries.errors import SummaryTimeoutError
from tests.silicon_friend.fakes import EchoChatModel
from tests.summaries.conftest import ScriptedChatModel


def test_answers_and_material_per_call_are_capped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = EchoChatModel(reply="The user spent the day gardening and planting tomatoes.")
    with MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64)) as bank:
        for i in range(60):
            bank.add_turn("Ann", f"Turn {i}: today I planted a row of tomatoes in the garden, " * 3, "Nice!",
                          at=f"2023-05-01T10:{i:02d}")  # fmt: skip
        config = SummaryConfig(max_output_tokens=120, max_input_tokens=400)
        summarizer = Summarizer(bank, model, "en", config=config, sleep=lambda _s: None)
        report = summarizer.summarize_user("Ann", "2023-05-02")
        assert report.ok, report.failed
        caps = {c["kwargs"].get("max_tokens") for c in model.calls}
        assert caps == {80, 112, 120}  # a personality reading, a day's events, the overview (capped at 120)
        assert summarizer.answer_tokens(Task.GLOBAL_EVENTS) == 120
        longest = max(len(str(c["messages"][-1].content).split()) for c in model.calls)
        assert longest < 400  # every prompt's material fits the cap (words < tokens)
        assert len(model.calls) > 4  # so the long day went in parts, then a merge
        uncapped = Summarizer(bank, model, "en", config=SummaryConfig(max_input_tokens=None))
        assert uncapped.budget(next(iter(uncapped.chains)), {"date": "2023-05-01"}) > 400


def test_the_companions_long_replies_are_cut_and_the_users_words_kept(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = ScriptedChatModel()
    story = "I adopted a grey cat called MISO from the shelter on Elm Street and she purrs all night. "
    reply = "What a lovely thing to do! " + "Cats bring so much joy and comfort to a home. " * 12
    with MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64)) as bank:
        bank.add_turn("Ann", story * 3, reply, at="2023-05-01T10:00")
        Summarizer(bank, model, "en", config=SummaryConfig(call_timeout_s=None)).summarize_user(
            "Ann", "2023-05-02"
        )
    day_prompt = model.prompts[0]
    assert (story * 3).strip() in day_prompt  # the user's words, whole
    assert "What a lovely thing to do!" in day_prompt and day_prompt.count("Cats bring so much joy") <= 5
    assert "…" in day_prompt  # the cut is marked


def test_a_refused_answer_is_retried_at_once_saying_what_was_wrong(tmp_path) -> None:  # type: ignore[no-untyped-def]
    waits: list[float] = []
    model = ScriptedChatModel(
        responses=[
            "That sounds lovely! You must be so happy with your new cat.",
            "The user adopted a cat called Miso.",
        ]
    )
    with MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64)) as bank:
        bank.add_turn("Ann", "I adopted a cat called Miso.", "Lovely!", at="2023-05-01T10:00")
        summarizer = Summarizer(
            bank, model, "en", config=SummaryConfig(call_timeout_s=None), sleep=waits.append
        )
        report = summarizer.summarize_user("Ann", "2023-05-02")
    assert report.ok and waits == []  # no backoff for a junk answer: only API errors wait
    assert "in the third person" in model.prompts[1] and "in the third person" not in model.prompts[0]
    assert [a.outcome.split(":")[0] for a in report.attempts[:2]] == ["OutputParserException", "ok"]


def test_a_call_that_ran_out_of_time_is_not_retried_at_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = ScriptedChatModel(responses=[SummaryTimeoutError("the LLM call ran past 1 s (call_timeout_s)")])
    with MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64)) as bank:
        bank.add_turn("Ann", "I adopted a cat called Miso.", "Lovely!", at="2023-05-01T10:00")
        report = Summarizer(bank, model, "en", sleep=lambda _s: None).summarize_user("Ann", "2023-05-02")
        assert [f.kind for f in report.failed] == ["daily_summary"]  # left due for the next run
        assert "1 attempt(s)" in report.failed[0].error
        assert [a.task for a in report.attempts].count("daily_events") == 1
        assert len(bank.history("Ann")) == 1


def test_a_call_that_never_answers_is_given_up_at_the_deadline_and_on_stop(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A server that takes the call and sends nothing: the deadline only saw streamed tokens,
    so /summarize blocked and the app's exit hung for as long as the connection stayed open."""
    import threading
    import time

    model = EchoChatModel(mode="hang")
    with MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64)) as bank:
        bank.add_turn("Ann", "I adopted a cat called Miso.", "Lovely!", at="2023-05-01T10:00")
        summarizer = Summarizer(bank, model, "en", config=SummaryConfig(call_timeout_s=0.5, max_attempts=1), sleep=lambda _s: None)
        started = time.monotonic()
        report = summarizer.summarize_user("Ann", "2023-05-02")
        assert time.monotonic() - started < 10
        assert report.failed and "call_timeout_s" in report.failed[0].error
        patient = Summarizer(bank, model, "en", config=SummaryConfig(call_timeout_s=None, max_attempts=1))
        threading.Timer(0.5, patient.stopped.set).start()
        started = time.monotonic()
        try:
            patient.summarize_user("Ann", "2023-05-02")
        except Exception as e:  # stopped: the summariser says so
            assert "stopped" in str(e)
        assert time.monotonic() - started < 10
        assert len(bank.history("Ann")) == 1
    model.release()
