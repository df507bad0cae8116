"""Retrieval metrics on hand-made rankings."""

from __future__ import annotations

import pytest

from memory_bank.errors import InvalidInputError
from memory_bank.evaluation.benchmark import Haystack, Probe, score_system
from memory_bank.evaluation.metrics import first_distinct, hit_at_k, parse_ks, recall_at_k
from memory_bank.records import Memory, MemoryKind


def test_recall_and_hit_at_k() -> None:
    ranked = ["D1:3", "D4:4", "D2:1", "D9:9"]
    assert recall_at_k({"D1:3", "D2:1"}, ranked, 1) == 0.5
    assert recall_at_k({"D1:3", "D2:1"}, ranked, 3) == 1.0
    assert recall_at_k(["D1:3", "D1:3"], ranked, 1) == 1.0  # duplicates in gold count once
    assert recall_at_k({"D7:7"}, ranked, 10) == 0.0
    assert recall_at_k(set(), ranked, 10) == 0.0
    assert hit_at_k({"D2:1", "D7:7"}, ranked, 2) == 0.0
    assert hit_at_k({"D2:1", "D7:7"}, ranked, 3) == 1.0
    assert first_distinct(["3", "1", "3", "2", "1"]) == ["3", "1", "2"]


def test_parse_ks() -> None:
    assert parse_ks("10, 1,5,5") == [1, 5, 10]
    assert parse_ks([3, 1]) == [1, 3]
    for bad in ("", "a,b", "0,5"):
        with pytest.raises(InvalidInputError):
            parse_ks(bad)


def _turn(i: str, session: str) -> Memory:
    return Memory(i, "u", MemoryKind.TURN, "2023-01-01", i, extra={"id": i, "session": session})


def test_score_system_turn_and_session_recall_per_category() -> None:
    hay = Haystack(
        "u",
        [_turn("a", "1"), _turn("b", "1"), _turn("c", "2"), _turn("d", "3")],
        [
            Probe("q1", "?", "1", ["a", "c"], ["1", "2"]),
            Probe("q2", "?", "4", ["d"], ["3"]),
            Probe("q3", "?", "4", [], []),  # nothing labelled: not scored
        ],
        "2023-02-01",
    )
    ranked = {"u": {"q1": ["b", "a", "d", "c"], "q2": ["a", "b", "d"], "q3": ["a"]}}
    m = score_system([hay], ranked, [1, 2, 3])
    # q1: top-1 turns {b} -> 0; top-2 {b,a} -> 1/2; top-3 -> 1/2. q2: 0, 0, 1.
    assert m["turn_recall"]["1"] == {"1": 0.0, "2": 0.5, "3": 0.5}
    assert m["turn_recall"]["4"] == {"1": 0.0, "2": 0.0, "3": 1.0}
    assert m["turn_recall"]["all"]["3"] == 0.75
    # Sessions in order of first retrieval: q1 -> 1, 3, 2 ; q2 -> 1, 3.
    assert m["session_recall"]["1"] == {"1": 0.5, "2": 0.5, "3": 1.0}
    assert m["session_recall"]["4"]["2"] == 1.0
    assert m["n"] == {"all": 2, "1": 1, "4": 1}
