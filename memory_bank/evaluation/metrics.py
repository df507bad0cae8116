"""Retrieval metrics on ranked lists, as small pure functions.

* ``recall_at_k(gold, ranked, k)``: the share of ``gold`` items found among the first ``k`` of
  ``ranked`` (LoCoMo's turn recall; the paper set's "full-evidence recall").
* ``hit_at_k(gold, ranked, k)``: 1 if any gold item is among the first ``k``, else 0.
* ``first_distinct(ranked)``: the ranked list with repeats removed (sessions ranked by the first
  turn of theirs that was retrieved).

>>> recall_at_k({"D1:3", "D2:1"}, ["D1:3", "D4:4", "D2:1"], 2)
0.5
>>> hit_at_k({"D2:1"}, ["D1:3", "D2:1"], 1)
0.0
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T", bound=Hashable)


def recall_at_k(gold: Iterable[T], ranked: Sequence[T], k: int) -> float:
    """Share of ``gold`` among ``ranked[:k]``; an empty ``gold`` scores 0 (nothing to find)."""
    wanted = set(gold)
    if not wanted:
        return 0.0
    return len(wanted & set(ranked[:k])) / len(wanted)


def hit_at_k(gold: Iterable[T], ranked: Sequence[T], k: int) -> float:
    """1.0 when any item of ``gold`` is among ``ranked[:k]``."""
    return float(bool(set(gold) & set(ranked[:k])))


def first_distinct(ranked: Iterable[T]) -> list[T]:
    """``ranked`` without repeats, keeping each item's first (best) position."""
    return list(dict.fromkeys(ranked))


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def parse_ks(text: str | Sequence[int]) -> list[int]:
    """``"1,5,10"`` -> ``[1, 5, 10]`` (sorted, unique, each >= 1)."""
    from memory_bank.errors import InvalidInputError

    items = text.split(",") if isinstance(text, str) else list(text)
    try:
        ks = sorted({int(str(x).strip()) for x in items if str(x).strip()})
    except ValueError as e:
        raise InvalidInputError(
            f"--k must be a comma-separated list of integers like 1,5,10; got {text!r}"
        ) from e
    if not ks or ks[0] < 1:
        raise InvalidInputError(f"--k values must be integers >= 1; got {text!r}")
    return ks
