"""Background summaries behind every adapter that stores memories: the classic memory, the
memory tools and the LangGraph store write turns, and with ``summarizer=`` the finished days get
their event summary and portrait, then the global ones, as SiliconFriend's chat does."""

from __future__ import annotations

from typing import Any

import pytest

from memory_bank import MemoryBank, MemoryKind
from memory_bank.langchain import MemoryBankStore, as_memory, memory_tools
from memory_bank.summaries import RolloverScheduler, SummaryConfig, background_summaries
from tests.summaries.conftest import ScriptedChatModel

CONFIG = SummaryConfig(backoff_s=0, call_timeout_s=None, max_attempts=1)


@pytest.fixture
def scheduler(bank: MemoryBank) -> Any:
    with background_summaries(bank, ScriptedChatModel(), "en", config=CONFIG) as scheduler:
        yield scheduler


def _summaries(bank: MemoryBank, user: str) -> list[str]:
    return [m.text for m, _ in bank.memories(user, kinds=[MemoryKind.DAILY_SUMMARY], include_archived=False)]


def test_background_summaries_builds_a_scheduler_over_the_chat_model(bank: MemoryBank) -> None:
    model = ScriptedChatModel()
    with background_summaries(bank, model, "zh", config=CONFIG) as scheduler:
        assert isinstance(scheduler, RolloverScheduler)
        assert scheduler.summarizer.chat_model is model and scheduler.summarizer.language == "zh"
        assert scheduler.summarizer.bank is bank


def test_classic_memory_summarises_each_finished_day(
    bank: MemoryBank, clock: Any, scheduler: RolloverScheduler
) -> None:
    memory = as_memory(bank, "Emily", summarizer=scheduler)
    memory.save_context({"input": "I adopted a cat called MISO."}, {"response": "Lovely!"})
    assert scheduler.wait(10) and _summaries(bank, "Emily") == []  # the day is not over yet
    clock.advance(days=1)
    memory.save_context({"input": "Good morning!"}, {"response": "Morning!"})
    assert scheduler.wait(10)
    assert any("MISO" in text for text in _summaries(bank, "Emily"))
    assert "MISO" in memory.load_memory_variables({"input": "hi"})["event_summary"]


def test_without_a_summarizer_no_summaries_are_made(bank: MemoryBank, clock: Any) -> None:
    memory = as_memory(bank, "Emily")
    memory.save_context({"input": "I adopted a cat called MISO."}, {"response": "Lovely!"})
    clock.advance(days=1)
    memory.save_context({"input": "Good morning!"}, {"response": "Morning!"})
    assert _summaries(bank, "Emily") == [] and bank.profile("Emily")["global_summary"] == ""


def test_saved_notes_from_the_tools_are_summarised(
    bank: MemoryBank, clock: Any, scheduler: RolloverScheduler
) -> None:
    _search, save, _forget = memory_tools(bank, "Emily", summarizer=scheduler)
    save.invoke({"content": "My sister MARTA moves to Lisbon in June."})
    clock.advance(days=1)
    save.invoke({"content": "I start a pottery class today."})
    assert scheduler.wait(10)
    assert any("MARTA" in text for text in _summaries(bank, "Emily"))


def test_deleting_through_the_tools_resummarises_the_day(
    bank: MemoryBank, clock: Any, scheduler: RolloverScheduler
) -> None:
    _search, save, forget = memory_tools(bank, "Emily", summarizer=scheduler)
    saved = save.invoke({"content": "My sister MARTA moves to Lisbon in June."})
    save.invoke({"content": "And my secret word is ZEBRA, do not tell anyone."})
    clock.advance(days=1)
    save.invoke({"content": "I start a pottery class today."})
    assert scheduler.wait(10)
    assert any("ZEBRA" in text for text in _summaries(bank, "Emily"))
    [pin] = [m for m in bank.history("Emily") if "ZEBRA" in m.query]
    forget.invoke({"memory_id": pin.memory_id})
    assert scheduler.wait(10)
    assert saved.startswith("Saved memory")
    assert not any("ZEBRA" in text for text in _summaries(bank, "Emily"))  # the summary went with it
    assert any("MARTA" in text for text in _summaries(bank, "Emily"))  # and was made again


def test_store_puts_are_summarised(bank: MemoryBank, clock: Any, scheduler: RolloverScheduler) -> None:
    store = MemoryBankStore(bank, summarizer=scheduler)
    store.put(("memories", "Emily"), "sister", {"content": "My sister MARTA moves to Lisbon."})
    clock.advance(days=1)
    store.put(("memories", "Emily"), "class", {"content": "I start a pottery class today."})
    assert scheduler.wait(10)
    assert any("MARTA" in text for text in _summaries(bank, "Emily"))
    assert "MARTA" in bank.profile("Emily")["global_summary"]


def test_store_get_sees_only_live_retrievable_items(bank: MemoryBank) -> None:
    store = MemoryBankStore(bank)
    store.put(("memories", "Emily"), "sister", {"content": "My sister moves to Lisbon."})
    store.put(("memories", "Emily"), "class", {"content": "Pottery class on Mondays."})
    assert store.get(("memories", "Emily"), "sister").value == {"content": "My sister moves to Lisbon."}
    bank.archive("Emily", ["sister"])  # forgotten
    assert store.get(("memories", "Emily"), "sister") is None
    assert store.get(("memories", "Emily"), "class") is not None
    assert store.get(("memories", "Frank"), "class") is None  # another user's key is not visible
