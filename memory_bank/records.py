"""Plain data records: what a memory is, and what a search returns."""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Any

from memory_bank.errors import InvalidInputError


class MemoryKind(str, enum.Enum):
    """The kinds of memory piece (paper §2.1).

    Turns and daily summaries/personalities are dated pieces, one per turn or day. The global
    event summary and the global portrait are one record per user; they are stored as memories
    too (so deletion, export and staleness treat every layer alike) but are not retrieved by
    similarity: they go into every prompt whole.
    """

    TURN = "turn"
    DAILY_SUMMARY = "daily_summary"
    DAILY_PERSONALITY = "daily_personality"
    GLOBAL_SUMMARY = "global_summary"
    GLOBAL_PORTRAIT = "global_portrait"

    @property
    def is_global(self) -> bool:
        return self in (MemoryKind.GLOBAL_SUMMARY, MemoryKind.GLOBAL_PORTRAIT)


#: Largest memory strength stored (both stores keep it in a 32-bit integer column). A strength
#: grows by one per recall, so no real memory comes near it; a file with more is refused.
MAX_STRENGTH = 2**31 - 1

#: Kinds that are indexed for retrieval and subject to forgetting (the paper's memory pieces).
RETRIEVABLE_KINDS = (MemoryKind.TURN, MemoryKind.DAILY_SUMMARY)


@dataclasses.dataclass
class Memory:
    """One stored memory piece.

    ``date`` is the calendar day (``YYYY-MM-DD``) the memory belongs to; ``timestamp`` the exact
    time it happened when known (ISO 8601), ``None`` for imported history that only has days.
    ``turn`` is the 0-based position of a turn in its day's history. ``extra`` keeps fields of the
    original memory file that this model does not interpret, so exports are lossless.
    """

    memory_id: str
    user: str
    kind: MemoryKind
    date: str
    text: str
    turn: int | None = None
    query: str | None = None
    response: str | None = None
    timestamp: str | None = None
    strength: int = 1
    last_recall_date: str | None = None
    archived: bool = False
    stale: bool = False
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    rowid: int | None = None
    context: str | None = None
    #: Content weight, a multiplier of the forgetting time scale set when the memory is written
    #: (:mod:`memory_bank.salience`: small talk 0.25, chat 1, personal 2); 1 for summaries.
    weight: float = 1.0
    #: Hidden by the user (or an explicit policy action, :meth:`MemoryBank.archive`): never
    #: retrieved, not even by the cold tier, until restored. A hidden memory is also archived.
    #: ``archived`` alone is forgetting by the curve: out of the live tier, still consulted.
    hidden: bool = False

    @property
    def recall_anchor(self) -> str:
        """The date forgetting counts from: the last recall, else the day it was learned."""
        return self.last_recall_date or self.date


def turn_text(query: str, response: str) -> str:
    """The text a turn is shown and stored by."""
    return f"{query}\n{response}" if response else query


def index_text(text: str, context: str | None) -> str:
    """What a memory is embedded and indexed by: its text, after the reply it answers.

    A turn's ``context`` is the companion's reply in the turn before it on the same day (the
    question the user is answering), so "Gulangyu, I loved it" is found by "my favourite
    attraction in Xiamen".
    """
    return f"{context}\n{text}" if context else text


@dataclasses.dataclass
class SearchResult:
    """A retrieved memory with its relevance score and current retention."""

    memory: Memory
    score: float
    retention: float

    def to_dict(self) -> dict[str, Any]:
        m = self.memory
        return {
            "memory_id": m.memory_id,
            "user": m.user,
            "kind": m.kind.value,
            "date": m.date,
            "turn": m.turn,
            "text": m.text,
            "score": round(float(self.score), 6),
            "strength": m.strength,
            "last_recall_date": m.last_recall_date,
            "retention": round(float(self.retention), 6),
        }


_LAYER_ID = r"_(?:overall_history|overall_personality|\d{4}-\d{2}-\d{2}_(?:summary|personality))"


def layer_id(user: str, kind: MemoryKind, date: str) -> str:
    """The id the bank gives ``user``'s summary layer ``kind`` (of ``date`` for a daily one)."""
    if kind is MemoryKind.GLOBAL_SUMMARY:
        return f"{user}_overall_history"
    if kind is MemoryKind.GLOBAL_PORTRAIT:
        return f"{user}_overall_personality"
    if kind is MemoryKind.DAILY_SUMMARY:
        return f"{user}_{date}_summary"
    if kind is MemoryKind.DAILY_PERSONALITY:
        return f"{user}_{date}_personality"
    raise InvalidInputError(f"{kind.value} is not a summary layer")


def misplaced_layer_id(user: str, memory: Memory) -> str | None:
    """Why ``memory``'s id cannot be kept: it has the form of the id of one of the user's summary
    layers that it is not (a turn, or another day's or kind's layer), which the summariser would
    overwrite when it writes that layer. ``None`` when it can be kept."""
    if not re.fullmatch(re.escape(user) + _LAYER_ID, memory.memory_id):
        return None
    if memory.kind is not MemoryKind.TURN and memory.memory_id == layer_id(user, memory.kind, memory.date):
        return None
    what = "a turn" if memory.kind is MemoryKind.TURN else f"the {memory.kind.value.replace('_', ' ')}"
    return (
        f"memory id {memory.memory_id!r} of {what} of {memory.date} has the form of the id of a "
        "summary layer it is not, which a summary written later would replace; give it another memory_id"
    )
