"""Which positions of a partition hold each (day, turn): what appending a turn needs to link it
to the turns just before and after it on its day.

A partition's first batch (a restart's load) leaves these as sorted arrays, searched by
bisection; only what is appended later goes into dictionaries. Building a dictionary of every
(day, turn) on the first new turn after a restart cost a million-memory user about a second
on that turn; a lookup in the arrays costs microseconds.
"""

from __future__ import annotations

import numpy as np

Key = tuple[str, int]


class TurnKeys:
    """The last position holding each (day, turn) and, for a (day, turn) held more than once
    (a re-imported turn, a duplicate), every position holding it, in order.

    ``days``, ``turns`` and ``last`` (one entry per distinct (day id, turn), sorted by day id
    then turn) describe the bulk-loaded part, with ``repeated`` its keys held more than once;
    ``day_number`` maps a day to its id (the partition's, shared and growing).
    """

    def __init__(
        self,
        day_number: dict[str, int],
        days: np.ndarray | None = None,
        turns: np.ndarray | None = None,
        last: np.ndarray | None = None,
        repeated: dict[Key, list[int]] | None = None,
    ) -> None:
        self._day_number = day_number
        self._days = np.zeros(0, dtype=np.int64) if days is None else np.asarray(days, dtype=np.int64)
        self._turns = np.zeros(0, dtype=np.int64) if turns is None else np.asarray(turns, dtype=np.int64)
        self._bulk_last = np.zeros(0, dtype=np.int64) if last is None else np.asarray(last, dtype=np.int64)
        self._last: dict[Key, int] = {}  # appended since the bulk load (and overriding it)
        self._holders: dict[Key, list[int]] = dict(repeated or {})

    def last(self, key: Key) -> int:
        """The last position holding ``key``, -1 for none."""
        pos = self._last.get(key)
        if pos is not None:
            return pos
        d = self._day_number.get(key[0])
        if d is None or not len(self._days):
            return -1
        lo, hi = np.searchsorted(self._days, d, "left"), np.searchsorted(self._days, d, "right")
        if lo == hi:
            return -1
        at = lo + int(np.searchsorted(self._turns[lo:hi], key[1]))
        return int(self._bulk_last[at]) if at < hi and self._turns[at] == key[1] else -1

    def holding(self, key: Key) -> list[int]:
        """Every position holding ``key``, in order."""
        many = self._holders.get(key)
        if many is not None:
            return many
        one = self.last(key)
        return [] if one < 0 else [one]

    def add(self, key: Key, pos: int) -> None:
        """``pos`` (after every position held) now holds ``key`` too."""
        before = self.holding(key)
        if before:
            self._holders[key] = [*before, pos]
        self._last[key] = pos
