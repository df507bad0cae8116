"""What a ranking reads: the query, parsed once, and the partition-wide arrays built from it.

:class:`Query` holds the query's text, vector, "now" and the memory kinds it may return, and
parses the rest on first use (tokens, the days and the months it names), so a term whose
weight is 0 never pays for a parse it does not need. :class:`Context` pairs a query with one
user's :class:`~memory_bank.index.Partition` and keeps what several steps share: the query's
BM25 (its best memories for the lexical candidates, its scores for the lexical term) and the
positions on the days and in the months the query names (candidates and the date hints).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import numpy as np

from memory_bank.bm25 import Bm25Query
from memory_bank.index import Partition
from memory_bank.retrieval.dialogue import Dialogue, parse_dialogue
from memory_bank.text import counted_back, dates_in, months_in, tokenize

T = TypeVar("T")


class once(Generic[T]):
    """:func:`functools.cached_property` without the lock Python 3.11 takes on every first
    access (several microseconds, and a search makes a handful of them)."""

    def __init__(self, fn: Callable[[Any], T]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __get__(self, obj: object, owner: type | None = None) -> T:
        if obj is None:
            return self  # type: ignore[return-value]
        value = obj.__dict__[self.name] = self.fn(obj)  # shadows the descriptor from now on
        return value


@dataclasses.dataclass(frozen=True, eq=False)
class Query:
    """A search query. ``years`` resolves dates without a year ("May 4th", "in July") against
    the years the memories span (latest first); ``now`` resolves "yesterday" and "today"."""

    text: str
    vector: np.ndarray
    now: dt.date | None = None
    allowed_kinds: frozenset[str] | None = None
    years: tuple[int, ...] = ()

    @classmethod
    def parse(
        cls,
        part: Partition,
        text: str,
        vector: np.ndarray,
        *,
        now: dt.date | None = None,
        allowed_kinds: frozenset[str] | None = None,
    ) -> Query:
        """The query ``text`` (embedded as ``vector``) for a search of ``part``."""
        return cls(text, np.asarray(vector, dtype=np.float32), now, allowed_kinds, part.years())

    @once
    def tokens(self) -> list[str]:
        """Index tokens (see :func:`memory_bank.text.tokenize`), without the words that count
        days back from now ("last Tuesday", "上周三"): they name a day, which the date terms
        look for, not words said then (上周三's 周 matched every memory about a 周末)."""
        spans = self.counted[2]
        if not spans:
            return tokenize(self.text)
        text, end = [], 0
        for a, b in spans:
            text.append(self.text[end:a])
            end = b
        text.append(self.text[end:])
        return tokenize(" ".join(text))

    @once
    def counted(self) -> tuple[list[dt.date], list[tuple[int, int]], list[tuple[int, int]]]:
        """Days, months and spans counted back from ``now`` (see :func:`memory_bank.text.counted_back`)."""
        return counted_back(self.text, self.now, years=self.years) if self.now is not None else ([], [], [])

    @once
    def dialogue(self) -> Dialogue | None:
        """The query's turns when it is a dialogue (see :mod:`memory_bank.retrieval.dialogue`)."""
        return parse_dialogue(self.text)

    @once
    def days(self) -> frozenset[str]:
        """Calendar days the query names, as ``YYYY-MM-DD``."""
        return frozenset(
            d.isoformat()
            for d in [
                *dates_in(self.text, now=self.now, years=self.years, count_back=False),
                *self.counted[0],
            ]
        )

    @once
    def months(self) -> frozenset[str]:
        """Months the query names without a day, as ``YYYY-MM``."""
        counted = {f"{y:04d}-{m:02d}" for y, m in self.counted[1]}
        return frozenset(months_in(self.text, years=self.years) | counted)


class Context:
    """One search: a query and the partition it ranks, with the arrays its steps share."""

    def __init__(self, part: Partition, query: Query) -> None:
        self.part = part
        self.query = query

    @once
    def bm25(self) -> Bm25Query:
        """BM25 of the query over the partition: its top k, best score and the scores of any
        positions, exactly as scoring every memory gives them (see :mod:`memory_bank.bm25`)."""
        return self.part.lexical.query(self.query.tokens)

    @once
    def bm25_max(self) -> float:
        """The best BM25 score (0 when no memory holds a query token)."""
        return self.bm25.best()

    @once
    def on_named_days(self) -> np.ndarray:
        """Positions (ascending) of the memories on the days the query names."""
        days = self.query.days
        return self.part.positions_on(days) if days else np.zeros(0, dtype=np.int64)

    @once
    def in_named_months(self) -> np.ndarray:
        """Positions (ascending) of the memories in the months the query names."""
        months = self.query.months
        return self.part.positions_in_months(months) if months else np.zeros(0, dtype=np.int64)

    def of_allowed_kinds(self, positions: np.ndarray) -> np.ndarray:
        """``positions`` without the memories of kinds the query may not return."""
        allowed = self.query.allowed_kinds
        if allowed is None:
            return positions
        kinds = self.part.kinds
        keep = np.fromiter((kinds[i] in allowed for i in positions), dtype=bool, count=len(positions))
        return positions[keep]


def member(positions: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Whether each of ``positions`` is in ``sorted_set`` (ascending), as a bool array."""
    if not len(sorted_set):
        return np.zeros(len(positions), dtype=bool)
    at = np.searchsorted(sorted_set, positions)
    return sorted_set[np.minimum(at, len(sorted_set) - 1)] == positions
