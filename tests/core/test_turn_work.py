"""A chat turn's memory work does not grow with the user's history.

Counted, not timed: SQLite's progress handler counts the virtual-machine steps of every
statement, so a read that walks all of a user's rows shows up as work proportional to the
history, whatever the machine's load. The day's forgetting pass (on a user's first write of
the day, a few array operations per memory) is run first: it is a daily cost, not a turn's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from memory_bank import Memory, MemoryKind
from memory_bank.config import SELECTIVE_FORGETTING


def _fill(bank: Any, n: int) -> None:
    """``n`` turns of one user over n/10 days, with the global layers a prompt reads."""
    rec = bank.user("Ann", create=True)
    mems = [
        Memory(memory_id=f"Ann_d{i // 10}_{i % 10}", user="Ann", kind=MemoryKind.TURN,
               date=f"2020-{1 + (i // 10) // 28 % 12:02d}-{1 + (i // 10) % 28:02d}" if i < 3000 else "2021-01-01",
               turn=i, text=f"turn {i} about hiking", query=f"turn {i}", response="ok")
        for i in range(n)
    ]  # fmt: skip
    bank.storage.add_memories(rec.id, mems, None, bank.encoder_name)
    bank.set_layer("Ann", MemoryKind.GLOBAL_SUMMARY, "Ann hikes.")
    bank.set_layer("Ann", MemoryKind.GLOBAL_PORTRAIT, "Cheerful.")


def _steps(bank: Any, fn: Callable[[], object]) -> int:
    """SQLite VM steps (in units of 100) that ``fn`` makes on this thread's connection."""
    conn: sqlite3.Connection = bank.storage._conn()
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0

    conn.set_progress_handler(tick, 100)
    try:
        fn()
    finally:
        conn.set_progress_handler(None, 0)
    return count[0]


