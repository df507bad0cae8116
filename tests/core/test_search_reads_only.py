"""A search never writes: with forgetting on, which memories are forgotten follows from the
clock (stored strength, last recall, kind and content weight at ``now``), so a search works on
a read-only store, takes no write lock, and ranks as it does once the day's pass has persisted
what the clock decided. The pass itself runs on writes (a turn added, a recall)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from memory_bank import MemoryBank
from memory_bank.config import SELECTIVE_FORGETTING
from memory_bank.embeddings import HashingEncoder
from memory_bank.errors import MemoryBankError
from memory_bank.stores.sqlite import DB_FILENAME, SQLiteStorage

QUERIES = ("what does Miso like to eat", "the cello on Sundays", "thanks, see you")
NOW = "2023-06-30"


def _fill(store: Path, clock) -> None:  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(store, clock=clock, encoder_instance=HashingEncoder(256), forgetting=SELECTIVE_FORGETTING)
    bank.add_turn("Ann", "Thanks, bye!", "Bye!", at="2023-05-01T09:00")  # small talk: tau 1.75 days
    bank.add_turn("Ann", "My cat Miso likes tuna and hates rain.", "Sweet.", at="2023-05-01T09:01")  # personal: 14
    bank.add_turn("Ann", "What do you think about jazz?", "I like it.", at="2023-06-20T10:00")  # chat: 7
    bank.add_turn("Ann", "I play the cello on Sundays with my aunt.", "Lovely.", at="2023-06-29T10:00")
    bank.close()


def _rankings(bank: MemoryBank) -> list[list[tuple[str, bool, float]]]:
    return [
        [(h.memory.memory_id, h.memory.archived, round(h.score, 6)) for h in bank.search("Ann", q, k=4, now=NOW)]
        for q in QUERIES
    ]


def _open(store: Path, storage: SQLiteStorage | None = None) -> MemoryBank:
    bank = MemoryBank(
        None, storage=storage, encoder=HashingEncoder(256), store=str(store), forgetting=SELECTIVE_FORGETTING
    )
    return bank


def test_a_search_on_a_read_only_store_ranks_as_on_a_writable_one(tmp_path, clock, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    _fill(store, clock)
    with _open(store) as writable:
        want = _rankings(writable)
        assert writable.user("Ann").last_forget_date == "2023-05-01"  # the searches persisted nothing
        assert not any(m.archived for m, _ in writable.memories("Ann"))
    # Forgetting decided something: the two turns of 05-01 are forgotten at NOW, still ranked.
    assert {mid for ranking in want for mid, cold, _ in ranking if cold} == {"Ann_2023-05-01_0", "Ann_2023-05-01_1"}
    with monkeypatch.context() as m:  # the files look read-only (root could write anyway): mode=ro
        m.setattr(os, "access", lambda path, mode, **kw: not mode & os.W_OK)
        storage = SQLiteStorage(store)
    assert storage.read_only
    with _open(store, storage) as read_only:
        assert _rankings(read_only) == want
        with pytest.raises(MemoryBankError):
            read_only.add_turn("Ann", "This cannot be stored.", "No.")  # the store really is read-only
    with _open(store) as writable:  # the day's pass persists what the clock decided: same ranking
        assert len(writable.forget("Ann", now=NOW)["Ann"].forgotten) == 2
        assert _rankings(writable) == want


def test_a_search_takes_no_write_lock(tmp_path, clock) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    _fill(store, clock)
    with _open(store) as bank:
        want = _rankings(bank)
    writer = sqlite3.connect(store / DB_FILENAME, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with _open(store, SQLiteStorage(store, busy_timeout_s=0.2)) as bank:
            assert _rankings(bank) == want  # reads are served while the lock is held
            with pytest.raises(MemoryBankError) as refused:  # a recall writes, and cannot while it is held
                bank.search("Ann", QUERIES[0], k=1, now=NOW, reinforce=True)
            # said as what it is, not SQLite's "database is locked"
            assert "another program held the store" in str(refused.value) and "0.2 s wait" in str(refused.value)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
