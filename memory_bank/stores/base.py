"""The contract a memory store implements, and the records it hands back.

The bank talks to its database only through :class:`Storage`: users, their memories (every
record of the three layers), each memory's embedding (stored beside it with the encoder's name,
so a restart rebuilds the search index from stored vectors and never re-embeds), and two
counters per user that let processes sharing one store keep their in-memory indexes current:
``version`` grows with every change, ``epoch`` only with changes that are not pure appends
(deletes, archives, rewrites).

Every method is thread-safe and every write is one transaction. Memories are addressed by
``rowid`` (the store's integer key, what the search index holds) or by ``memory_id`` (the
caller's key, unique per user); a single-memory operation looks the memory up by its key and
never lists the user's history. The SQL backends share one implementation
(:mod:`memory_bank.stores.sql`); a backend of another kind implements this class directly.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from memory_bank.errors import StoreError
from memory_bank.records import Memory, MemoryKind

#: The version of the stored schema; every backend migrates older stores up to it.
SCHEMA_VERSION = 7

#: Key of a user's ``extra``: per day, the lowest turn number a new turn of that day may take
#: (one more than the highest deleted one). Raised by the store in the transaction that deletes.
TURN_FLOOR = "turn_floor"
#: Key of a user's ``extra`` and of the store's ``meta``: the lowest turn number of any day. A
#: deleted user raises the store's; a user created afterwards starts there, so a user deleted and
#: created again never gets the memory ids of the deleted one (and the store keeps no name).
TURN_BASE = "turn_base"
#: Key of the store's ``meta``: the epoch a user created now starts at, above the epoch of every
#: deleted (or import-replaced) user. SQLite gives a deleted user's id to the next user; a cache
#: of the deleted user in another process (a partition, a live set) is keyed by that id and
#: trusted while the epoch is the same, so the new user must never share an epoch with them.
EPOCH_BASE = "epoch_base"
#: Key of the store's ``meta``: the largest id a deleted (or import-replaced) user had. A new
#: user's id is above it, so an id names one user for good: a write that looked the user up
#: before the user was deleted (a reply being stored during "Forget me", a summary run) finds
#: the id gone and is refused, never stored under the next user to be created. (SQLite gives a
#: new row the largest id plus one, which is the deleted user's when it was the last created;
#: PostgreSQL's sequences never give an id twice.)
USER_ID_BASE = "user_id_base"
#: How long a deleted user's retired memory ids are kept (see :func:`retired_digest`): long
#: enough for a client's retries of a run that was in flight when the user was deleted.
RETIRED_USER_DAYS = 7
#: Keys of a turn's ``extra`` that an adapter writes to tell a replay of a turn from a new
#: message reusing its id: the LangChain middleware's thread, the memory tools' content digest.
#: A retired id is also retired as ``<base>#<value>`` of each, ``<base>`` being the turn's
#: :data:`REPLAY_OF` (else its id), and as ``<base>#*`` when it has none of them (a turn written
#: before they existed, or imported): then every reuse of the id is a replay (see
#: :meth:`Storage.retired_on`).
REPLAY_KEYS = ("lc_thread", "tool_content")
#: Key of a turn's ``extra``: the id of the message or call it stores when that is not its own
#: id (a second message reusing the id is stored as ``<id>:<digest>``).
REPLAY_OF = "replay_of"


def retired_digest(user: str, memory_id: str) -> str:
    """The one-way record of a deleted memory id of ``user`` (the stored name): a retry that
    gives the id again (a LangChain message id ``lc:...``, a tool call ``tool:...``, a caller's
    own idempotency key) is told it was deleted instead of storing it again. The store keeps
    neither the id nor the name, only this digest of the two."""
    return hashlib.sha256(f"{user}\0{memory_id}".encode("utf-8", "surrogatepass")).hexdigest()


@dataclasses.dataclass
class UserRecord:
    id: int
    name: str
    extra: dict[str, Any]
    last_forget_date: str | None
    version: int
    epoch: int
    #: The tier counter (:meth:`Storage.user_counters`' third), when the record was read with it.
    tiers: int | None = None

    @property
    def counters(self) -> tuple[int, int, int] | None:
        """``(version, epoch, tiers)`` as read with this record, ``None`` without the tiers."""
        return None if self.tiers is None else (self.version, self.epoch, self.tiers)


@dataclasses.dataclass
class VectorBatch:
    """Stored vectors of one user's retrievable memories, in rowid order."""

    rowids: np.ndarray
    vectors: np.ndarray
    texts: list[str]
    kinds: list[str]
    dates: list[str]
    turns: list[int | None]
    #: The user's own words and the reply of each memory (a turn's query and response; ``None``
    #: for summaries), when known.
    queries: list[str | None] | None = None
    responses: list[str | None] | None = None
    #: How many of the vectors were read one row each (not from a vector block).
    from_rows: int = 0
    #: ``vectors`` are the leading rows of a writable buffer made for this batch alone, with room
    #: after them: the partition that receives it may keep the buffer instead of copying it.
    spare: bool = False

    def head(self, count: int) -> VectorBatch:
        """The first ``count`` memories (a view of the vectors: a buffer with room after them
        stays one)."""
        if count >= len(self.rowids):
            return self
        return VectorBatch(
            self.rowids[:count],
            self.vectors[:count],
            self.texts[:count],
            self.kinds[:count],
            self.dates[:count],
            self.turns[:count],
            None if self.queries is None else self.queries[:count],
            None if self.responses is None else self.responses[:count],
            min(self.from_rows, count),
            self.spare,
        )