def test_reading_what_a_reply_needs_costs_the_same_at_any_history_length(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    small, large = make_bank(tmp_path / "small"), make_bank(tmp_path / "large")
    _fill(small, 200)
    _fill(large, 6000)

    def reply_reads(bank: Any) -> Callable[[], object]:
        ids = [m.memory_id for m in bank.storage.memories(bank.user("Ann").id, rowids=[3, 7])]
        bank.forget("Ann", now="2022-01-01")  # the day's pass

        def run() -> None:
            assert bank.has_memories("Ann")
            assert bank.profile("Ann")["global_summary"] == "Ann hikes."
            bank.reinforce("Ann", ids, now="2022-01-01")
            bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2020-01-01")

        return run

    a, b = _steps(small, reply_reads(small)), _steps(large, reply_reads(large))
    # 30x the history: the same work, give or take the depth of a B-tree.
    assert b <= 2 * a + 5, (a, b)


def test_storing_a_turn_costs_the_same_at_any_history_length(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    small, large = make_bank(tmp_path / "small"), make_bank(tmp_path / "large")
    _fill(small, 200)
    _fill(large, 6000)
    small.forget("Ann")  # the day's pass
    large.forget("Ann")
    a = _steps(small, lambda: small.add_turn("Ann", "I went hiking again.", "Nice!", at="2021-01-01T10:00"))
    b = _steps(large, lambda: large.add_turn("Ann", "I went hiking again.", "Nice!", at="2021-01-01T10:00"))
    assert b <= 2 * a + 5, (a, b)


def _write_transactions(bank: Any, fn: Callable[[], object]) -> int:
    """Write transactions (``BEGIN IMMEDIATE``) that ``fn`` opens on this thread's connection."""
    conn: sqlite3.Connection = bank.storage._conn()
    begun: list[str] = []
    conn.set_trace_callback(lambda sql: begun.append(sql) if sql.startswith("BEGIN IMMEDIATE") else None)
    try:
        fn()
    finally:
        conn.set_trace_callback(None)
    return len(begun)


def test_a_reply_stores_its_turn_reinforces_and_marks_summaries_stale_in_one_transaction(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(tmp_path / "one")
    _fill(bank, 200)
    bank.add_turn("Ann", "Morning walk.", "Lovely.", at="2021-01-01T08:00")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "A walk.", date="2021-01-01")
    used = bank.storage.memories(bank.user("Ann").id, rowids=[3, 7, 9])  # what a search returned
    assert len(used) == 3 and all(m.strength == 1 for m in used)
    gone = used[2]
    bank.delete_memory("Ann", gone.memory_id)  # deleted while the reply was written: not reinforced

    def reply() -> None:
        bank.add_turn("Ann", "I went hiking again.", "Nice!", at="2021-01-01T10:00", recalled=used)

    assert _write_transactions(bank, reply) == 1
    stored = {m.memory_id: m for m in bank.storage.memories(bank.user("Ann").id)}
    assert [stored[m.memory_id].strength for m in used[:2]] == [2, 2]  # reinforced on the turn's day
    assert [stored[m.memory_id].last_recall_date for m in used[:2]] == ["2021-01-01"] * 2
    assert used[0].strength == 2 and used[0].last_recall_date == "2021-01-01"  # the caller's copies too
    assert gone.memory_id not in stored
    summary = bank.layer("Ann", MemoryKind.DAILY_SUMMARY, "2021-01-01")
    assert summary is not None and summary.stale  # the day has a turn its summary does not cover
    # Recalled again the same day: at most once a day, as reinforce() does.
    bank.add_turn("Ann", "And again.", "Great!", at="2021-01-01T11:00", recalled=used[:2])
    again = bank.storage.memories(bank.user("Ann").id, rowids=[3, 7])
    assert [m.strength for m in again] == [2, 2]


def test_a_search_after_a_new_turn_costs_the_same_at_any_history_length(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With the default forgetting a search tells forgotten from live memories at its ``now``:
    after a new turn it examines the new turn, not the history again."""
    # The default setting with a time scale long enough that the whole history is still live.
    slow = {**SELECTIVE_FORGETTING, "tau": 3650.0}
    small, large = make_bank(tmp_path / "small", forgetting=slow), make_bank(tmp_path / "large", forgetting=slow)
    for bank, n in ((small, 200), (large, 6000)):
        _fill(bank, n)
        bank.add_turn("Ann", "I went hiking yesterday.", "Nice!")  # the day's first write: its pass
        bank.search("Ann", "hiking", k=3)  # loads the index and the live set
        bank.add_turn("Ann", "I went hiking again.", "Nice!")
    a = _steps(small, lambda: small.search("Ann", "hiking again", k=3))
    b = _steps(large, lambda: large.search("Ann", "hiking again", k=3))
    assert b <= 2 * a + 5, (a, b)


def test_a_warm_search_takes_the_counters_with_the_user_and_still_sees_another_process_write(make_bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A search reads the user's record and, with it, the counters that say whether the cached
    index is current: one read, not two. A write by another process (another server on the
    store) moves the counters, so the next search loads the new memory."""
    bank, other = make_bank(tmp_path / "shared"), make_bank(tmp_path / "shared")
    bank.add_turn("Ann", "I went hiking yesterday.", "Nice!")
    bank.search("Ann", "hiking", k=3)  # loads the index
    statements: list[str] = []
    conn: sqlite3.Connection = bank.storage._conn()
    conn.set_trace_callback(statements.append)
    try:
        assert bank.search("Ann", "hiking", k=3)
    finally:
        conn.set_trace_callback(None)
    user_reads = [s for s in statements if "FROM users" in s and "JOIN" not in s]
    assert len(user_reads) == 1 and "tiers" in user_reads[0], statements
    other.add_turn("Ann", "Just now I adopted a parrot named Kiwi.", "Wow!")
    hits = bank.search("Ann", "my parrot Kiwi", k=1)
    assert hits and "Kiwi" in hits[0].memory.text
