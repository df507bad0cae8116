"""Attack: a memory edited, deleted or hidden by another server is never found by its old words
there, in this server's cached partition, after an LRU eviction or after a restart, with the
lexical snapshot and the vector blocks switched on (thresholds lowered so a small store uses them)."""

from __future__ import annotations

import pytest

import memory_bank.index as index_module
from memory_bank import vector_blocks


@pytest.fixture(autouse=True)
def _fast_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_blocks, "BLOCK", 8)
    monkeypatch.setattr(index_module, "SEAL_MIN", 8)
    monkeypatch.setattr(index_module, "SNAPSHOT_MIN", 1)


SECRET = "the alarm code is zebra4471"


def _hits(bank, user: str, query: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [r.memory.memory_id for r in bank.search(user, query, k=5) if r.score > 0]


@pytest.mark.parametrize("change", ["edit", "delete", "hide"])
def test_old_words_are_never_found_after_another_server_changes_a_memory(make_bank, change: str) -> None:  # type: ignore[no-untyped-def]
    a = make_bank(max_cached_users=1)
    for i in range(40):
        a.add_turn("Ann", f"ordinary day number {i} at the office", "ok", at=f"2023-05-{1 + i // 8:02d}T10:{i:02d}")
    target = a.add_turn("Ann", SECRET, "noted", at="2023-05-06T10:00")
    a.add_turn("Bob", "Bob likes chess", "ok", at="2023-05-06T10:00")
    assert _hits(a, "Ann", "alarm code zebra4471")[:1] == [target.memory_id]  # snapshot and blocks stored
    assert _hits(make_bank(), "Ann", "alarm code zebra4471")[:1] == [target.memory_id]  # and read
    b = make_bank()
    if change == "edit":
        b.update_memory("Ann", target.memory_id, text="we bought a new doormat")
    elif change == "delete":
        b.delete_memory("Ann", target.memory_id)
    else:
        b.archive("Ann", [target.memory_id])
    cached = _hits(a, "Ann", "alarm code zebra4471")  # a's partition, current or not
    _hits(a, "Bob", "chess")  # evicts Ann from a's LRU of one
    evicted = _hits(a, "Ann", "alarm code zebra4471")
    restarted = _hits(make_bank(), "Ann", "alarm code zebra4471")
    for found in (cached, evicted, restarted):
        assert target.memory_id not in found
    if change == "edit":
        assert _hits(make_bank(), "Ann", "doormat")[:1] == [target.memory_id]
        assert _hits(a, "Ann", "doormat")[:1] == [target.memory_id]