@dataclasses.dataclass
class ForgetColumns:
    """What a forgetting pass needs of each memory, as arrays in the order of
    :meth:`Storage.memories`: rowids, the day number (days since 1970-01-01) forgetting counts
    from (last recall, else the memory's date) and the strength."""

    rowids: np.ndarray
    anchors: np.ndarray
    strengths: np.ndarray
    #: Each memory's content weight (see :mod:`memory_bank.salience`), when asked for.
    weights: np.ndarray | None = None


class Storage(abc.ABC):
    """What the memory bank needs from a database. All methods are thread-safe.

    Reads list memories in one order: by date, a day's turns before its other records, by turn
    number (missing first), then rowid.
    """

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def snapshot(self) -> contextlib.AbstractContextManager[None]:
        """A block in which this thread's reads see one consistent state."""

    # users
    @abc.abstractmethod
    def get_user(self, name: str) -> UserRecord | None: ...
    @abc.abstractmethod
    def ensure_user(self, name: str, extra: dict[str, Any] | None = None) -> UserRecord: ...
    @abc.abstractmethod
    def list_users(self) -> list[UserRecord]: ...
    @abc.abstractmethod
    def user_state(self, user_id: int) -> tuple[int, int]:
        """The user's ``(version, epoch)`` counters; raises UserNotFoundError if deleted."""

    def user_counters(self, user_id: int) -> tuple[int, int, int]:
        """``(version, epoch, tiers)``: :meth:`user_state` and the count of changes that only
        moved memories between the live and the forgotten tier (a partition holding both tiers
        keeps its index; only its live set changes). A backend without that count reports
        tier moves as epochs."""
        return (*self.user_state(user_id), 0)

    @abc.abstractmethod
    def set_user_extra(self, user_id: int, extra: dict[str, Any]) -> None: ...
    @abc.abstractmethod
    def set_forget_date(self, user_id: int, date: str) -> None: ...
    @abc.abstractmethod
    def delete_user(self, user_id: int) -> int:
        """Delete a user with every memory and vector; returns how many memories there were."""

    @abc.abstractmethod
    def replace_user(
        self,
        name: str,
        extra: dict[str, Any],
        memories: Sequence[Memory],
        embedded: Sequence[int],
        vectors: np.ndarray | None,
        encoder: str,
        *,
        replace: bool = True,
    ) -> UserRecord:
        """In one transaction: delete the user ``name`` if present, create them anew with
        ``extra`` and insert ``memories`` (``vectors[j]`` belongs to ``memories[embedded[j]]``);
        sets each memory's ``rowid``. All or nothing: an import never leaves a user half-written
        or their old data gone. With ``replace=False`` a user of that name, even one created
        since the caller looked (another import, a chat's first turn), is an error and nothing
        is written."""

    # writing memories
    @abc.abstractmethod
    def add_turn(
        self,
        user_id: int,
        memory: Memory,
        vector: np.ndarray | None,
        encoder: str,
        *,
        stale: Iterable[MemoryKind] = (),
        recalled: Sequence[tuple[int, str]] = (),
        revived: Sequence[tuple[int, str]] = (),
        revive_deleted: bool = False,
    ) -> Memory:
        """Append a turn numbered after the day's turns, and never below a deleted turn's number
        (the user's :data:`TURN_FLOOR` and :data:`TURN_BASE`). ``memory.memory_id`` ending in
        ``{turn}`` is a template filled with that number; any other id is an idempotency key
        (a memory the user already has under it is returned and nothing is written), and one
        that a delete retired (:meth:`retired_on`) raises
        :class:`~memory_bank.errors.MemoryDeletedError` unless ``revive_deleted``.

        In the same transaction (one per chat reply, not three): the user's memories of the
        ``stale`` kinds on the turn's day are marked stale (:meth:`mark_stale`), and the
        memories ``recalled`` are reinforced on the turn's day and those ``revived`` (forgotten
        ones a reply used) come back to the live tier, as :meth:`reinforce` does."""

    @abc.abstractmethod
    def add_memories(
        self, user_id: int, memories: Sequence[Memory], vectors: np.ndarray | None, encoder: str
    ) -> list[int]:
        """Insert memories, returning their rowids; an id the user already has with the same
        content is not inserted again, with other content it is an InvalidInputError."""

    @abc.abstractmethod
    def upsert_memory(
        self,
        user_id: int,
        memory: Memory,
        vector: np.ndarray | None,
        encoder: str,
        *,
        scrub_dates: Iterable[str] | None = None,
        only_existing: bool = False,
    ) -> Memory:
        """Insert or replace (by memory id) a memory, keeping a replaced one's strength; with
        ``scrub_dates`` (``memory`` a turn whose words are replaced), in the same transaction
        blank the daily layers of those dates and the global layers, as :meth:`delete_memories`
        does. ``only_existing``: replace only, never insert (a re-index racing a delete in another
        process must not bring the memory back); ``memory.rowid`` is then 0 if it was gone."""

    @abc.abstractmethod
    def put_vectors(self, rowids: Sequence[int], vectors: np.ndarray, encoder: str) -> None: ...
    @abc.abstractmethod
    def reinforce(
        self,
        user_id: int,
        recalled: Sequence[tuple[int, str]],
        date: str,
        *,
        revived: Sequence[tuple[int, str]] = (),
    ) -> None:
        """Recall memories: strength + 1 and the recall date set to ``date``, at most once a day
        (a recall on or before the last recall day changes nothing) and never on a day before
        the memory's own (its clock never moves back); in the same transaction,
        the ``revived`` ones (recalled, and forgotten) come back to the live tier, except the ones
        the user hid. Each memory is given as (rowid, memory id), as it was read, and its row
        changes only while it still holds that memory id: SQLite gives a deleted latest memory's
        rowid to the next memory stored, which a recall read before the delete must not reach."""

    @abc.abstractmethod
    def set_archived(
        self,
        user_id: int,
        rowids: Sequence[int],
        archived: bool,
        *,
        hidden: bool = False,
        anchored_before: str | None = None,
        scrub_dates: Iterable[str] | None = None,
    ) -> None:
        """Archive memories (out of the live tier; ``hidden``: out of every search, the cold
        tier's too) or, with ``archived=False``, bring them back (unhidden as well).
        ``scrub_dates``: in the same transaction, blank the summaries that may quote them, as
        :meth:`delete_memories` does (hidden memories are not found through a summary either).

        ``anchored_before`` (a day, ``YYYY-MM-DD``): only those whose forgetting clock (last
        recall, else date) still starts before that day, checked as they are written. A
        forgetting pass of that day gives it: a memory recalled (or a rowid reused by a memory
        stored) after the pass read the store has retention 1 on its day and is kept."""

    @abc.abstractmethod
    def delete_memories(
        self,
        user_id: int,
        rowids: Sequence[int],
        scrub_dates: Iterable[str] | None = None,
        *,
        anchored_before: str | None = None,
        retire: bool = True,
    ) -> int:
        """Delete memories; with ``scrub_dates``, in the same transaction blank the daily layers of
        those dates and the global layers (marked stale, to be regenerated without them).
        ``anchored_before``: as for :meth:`set_archived`. ``retire``: the deleted turns' ids
        that a caller chose (not the bank's own ``<user>_<day>_<n>``) are retired, so that a
        retried add of one is refused (:meth:`retired_on`)."""

    @abc.abstractmethod
    def retired_on(self, user: str, memory_id: str) -> str | None:
        """The day ``user``'s memory id ``memory_id`` was deleted and retired, if it was (a
        deleted user's for :data:`RETIRED_USER_DAYS`, a live user's until it is stored again)."""

    @abc.abstractmethod
    def delete_archived(self, user_id: int) -> int:
        """Delete the user's archived (forgotten) memories for good; returns how many. In the
        same transaction the daily layers of their turns' days and the global layers are
        blanked and marked stale, as :meth:`delete_memories` does with ``scrub_dates``."""

    def retired_ids(self) -> list[tuple[str, str | None, str, str | None]]:
        """Every retired id's record (:meth:`retired_on`): ``(digest, the live user's name or None,
        deleted on, expires on or None)``, what a copy of the store (``memorybank migrate``, a
        PostgreSQL backup) carries over. A backend that keeps none returns none."""
        return []

    def put_retired_ids(self, rows: Sequence[tuple[str, str | None, str, str | None]]) -> None:
        """Add records read by :meth:`retired_ids` of another store (users matched by name; a
        digest already held is kept). A backend that keeps none keeps none of these either."""
        return None

    def archived_turn_days(self, user_id: int) -> list[str]:
        """The days (ascending) of the user's archived turns (what :meth:`delete_archived` would
        delete). A backend reads them from its index of archived memories."""
        return sorted({m.date for m in self.memories(user_id, [MemoryKind.TURN]) if m.archived})

    @abc.abstractmethod
    def mark_stale(self, user_id: int, kinds: Iterable[MemoryKind], dates: Iterable[str] | None) -> int: ...

    @abc.abstractmethod
    def blank_layers(self, user_id: int, dates: Iterable[str]) -> int:
        """Blank, as deleting a turn of ``dates`` does, the summaries that may quote it: the
        user's daily layers of ``dates`` and their global layers (not those the user hid) lose
        their text and vectors and are marked stale, to be made again. Returns how many had
        words (0 for a user that no longer exists)."""

    # reading memories
    def memories(
        self,
        user_id: int,
        kinds: Iterable[MemoryKind] | None = None,
        include_archived: bool = True,
        rowids: Sequence[int] | None = None,
        *,
        date: str | None = None,
    ) -> list[Memory]:
        """The user's memories, optionally only of ``kinds``, of one ``date``, or these ``rowids``."""
        if rowids is not None and not len(rowids):
            return []
        return self._memories(
            user_id,
            None if kinds is None else [k.value for k in kinds],
            include_archived,
            None if rowids is None else [int(r) for r in rowids],
            date,
        )

    @abc.abstractmethod
    def _memories(
        self, user_id: int, kinds: list[str] | None, archived: bool, rowids: list[int] | None, day: str | None
    ) -> list[Memory]:
        """:meth:`memories` with its filters normalised: kind values, integer rowids (never empty);
        ``archived``: whether archived memories are included."""

    @abc.abstractmethod
    def memories_by_ids(self, user_id: int, memory_ids: Iterable[str]) -> list[Memory]:
        """The user's memories with these memory ids (the ones that exist), an index lookup."""

    def has_memories(self, user_id: int, *, include_archived: bool = False) -> bool:
        """Whether the user has any memory (unarchived ones only, unless ``include_archived``).
        A backend answers from an index, without listing the user's history."""
        return bool(self.memories(user_id, include_archived=include_archived))

    def last_turn_day(self, user_id: int) -> str | None:
        """The latest day on which the user has a turn (any: hidden and forgotten ones too)."""
        return max((m.date for m in self.memories(user_id, [MemoryKind.TURN])), default=None)

    def turn_days(self, user_id: int) -> list[str]:
        """The days (ascending) on which the user has turns they have not hidden (forgotten ones
        count: the day summaries are made from them)."""
        turns = self.memories(user_id, [MemoryKind.TURN], include_archived=True)
        return sorted({m.date for m in turns if not m.hidden})

    def get_memory(self, user_id: int, memory_id: str) -> Memory | None:
        """The user's memory with this id, or ``None``."""
        found = self.memories_by_ids(user_id, [memory_id])
        return found[0] if found else None

    @abc.abstractmethod
    def last_turn(self, user_id: int, date: str) -> Memory | None:
        """The latest turn of ``user_id`` on ``date`` (for a new turn's context)."""

    @abc.abstractmethod
    def counts(self) -> dict[str, Any]:
        """``{"users": n, "memories": {kind: n}, "archived": n}`` over the whole store."""

    # vectors
    @abc.abstractmethod
    def vectors(
        self,
        user_id: int,
        encoder: str,
        kinds: Iterable[MemoryKind],
        after_rowid: int = 0,
        *,
        archived: bool | None = False,
        upto_rowid: int | None = None,
        texts: bool = True,
    ) -> VectorBatch:
        """The ``encoder``'s vectors of the user's unarchived memories of ``kinds`` after
        ``after_rowid`` (and up to ``upto_rowid``), in rowid order (``archived=True``: of the
        forgotten ones, the cold tier; ``None``: of both). Hidden memories never. With
        ``texts=False`` the batch carries no texts, queries or replies (a partition whose
        lexical index comes from a snapshot does not read them)."""

    def seal_vector_blocks(self, user_id: int, encoder: str, epoch: int) -> int:
        """Store the user's vectors of ``encoder`` that no block holds yet in blocks (see
        :mod:`memory_bank.vector_blocks`), unless the user's ``epoch`` is no longer ``epoch``;
        returns how many memories the new blocks hold. A backend without blocks stores none."""
        return 0

    @abc.abstractmethod
    def missing_vectors(self, encoder: str, kinds: Iterable[MemoryKind]) -> list[tuple[int, str]]:
        """``(rowid, index text)`` of every memory of ``kinds`` with no vector from ``encoder``."""

    # the persisted lexical index (memory_bank.lexical_snapshot); a backend without one rebuilds
    def lexical_snapshot(self, user_id: int, encoder: str, tokenizer: str) -> bytes | None:
        """The user's stored lexical snapshot made for ``encoder``'s partition by ``tokenizer``
        (a :data:`memory_bank.text.TOKENIZER_VERSION`), or ``None``."""
        return None

    def scrub(self) -> None:
        """After a write that overwrote a memory's words: leave no earlier copy of them in a
        file where the backend keeps one (SQLite's write-ahead log). Best effort; a backend
        that keeps none has nothing to do."""
        return None

    def has_lexical_snapshot(self, user_id: int, encoder: str, tokenizer: str) -> bool:
        """Whether :meth:`lexical_snapshot` would return one (without reading it)."""
        return self.lexical_snapshot(user_id, encoder, tokenizer) is not None

    def put_lexical_snapshot(
        self, user_id: int, encoder: str, tokenizer: str, epoch: int, data: bytes
    ) -> bool:
        """Store the user's lexical snapshot, replacing theirs, unless the user's ``epoch`` is
        no longer ``epoch`` (a memory changed meanwhile: the snapshot may be stale). Returns
        whether it was stored. A backend deletes the snapshot in every transaction that
        rewrites or deletes a memory."""
        return False

    def embeddings(self, user_id: int) -> dict[int, tuple[str, np.ndarray]]:
        """Every stored vector of the user's memories, archived ones included: ``rowid ->
        (encoder, vector)``. What a migration copies; a store that cannot list them cannot be
        migrated from."""
        raise StoreError(f"{type(self).__name__} cannot list stored embeddings; it cannot be migrated")

    # the store's own settings (the ``meta`` table of the SQL backends)
    def meta(self) -> dict[str, str]:
        """The store's recorded settings (e.g. its encoder, :mod:`memory_bank.encoder_identity`);
        a backend without such a record has none."""
        return {}

    def set_meta(self, values: dict[str, str], *, replace: bool = False) -> None:
        """Record settings in one transaction; without ``replace`` a key already recorded keeps
        its value (the first writer wins). A backend without such a record ignores them."""
        return None

    def vector_encoders(self) -> dict[tuple[str, int], int]:
        """How many stored vectors each ``(encoder, dim)`` made (what an older store's vectors
        say about its encoder)."""
        return {}

    # narrow reads with generic fallbacks a backend may replace by a lighter query
    def memory_keys(self, user_id: int, rowids: Sequence[int]) -> dict[int, tuple[str, MemoryKind, str]]:
        """``rowid -> (memory_id, kind, date)`` of these memories of the user (the ones that exist)."""
        out: dict[int, tuple[str, MemoryKind, str]] = {}
        for start in range(0, len(rowids), 10_000):
            for m in self.memories(user_id, rowids=rowids[start : start + 10_000]):
                out[m.rowid or 0] = (m.memory_id, m.kind, m.date)
        return out

    def forget_columns(
        self, user_id: int, kinds: Iterable[MemoryKind], *, weights: bool = False
    ) -> ForgetColumns:
        """Rowids, recall anchors and strengths (and with ``weights``, content weights) of the
        user's unarchived memories of ``kinds``, in the order of :meth:`memories`."""
        from memory_bank.forgetting import day_number

        mems = self.memories(user_id, kinds=kinds, include_archived=False)
        return ForgetColumns(
            np.fromiter((m.rowid or 0 for m in mems), dtype=np.int64, count=len(mems)),
            np.fromiter((day_number(m.recall_anchor) for m in mems), dtype=np.int64, count=len(mems)),
            np.fromiter((m.strength for m in mems), dtype=np.float64, count=len(mems)),
            np.fromiter((m.weight for m in mems), dtype=np.float64, count=len(mems)) if weights else None,
        )


@dataclasses.dataclass(frozen=True)
class Backend:
    """How the registry (:mod:`memory_bank.stores`) reaches one kind of store.

    ``open(spec, create)`` opens the store named by ``spec`` (a URL of this backend's scheme, or a
    plain path for the default backend); ``describe(spec)`` names it for messages, with no
    password in the name.
    """

    open: Callable[[str, bool], Storage]
    describe: Callable[[str], str]
