"""MemoryBank.update_memory (edit by id) and reinforcement at most once a day (paper §2.3: the
strength counts the days a memory was recalled on, not how often it was retrieved)."""

from __future__ import annotations

import dataclasses

import pytest

from memory_bank import MemoryBank, MemoryKind, MemoryNotFoundError, UserNotFoundError
from tests.conftest import FixedClock


def _strength(bank: MemoryBank, user: str, memory_id: str) -> int:
    return {m.memory_id: m.strength for m, _ in bank.memories(user)}[memory_id]


def test_seven_retrievals_in_one_day_are_one_recall(bank: MemoryBank, clock: FixedClock) -> None:
    m = bank.add_turn("Ann", "I love hiking in the Alps.", "Wonderful.", at="2023-04-28T10:00")
    for _ in range(7):
        [hit] = bank.search("Ann", "hiking", k=1, reinforce=True)
    assert hit.memory.strength == 2 and _strength(bank, "Ann", m.memory_id) == 2
    clock.advance(days=1)
    bank.search("Ann", "hiking", k=1, reinforce=True)
    bank.reinforce("Ann", [m.memory_id])
    assert _strength(bank, "Ann", m.memory_id) == 3  # a second recall day
    bank.reinforce("Ann", [m.memory_id], now="2023-04-30")  # an earlier day than the last recall
    assert _strength(bank, "Ann", m.memory_id) == 3


def test_a_recall_never_reaches_the_memory_that_took_a_deleted_ones_rowid(bank: MemoryBank) -> None:
    """A chat reply reinforces the memories it retrieved seconds before: one deleted meanwhile
    leaves its rowid to the next memory stored (SQLite reuses the largest rowid), which must not be
    reinforced, nor brought back from the cold tier, in its place."""
    bank.add_turn("Ann", "I love hiking in the Alps.", "Wonderful.", at="2023-05-01T09:00")
    old = bank.add_turn("Ann", "My cat is called Miso.", "Cute!", at="2023-05-01T10:00")
    [hit] = bank.search("Ann", "Miso", k=1, kinds=[MemoryKind.TURN])
    assert hit.memory.memory_id == old.memory_id
    recalled = [hit.memory, dataclasses.replace(hit.memory, archived=True)]  # also as the cold tier finds it
    bank.delete_memory("Ann", old.memory_id)
    new = bank.add_turn("Ann", "I start a new job tomorrow.", "Good luck!", at="2023-05-01T11:00")
    assert new.rowid == old.rowid  # the deleted memory's rowid, reused
    bank.archive("Ann", [new.memory_id], hidden=False)  # forgotten, as the curve forgets
    bank.reinforce("Ann", [old.memory_id], _memories=recalled)
    [stored] = bank.storage.memories_by_ids(bank.user("Ann").id, [new.memory_id])
    assert (stored.strength, stored.last_recall_date, stored.archived) == (1, None, True)


def test_update_memory_re_embeds_keeps_strength_and_stales_the_day(bank: MemoryBank) -> None:
    m = bank.add_turn("Ann", "My cat is called Miso.", "Cute!", at="2023-04-30T10:00")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann talked about her cat Miso.", date="2023-04-30")
    bank.reinforce("Ann", [m.memory_id])
    updated = bank.update_memory("Ann", m.memory_id, text="My cat is called Tiger.", extra={"source": "edit"})
    assert (updated.memory_id, updated.date, updated.strength) == (m.memory_id, "2023-04-30", 2)
    [stored] = bank.history("Ann")
    assert (stored.text, stored.query, stored.response, stored.extra) == (
        "My cat is called Tiger.", "My cat is called Tiger.", "", {"source": "edit"}
    )
    assert bank.search("Ann", "Tiger", k=1)[0].memory.memory_id == m.memory_id  # the new text is indexed
    assert bank.search("Ann", "Miso", k=2, kinds=[MemoryKind.TURN])[0].memory.text == "My cat is called Tiger."
    summary = bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2023-04-30")
    assert summary is not None and summary.stale  # the day's summary is regenerated from the edit
    assert bank.update_memory("Ann", m.memory_id, extra={"x": 1}).text == "My cat is called Tiger."


def test_update_memory_of_something_missing_is_an_error(bank: MemoryBank) -> None:
    bank.add_turn("Ann", "hello", "hi")
    with pytest.raises(MemoryNotFoundError, match="'nope'"):
        bank.update_memory("Ann", "nope", text="x")
    with pytest.raises(UserNotFoundError, match="'Nobody'"):
        bank.update_memory("Nobody", "Ann_2023-05-01_0", text="x")
    assert bank.history("Ann")[0].text == "hello\nhi"
