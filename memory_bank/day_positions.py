"""Which positions of a partition fall on each day: what a query that names days or months
("on May 3rd", "in July") takes its candidates from.

A partition's first batch (a restart's load) leaves them as one array of positions sorted by
day, with each day's bounds in it (compressed sparse rows), built in a few array operations;
only what is appended later goes into lists. A dictionary of a Python list per day cost a
million-memory user (84,000 days) about a second at every restart, in ``tolist`` alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


class DayPositions:
    """The positions (ascending) on each day, and each day's number (in order of first sight,
    which is what the partition's per-position day ids hold)."""

    def __init__(self) -> None:
        #: Each day's number, in order of first sight (the partition's, shared and growing).
        self.number: dict[str, int] = {}
        #: The years the days fall in.
        self.years: set[int] = set()
        self._order = np.zeros(0, dtype=np.int64)  # the bulk-loaded positions, by day then position
        self._bounds = np.zeros(1, dtype=np.int64)  # day i's positions: _order[_bounds[i]:_bounds[i + 1]]
        self._later: dict[int, list[int]] = {}  # appended after the bulk load, by day number

    @classmethod
    def bulk(cls, dates: Sequence[str]) -> tuple[DayPositions, np.ndarray]:
        """The days of a partition's first batch (position ``i`` on ``dates[i]``), and the day
        number of each position (``int32``)."""
        out = cls()
        out.number = number = {d: i for i, d in enumerate(dict.fromkeys(dates))}
        ids = np.fromiter(map(number.__getitem__, dates), dtype=np.int32, count=len(dates))
        out._order = np.argsort(ids, kind="stable").astype(np.int64, copy=False)
        out._bounds = np.zeros(len(number) + 1, dtype=np.int64)
        np.cumsum(np.bincount(ids, minlength=len(number)), out=out._bounds[1:])
        out.years = {int(d[:4]) for d in number}
        return out, ids

    def append(self, day: str, pos: int) -> int:
        """Record that position ``pos`` (above every position held) falls on ``day``; its number."""
        i = self.number.get(day)
        if i is None:
            i = self.number[day] = len(self.number)
            self.years.add(int(day[:4]))
        self._later.setdefault(i, []).append(pos)
        return i

    def _of(self, i: int) -> np.ndarray:
        bulk = self._order[self._bounds[i] : self._bounds[i + 1]] if i + 1 < len(self._bounds) else None
        later = self._later.get(i)
        if later is None:
            return bulk if bulk is not None else np.zeros(0, dtype=np.int64)
        extra = np.asarray(later, dtype=np.int64)
        return extra if bulk is None else np.concatenate([bulk, extra])

    def on(self, days: Iterable[str]) -> np.ndarray:
        """Positions (ascending) on any of ``days`` (``YYYY-MM-DD``)."""
        number = self.number
        found = [self._of(number[d]) for d in set(days) if d in number]
        if not found:
            return np.zeros(0, dtype=np.int64)
        return np.sort(np.concatenate(found))

    def in_months(self, months: Iterable[str]) -> np.ndarray:
        """Positions (ascending) on any day of ``months`` (``YYYY-MM``)."""
        wanted = set(months)
        return self.on([d for d in self.number if d[:7] in wanted])

    def as_dict(self) -> dict[str, list[int]]:
        """Every day's positions (to compare two indexes; not for the search path)."""
        return {d: self._of(i).tolist() for d, i in self.number.items()}
