"""What is due: a user's days, their layers, and the fingerprints that make runs idempotent.

A day's layers are due once the day is over and they are missing or stale (the core marks them
stale when a turn of the day is added or deleted). A global layer records a fingerprint of the
dailies it was made from; when they change, it is due again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from memory_bank.records import Memory, MemoryKind

if TYPE_CHECKING:
    from memory_bank.bank import MemoryBank

DAILY_KINDS = (MemoryKind.DAILY_SUMMARY, MemoryKind.DAILY_PERSONALITY)
GLOBAL_KINDS = (MemoryKind.GLOBAL_SUMMARY, MemoryKind.GLOBAL_PORTRAIT)
#: the daily kind each global kind is made from
SOURCE_KIND = {
    MemoryKind.GLOBAL_SUMMARY: MemoryKind.DAILY_SUMMARY,
    MemoryKind.GLOBAL_PORTRAIT: MemoryKind.DAILY_PERSONALITY,
}


def to_date(value: dt.date | dt.datetime | str | None, clock: Callable[[], dt.datetime]) -> dt.date:
    """A calendar day from a date, datetime, ``YYYY-MM-DD`` string, or ``None`` (the clock's today)."""
    if value is None:
        return clock().date()
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    from memory_bank.text import parse_day

    return dt.date.fromisoformat(parse_day(value, "now"))


def fingerprint(items: Sequence[tuple[str, str]]) -> str:
    """A short hash of (key, text) pairs: what a layer was made from, stored in its ``extra``."""
    h = hashlib.sha256()
    for key, text in items:
        h.update(key.encode())
        h.update(b"\x1f")
        h.update(text.encode())
        h.update(b"\x1e")
    return h.hexdigest()[:16]


def day_turns(bank: MemoryBank, user_id: int, day: str) -> list[Memory]:
    """The turns of the user ``user_id`` on ``day`` that a day summary is made from: every turn the user has
    not hidden. Forgotten ones count: forgetting moves a memory to the cold tier, and a summary
    remade later (a late turn, a failed run) must not lose what the curve forgot, nor delete the
    day's layers once every turn of the day is forgotten."""
    rows = bank.storage.memories(user_id, [MemoryKind.TURN], include_archived=True, date=day)
    return [m for m in rows if not m.hidden]


class DayTurns(Mapping[str, list[Memory]]):
    """A user's turns by day (:func:`day_turns`), read one day at a time when first asked for:
    knowing which days are due reads the days alone, and only the days that are summarised read
    their turns, so scheduling stays cheap however long the history is."""

    def __init__(self, bank: MemoryBank, user: str) -> None:
        self._bank = bank
        self.user_id = bank.user(user).id  # the record read: see Summarizer
        self._days = bank.storage.turn_days(self.user_id)
        self._known = frozenset(self._days)
        self._loaded: dict[str, list[Memory]] = {}

    def __getitem__(self, day: str) -> list[Memory]:
        if day not in self._known:
            raise KeyError(day)
        if day not in self._loaded:
            self._loaded[day] = day_turns(self._bank, self.user_id, day)
        return self._loaded[day]

    def __iter__(self) -> Iterator[str]:
        return iter(self._days)

    def __len__(self) -> int:
        return len(self._days)

    def __contains__(self, day: object) -> bool:
        return day in self._known


def daily_state(bank: MemoryBank, user: str) -> tuple[DayTurns, dict[tuple[MemoryKind, str], Memory]]:
    """Turns the user has not hidden, by day (read lazily, see :class:`DayTurns`), and every
    daily layer (forgotten ones too) by (kind, day)."""
    layers = {(m.kind, m.date): m for m, _ in bank.memories(user, kinds=DAILY_KINDS, include_archived=True)}
    return DayTurns(bank, user), layers


def layer_due(layer: Memory | None) -> bool:
    """Missing or stale. A forgotten (archived) layer that is not stale is done: forgetting must
    not undo itself; a layer the user hid is done until they restore it (remaking it would show
    it again)."""
    return layer is None or (layer.stale and not layer.hidden)


def due_days(bank: MemoryBank, user: str, today: dt.date | dt.datetime | str | None = None) -> list[str]:
    """Days before ``today`` with turns whose daily layers are missing or stale, oldest first
    (no LLM needed: the CLI's ``--dry-run`` uses this)."""
    if not bank.has_user(user):
        return []
    day = to_date(today, bank.clock).isoformat()
    turns, layers = daily_state(bank, user)
    return [d for d in sorted(turns) if d < day and any(layer_due(layers.get((k, d))) for k in DAILY_KINDS)]


def global_sources(dailies: Sequence[Memory]) -> list[tuple[str, str]]:
    """(day, text) of the daily layers a global one is made from: every day's, forgotten ones
    too (the global layers are about the whole history), not those the user hid. Stale ones are
    left out: they may quote deleted turns (the next run remakes them, and then the global one)."""
    return sorted(
        (m.date, m.text.strip()) for m in dailies if m.text.strip() and not m.stale and not m.hidden
    )
