"""Background summaries a user need not wait for: status for a UI, chat replies first on a shared
model, a stop at shutdown that loses nothing, and a record of every call."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from pydantic import Field

from memory_bank import MemoryKind
from memory_bank.model_lock import ModelLock, PreemptedError, background_calls
from memory_bank.summaries import RolloverScheduler, Summarizer, SummaryConfig, due_days
from tests.summaries.conftest import ScriptedChatModel, add_days

CFG = SummaryConfig(backoff_s=0, call_timeout_s=None, max_attempts=2)


class LockedChatModel(ScriptedChatModel):
    """A fake local model: one :class:`ModelLock`, checked between tokens as llama.cpp's is;
    each token waits on ``tick`` (when set) so a test can hold a call in the middle."""

    model_lock: Any = Field(default_factory=ModelLock)
    tick: Any = None  # a threading.Semaphore released once per token, or None: no wait
    streamed: Any = Field(default_factory=threading.Event)  # set at the first token of a call
    stall_at: int | None = None  # this call (1-based) stalls at its first token until ``resume``
    stalled: Any = Field(default_factory=threading.Event)
    resume: Any = Field(default_factory=threading.Event)

    def _stream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:  # fmt: skip
        with self.model_lock:
            answer = self._answer(messages)
            if len(self.prompts) == self.stall_at:
                self.stalled.set()
                assert self.resume.wait(10)
            for token in re.split(r"(?<=\s)", answer):
                self.streamed.set()
                if self.tick is not None:
                    assert self.tick.acquire(timeout=10)
                self.model_lock.check()
                if run_manager:
                    run_manager.on_llm_new_token(token)
                yield ChatGenerationChunk(message=AIMessageChunk(content=token))


def test_status_goes_queued_running_done_with_every_call_recorded(bank, fake) -> None:  # type: ignore[no-untyped-def]
    add_days(bank)
    with RolloverScheduler(Summarizer(bank, fake, "en", config=CFG)) as scheduler:
        assert scheduler.status("Emily").state == "idle"
        assert scheduler.submit("Emily", "2023-04-29")  # as at sign-in after an import
        assert scheduler.wait(10)
        status = scheduler.status("Emily")
    assert status.state == "done" and (status.done, status.total) == (3, 3)  # two days, then the globals
    assert status.report is not None and status.report.ok and len(status.report.written) == 6
    attempts = status.report.attempts
    assert [a.task for a in attempts].count("daily_events") == 2 and all(a.outcome == "ok" for a in attempts)
    assert all(a.prompt_tokens > 20 and a.output_tokens > 3 for a in attempts)
    assert due_days(bank, "Emily", "2023-04-29") == []


def test_summarise_now_in_the_background_includes_today(bank, fake) -> None:  # type: ignore[no-untyped-def]
    add_days(bank, days={"2023-05-01": ["I adopted a cat called MISO today."]})  # today (the bank's clock)
    with RolloverScheduler(Summarizer(bank, fake, "en", config=CFG)) as scheduler:
        assert scheduler.submit("Emily")  # finished days only: today is not over
        scheduler.wait(10)
        assert bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-05-01") is None
        assert scheduler.submit("Emily", include_today=True)
        scheduler.wait(10)
        assert scheduler.status("Emily").total == 3
    assert "MISO" in bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-05-01").text  # type: ignore[union-attr]
    assert "MISO" in bank.profile("Emily")["global_summary"]


def test_a_chat_reply_goes_first_and_the_summary_call_is_redone(bank) -> None:  # type: ignore[no-untyped-def]
    add_days(bank, days={"2023-04-27": ["I adopted a cat called MISO today."]})
    tick = threading.Semaphore(0)
    model = LockedChatModel(tick=tick)
    scheduler = RolloverScheduler(Summarizer(bank, model, "en", config=CFG))
    assert scheduler.submit("Emily")
    assert model.streamed.wait(5)  # the background call holds the model, mid-answer
    replies: list[str] = []
    chat = threading.Thread(target=lambda: replies.append("".join(str(c.content) for c in model.stream("hi"))))
    chat.start()  # a chat reply (foreground) now waits for the model...
    while not model.model_lock.foreground_waiting:
        time.sleep(0.01)
    tick.release()  # ...and the background call gives way at its next token
    model.tick = None  # from now on tokens flow freely
    tick.release(100)
    chat.join(10)
    assert replies and replies[0].startswith("Note")  # the chat got its answer
    assert scheduler.wait(10)
    report = scheduler.status("Emily").report
    scheduler.close()
    assert report is not None and report.ok
    outcomes = [(a.task, a.attempt, a.outcome) for a in report.attempts]
    assert ("daily_events", 1, "preempted") in outcomes and ("daily_events", 1, "ok") in outcomes
    assert bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-04-27") is not None


def test_a_foreground_caller_never_yields_and_a_background_one_waits_its_turn() -> None:
    lock = ModelLock()
    with lock:
        lock.check()  # foreground: never preempted
    order: list[str] = []
    lock.acquire()  # a chat reply runs
    waiting = threading.Event()

    def background() -> None:
        with background_calls():
            waiting.set()
            with lock:
                order.append("background")

    thread = threading.Thread(target=background)
    thread.start()
    waiting.wait(5)
    order.append("chat done")
    lock.release()
    thread.join(5)
    assert order == ["chat done", "background"]
    with background_calls():
        lock.acquire()  # a background call runs...
    chat = threading.Thread(target=lambda: (lock.acquire(), lock.release()))
    chat.start()  # ...and a chat reply comes
    while not lock.foreground_waiting:
        time.sleep(0.01)
    with background_calls(), pytest.raises(PreemptedError):
        lock.check()
    lock.release()
    chat.join(5)
    assert not chat.is_alive() and not lock.foreground_waiting


def test_closing_at_shutdown_stops_mid_run_and_loses_nothing(bank) -> None:  # type: ignore[no-untyped-def]
    add_days(bank, days={f"2023-04-{d}": [f"Day {d}: I walked to the PARK."] for d in (24, 25, 26, 27)})
    model = LockedChatModel(stall_at=3)  # the first day's two layers, then a stall mid-run
    summarizer = Summarizer(bank, model, "en", config=CFG)
    scheduler = RolloverScheduler(summarizer)
    assert scheduler.submit("Emily")
    assert model.stalled.wait(10)
    closer = threading.Thread(target=lambda: scheduler.close(wait=False))
    closer.start()
    while not summarizer.stopped.is_set():
        time.sleep(0.01)
    model.resume.set()  # the stalled call sees the stop at its next token
    closer.join(10)
    assert not closer.is_alive()  # shutdown did not wait for the remaining days
    assert len(bank.history("Emily")) == 4  # every turn kept
    done = [
        d
        for d in ("2023-04-24", "2023-04-25", "2023-04-26", "2023-04-27")
        if d not in due_days(bank, "Emily")
    ]
    assert done == ["2023-04-24"]  # stopped mid-run: the rest stays due for the next start
    for day in done:  # what was written is whole
        assert bank.layer("Emily", MemoryKind.DAILY_SUMMARY, day) is not None
    assert scheduler.status("Emily").state == "idle"
