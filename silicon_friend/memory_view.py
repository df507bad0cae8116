"""What a user sees of their own memories, as plain data: filtered pages, reasons, what it knows.

No UI code: the web app's memory tab (:mod:`silicon_friend.web.memory_tab`) renders these, and
tests check them without a browser. Every function takes the user it acts for and reads only
that user's memories from the bank.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from memory_bank import MemoryBank, MemoryKind
from memory_bank.errors import InvalidInputError, MemoryNotFoundError
from memory_bank.explain import Explanation
from memory_bank.records import Memory
from memory_bank.text import parse_day
from silicon_friend.reasons import reason

#: Rows per page of the memory table.
PAGE_SIZE = 25
#: Characters of a memory's text shown in its table row (the full text is one click away).
EXCERPT_CHARS = 90
#: Days of daily summaries shown in "what it knows about you" (the count of older ones is stated).
RECENT_DAYS = 7

STATUSES = ("all", "kept", "forgotten")
GLOBAL_KINDS = (MemoryKind.GLOBAL_SUMMARY, MemoryKind.GLOBAL_PORTRAIT)
DAILY_KINDS = (MemoryKind.DAILY_SUMMARY, MemoryKind.DAILY_PERSONALITY)
KINDS = ("all", *(k.value for k in MemoryKind))


def excerpt(text: str, n: int = EXCERPT_CHARS) -> str:
    """``text`` on one line, cut to ``n`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1].rstrip() + "…"


@dataclasses.dataclass(frozen=True)
class MemoryFilter:
    """Which memories a view shows: words in the text, a kind, a date range, kept or forgotten."""

    text: str = ""
    kind: str = "all"
    since: str | None = None
    until: str | None = None
    status: str = "all"

    @classmethod
    def parse(
        cls, text: str | None, kind: str | None, since: str | None, until: str | None, status: str | None
    ) -> MemoryFilter:
        """A filter from the form's raw values; a bad date raises :class:`InvalidInputError`."""
        kind = kind or "all"
        status = status or "all"
        if kind not in KINDS:
            raise InvalidInputError(f"unknown memory kind {kind!r}; use one of {', '.join(KINDS)}")
        if status not in STATUSES:
            raise InvalidInputError(f"unknown status {status!r}; use one of {', '.join(STATUSES)}")
        days = [
            parse_day(d.strip(), what) if d and d.strip() else None
            for d, what in ((since, "from"), (until, "to"))
        ]
        if days[0] and days[1] and days[0] > days[1]:
            raise InvalidInputError(reason("date_order", end=days[1], start=days[0]))
        return cls(text=(text or "").strip(), kind=kind, since=days[0], until=days[1], status=status)

    def matches(self, m: Memory) -> bool:
        if self.kind != "all" and m.kind.value != self.kind:
            return False
        if (self.status == "kept" and m.archived) or (self.status == "forgotten" and not m.archived):
            return False
        if (self.since and m.date < self.since) or (self.until and m.date > self.until):
            return False
        return all(word in m.text.casefold() for word in self.text.casefold().split())


@dataclasses.dataclass(frozen=True)
class Row:
    """One memory as the table shows it (``retention`` under the store's forgetting setting)."""

    memory: Memory
    retention: float

    @property
    def memory_id(self) -> str:
        return self.memory.memory_id


@dataclasses.dataclass(frozen=True)
class Page:
    """One page of a filtered view: its rows, the page number (from 1), and the totals."""

    rows: list[Row]
    number: int
    pages: int
    total: int
    size: int = PAGE_SIZE

    @property
    def first(self) -> int:
        return (self.number - 1) * self.size + 1 if self.rows else 0

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1 if self.rows else 0


def filtered(bank: MemoryBank, user: str, flt: MemoryFilter, *, now: dt.datetime | None = None) -> list[Row]:
    """``user``'s memories that ``flt`` keeps, newest first (the global layers last)."""
    if not bank.has_user(user):
        return []
    rows = [Row(m, r) for m, r in bank.memories(user, include_archived=True, now=now) if flt.matches(m)]
    rows.sort(key=lambda r: (not r.memory.kind.is_global, r.memory.date, r.memory.turn or 0), reverse=True)
    return rows


def find(bank: MemoryBank, user: str, memory_id: str) -> Memory | None:
    """``user``'s memory ``memory_id`` (kept or forgotten), or ``None``; never another user's."""
    if not bank.has_user(user):
        return None
    return bank.storage.get_memory(bank.user(user).id, memory_id)


def page_of(rows: Sequence[Row], number: int, size: int = PAGE_SIZE) -> Page:
    """Page ``number`` (clamped to the pages there are) of ``rows``."""
    pages = max(1, -(-len(rows) // size))
    number = min(max(1, int(number)), pages)
    start = (number - 1) * size
    return Page(list(rows[start : start + size]), number, pages, len(rows), size)


@dataclasses.dataclass(frozen=True)
class Deletion:
    """A deleted memory and, as they were just before, the memories its deletion changed: the
    summaries it blanked (the global layers, and its day's layers for a turn) and the next turn
    of its day (indexed with the deleted reply as context). Held in server memory for undo only."""

    memory: Memory
    before: tuple[Memory, ...]


def delete_undoable(bank: MemoryBank, user: str, memory_id: str) -> Deletion:
    """Delete ``user``'s memory ``memory_id`` (:meth:`MemoryBank.delete_memory`), keeping what
    :func:`undo_delete` needs to put back exactly what was there."""
    target = find(bank, user, memory_id)
    if target is None:
        raise MemoryNotFoundError(f"user {user!r} has no memory with id {memory_id!r}")
    before = [m for m, _ in bank.memories(user, kinds=GLOBAL_KINDS)]
    if target.kind is MemoryKind.TURN:
        day = [m for m, _ in bank.memories(user, kinds=DAILY_KINDS) if m.date == target.date]
        after = [
            m
            for m in bank.storage.memories(bank.user(user).id, kinds=[MemoryKind.TURN], date=target.date)
            if (m.turn or 0) > (target.turn or 0)
        ]
        before += day + ([min(after, key=lambda m: m.turn or 0)] if after else [])
    gone = bank.delete_memory(user, memory_id)
    return Deletion(gone, tuple(before))


def undo_delete(bank: MemoryBank, user: str, deletion: Deletion) -> Memory:
    """Bring back a :func:`delete_undoable`: the memory, then the summaries and the next turn's context as
    they were before it (a summary rewritten since is replaced by the one that was there)."""
    memory, *_ = bank.put_back(user, [deletion.memory, *deletion.before])
    return memory


@dataclasses.dataclass(frozen=True)
class Knowledge:
    """What the companion knows about the user: the global layers and the latest daily ones."""

    portrait: str
    summary: str
    days: list[tuple[str, str, str]]  # (date, event summary, personality), newest first
    older_days: int
    stale: bool

    @property
    def empty(self) -> bool:
        return not (self.portrait or self.summary or self.days)


def knowledge(bank: MemoryBank, user: str, *, recent_days: int = RECENT_DAYS) -> Knowledge:
    """The user's portrait, event summary and their last ``recent_days`` daily summaries."""
    if not bank.has_user(user):
        return Knowledge("", "", [], 0, False)
    kinds = (
        MemoryKind.GLOBAL_PORTRAIT,
        MemoryKind.GLOBAL_SUMMARY,
        MemoryKind.DAILY_SUMMARY,
        MemoryKind.DAILY_PERSONALITY,
    )
    layers = [m for m, _ in bank.memories(user, kinds=kinds, include_archived=False)]
    glob = {m.kind: m for m in layers if m.kind.is_global}
    daily: dict[str, dict[MemoryKind, str]] = {}
    for m in layers:
        if not m.kind.is_global and m.text.strip():
            daily.setdefault(m.date, {})[m.kind] = m.text.strip()
    dates = sorted(daily, reverse=True)
    days = [
        (d, daily[d].get(MemoryKind.DAILY_SUMMARY, ""), daily[d].get(MemoryKind.DAILY_PERSONALITY, ""))
        for d in dates[:recent_days]
    ]
    portrait = glob.get(MemoryKind.GLOBAL_PORTRAIT)
    summary = glob.get(MemoryKind.GLOBAL_SUMMARY)
    return Knowledge(
        portrait=portrait.text.strip() if portrait else "",
        summary=summary.text.strip() if summary else "",
        days=days,
        older_days=max(0, len(dates) - recent_days),
        stale=any(m.stale for m in layers),
    )


@dataclasses.dataclass(frozen=True)
class ReasonTexts:
    """The sentences of :func:`fade_reason`, one set per language (in the UI text table)."""

    archived: str
    hidden: str
    off: str
    never_fades: str
    recalled: str
    never_recalled: str
    fading: str
    forgets_on: str
    overdue: str
    classes: Mapping[str, str]


def fade_reason(
    why: Mapping[str, Any] | Explanation, texts: ReasonTexts, kind_name: str, today: str
) -> str:
    """A short sentence saying why a memory is strong or fading, from :meth:`MemoryBank.explain`.

    The typed fields (recalls, the kind's time scale, the content class, retention, the
    projected forgetting day, or that it is due at the next pass when that day is before
    ``today``) are put into words; a ``reason`` the explanation already carries
    (a newer forgetting engine may give one) comes first.
    """
    if isinstance(why, Explanation):
        why = why.to_dict()
    if why.get("hidden"):
        return texts.hidden
    if why.get("archived"):
        return texts.archived
    parts: list[str] = []
    if isinstance(why.get("reason"), str) and why["reason"]:
        parts.append(why["reason"])
    kind = str(why.get("kind", ""))
    if kind in ("global_summary", "global_portrait", "daily_personality"):
        return " ".join([*parts, texts.never_fades])
    if why.get("mode") == "off":
        return " ".join([*parts, texts.off])
    recalls = int(why.get("recalls", 0))
    anchor = str(why.get("anchor", ""))
    parts.append(
        texts.recalled.format(n=recalls, date=anchor) if recalls else texts.never_recalled.format(date=anchor)
    )
    cls = why.get("content_class")
    if isinstance(cls, str) and texts.classes.get(cls):
        parts.append(texts.classes[cls])
    parts.append(
        texts.fading.format(
            kind=kind_name,
            days=_days(float(why.get("time_scale_days", 1.0))),
            r=float(why.get("retention", 1.0)),
        )
    )
    if why.get("forgets_on"):
        due = str(why["forgets_on"])
        parts.append((texts.overdue if due <= today else texts.forgets_on).format(date=due))
    return " ".join(parts)


def _days(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}".rstrip("0").rstrip(".")
