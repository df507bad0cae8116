"""A new SQLite store is made of larger pages (``PAGE_SIZE``: a restart reads a user's vector
blocks in fewer overflow pages); a store created before keeps its own page size and opens,
reads, writes and restarts as before."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import memory_bank.index as index_module
from memory_bank import MemoryBank, vector_blocks
from memory_bank.embeddings import HashingEncoder
from memory_bank.stores import sqlite as sqlite_store


def _page_size(store: Path) -> int:
    conn = sqlite3.connect(f"file:{store / sqlite_store.DB_FILENAME}?mode=ro", uri=True)
    try:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


def _round_trip(store: Path, clock: Any) -> list[str]:
    """Fill a store, search it, and search it again after a restart (from its vector blocks)."""
    with MemoryBank.open(store, clock=clock, encoder_instance=HashingEncoder(64)) as bank:
        for i in range(40):
            bank.add_turn(
                "Ann",
                f"My sister Anna went hiking near the lake ({i}).",
                "Lovely!",
                at=f"2023-05-{1 + i // 8:02d}T10:{i:02d}",
            )
            bank.add_turn(
                "Ann", f"我的猫叫米索 ({i})。", "好可爱！", at=f"2023-05-{1 + i // 8:02d}T11:{i:02d}"
            )
        first = [h.memory.memory_id for h in bank.search("Ann", "Where did my sister go hiking?", k=5)]
    with MemoryBank.open(store, clock=clock, encoder_instance=HashingEncoder(64)) as bank:
        again = [h.memory.memory_id for h in bank.search("Ann", "Where did my sister go hiking?", k=5)]
        assert bank.storage._rows("SELECT count(*) FROM vector_blocks")[0][0] > 0  # type: ignore[attr-defined]
        assert len(bank.history("Ann")) == 80
    assert again == first and first
    return first


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_blocks, "BLOCK", 16)  # a test store fills several blocks
    monkeypatch.setattr(index_module, "SEAL_MIN", 16)


def test_a_new_store_has_large_pages_and_round_trips(tmp_path: Path, clock: Any) -> None:
    assert sqlite_store.PAGE_SIZE > 4096
    _round_trip(tmp_path / "new", clock)
    assert _page_size(tmp_path / "new") == sqlite_store.PAGE_SIZE


def test_a_store_with_the_old_page_size_keeps_it_and_works(
    tmp_path: Path, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:
        m.setattr(sqlite_store, "PAGE_SIZE", 4096)  # what stores were created with before
        MemoryBank.open(tmp_path / "old", clock=clock, encoder_instance=HashingEncoder(64)).close()
    assert _page_size(tmp_path / "old") == 4096
    ranked = _round_trip(tmp_path / "old", clock)
    assert _page_size(tmp_path / "old") == 4096  # opening and writing never rewrites the file
    assert ranked == _round_trip(tmp_path / "new", clock)  # the same answers at either size
