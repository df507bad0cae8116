"""Moving memories between the live and the forgotten tier (a forgetting pass, a revival, a
restore) changes only which memories are live: a partition holding both tiers is kept, its live
set refreshed, and every search ranks exactly as a server that builds everything afresh. Hiding
changes what is indexed: that rebuilds. On both backends."""

from __future__ import annotations

import math
from typing import Any

import pytest

from memory_bank import MemoryBank

QUERIES = [
    "Where did my sister go hiking?",
    "What did Tom bake?",
    "我的猫叫什么名字？",
    "How was the concert?",
]
NOW = "2023-06-01"


def _fill(bank: MemoryBank) -> None:
    texts = [
        ("My sister Anna went hiking near the lake.", "How lovely!"),
        ("Tom baked a cherry pie.", "Yum, was it good?"),
        ("我的猫叫米索。", "好可爱的名字！"),
        ("The concert was loud but amazing.", "Whose concert was it?"),
    ]
    for i in range(40):
        q, r = texts[i % len(texts)]
        bank.add_turn("Ann", f"{q} ({i})", r, at=f"2023-05-{1 + i // 5:02d}T10:{i % 60:02d}")


def _found(bank: MemoryBank) -> list[list[tuple[str, float]]]:
    return [
        [(r.memory.memory_id, round(r.score, 6)) for r in bank.search("Ann", q, k=6, now=NOW)]
        for q in QUERIES
    ]


@pytest.mark.parametrize("cold_rank", ["joint", "separate"])
def test_a_tier_move_ranks_as_a_fresh_build_and_keeps_a_two_tier_partition(make_bank, cold_rank: str) -> None:  # type: ignore[no-untyped-def]
    settings: dict[str, Any] = {
        "mode": "paper",
        "daily_pass": False,
        "cold_tier": True,
        "cold_rank": cold_rank,
        "cold_below": math.inf,
    }
    bank = make_bank(forgetting=settings)
    _fill(bank)
    uid = bank.user("Ann").id
    ids = [m.memory_id for m in bank.history("Ann")]
    _found(bank)
    part = bank._cache.get(uid)
    assert bank._both_tiers() == (cold_rank == "joint")

    bank.archive("Ann", ids[4:16], hidden=False)  # forgotten, as a pass would
    assert _found(bank) == _found(make_bank(forgetting=settings))
    bank.restore("Ann", ids[4:8])  # back to the live tier
    assert _found(bank) == _found(make_bank(forgetting=settings))
    if cold_rank == "joint":
        assert bank._cache.get(uid) is part  # no rebuild for either move

    bank.archive("Ann", ids[:2], hidden=True)  # hidden: out of every index, so rebuilt
    found = _found(bank)
    assert found == _found(make_bank(forgetting=settings))
    assert not {ids[0], ids[1]} & {mid for hits in found for mid, _ in hits}
    assert bank._cache.get(uid) is not part
