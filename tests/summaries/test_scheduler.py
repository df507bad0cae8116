"""RolloverScheduler: a new day queues the finished days in the background; chat never waits."""

from __future__ import annotations

import threading

from memory_bank import MemoryKind
from memory_bank.summaries import RolloverScheduler, Summarizer, SummaryConfig
from tests.summaries.conftest import ScriptedChatModel

CFG = SummaryConfig(backoff_s=0, call_timeout_s=None, max_attempts=1)


def chat(bank, scheduler, day: str, text: str, user: str = "Emily") -> bool:  # type: ignore[no-untyped-def]
    bank.add_turn(user, text, "Nice.", at=f"{day}T10:00:00")
    return scheduler.on_turn(user, day)


def test_first_turn_of_a_later_day_summarises_the_finished_day(bank, fake) -> None:  # type: ignore[no-untyped-def]
    with RolloverScheduler(Summarizer(bank, fake, "en", config=CFG)) as scheduler:
        assert chat(bank, scheduler, "2023-04-27", "I adopted MISO.")  # first sight: checks for due days
        assert scheduler.wait(5)
        assert fake.prompts == []  # nothing was over yet
        assert not chat(bank, scheduler, "2023-04-27", "More about MISO.")  # same day: nothing to do
        assert chat(bank, scheduler, "2023-04-28", "I baked BREAD.")  # the 27th is over
        assert scheduler.wait(5)
        assert bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-04-27") is not None
        assert bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-04-28") is None  # still going on
        assert "MISO" in bank.profile("Emily")["global_summary"]
        assert scheduler.reports["Emily"].days == ["2023-04-27"]


def test_a_restarted_app_catches_up_on_first_sight(bank, fake) -> None:  # type: ignore[no-untyped-def]
    for day in ("2023-04-25", "2023-04-26"):
        bank.add_turn("Emily", f"Diary of {day} with ZEBRA.", "Ok.", at=f"{day}T09:00")
    with RolloverScheduler(Summarizer(bank, fake, "en", config=CFG)) as scheduler:
        assert chat(bank, scheduler, "2023-04-28", "Back again.")
        scheduler.wait(5)
    assert scheduler.reports["Emily"].days == ["2023-04-25", "2023-04-26"]


def test_chat_never_waits_and_jobs_are_deduplicated(bank) -> None:  # type: ignore[no-untyped-def]
    gate = threading.Event()
    model = ScriptedChatModel(gate=gate)
    scheduler = RolloverScheduler(Summarizer(bank, model, "en", config=CFG))
    for day in ("2023-04-25", "2023-04-26"):
        bank.add_turn("Emily", "hello", "hi", at=f"{day}T09:00")
    assert scheduler.on_turn("Emily", "2023-04-27")  # runs, and blocks in the LLM call
    assert model.entered.wait(5)
    assert scheduler.on_turn("Emily", "2023-04-28")  # queued behind the running job
    assert not scheduler.submit("Emily")  # one is already queued for Emily: deduplicated
    assert scheduler.submit("Ann")  # other users queue independently
    assert scheduler.pending() == 3
    # None of this waited for the LLM: its call is still held at the gate, so a call that had
    # waited for it could not have returned (no clock involved).
    assert not gate.is_set() and scheduler.pending() == 3
    gate.set()
    assert scheduler.wait(10)
    scheduler.close()
    assert bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-04-26") is not None
    assert not scheduler.on_turn("Emily", "2023-04-30")  # closed: ignored, no error


def test_errors_never_reach_the_chat(bank, caplog) -> None:  # type: ignore[no-untyped-def]
    broken = ScriptedChatModel(default=lambda p, n: (_ for _ in ()).throw(RuntimeError("boom")))
    summarizer = Summarizer(bank, broken, "en", config=CFG)
    with RolloverScheduler(summarizer) as scheduler:
        assert not scheduler.on_turn("Emily", "not a date")  # bad input: logged, False
        bank.add_turn("Emily", "hello", "hi", at="2023-04-27T09:00")
        assert scheduler.on_turn("Emily", "2023-04-28")
        assert scheduler.wait(5)
        assert not scheduler.reports["Emily"].ok  # failures are in the report, turns are intact
        assert len(bank.history("Emily")) == 1

        def explode(*a, **k):  # type: ignore[no-untyped-def]
            raise RuntimeError("database on fire")

        summarizer.summarize_user = explode  # type: ignore[method-assign]
        assert scheduler.on_turn("Emily", "2023-04-29")
        assert scheduler.wait(5)
    assert "database on fire" in caplog.text
