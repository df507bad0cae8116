"""The :class:`MemoryBank` facade: one object that owns the store, the encoder, the per-user
indexes, forgetting and the clock.

>>> from memory_bank import MemoryBank
>>> bank = MemoryBank.open("/tmp/mb-doc", encoder="hashing")          # doctest: +SKIP
>>> bank.add_turn("Emily", "I adopted a cat named Miso.", "What a lovely name!", at="2023-05-04T18:00")
>>> [r.memory.text for r in bank.search("Emily", "what is my cat called?", k=1)]
['I adopted a cat named Miso.\\nWhat a lovely name!']
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime as dt
import json
import logging
import math
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import memory_bank.forgetting as forgetting
from memory_bank import background, salience
from memory_bank import encoder_identity as identity
from memory_bank.cold import ColdTier
from memory_bank.config import MemoryBankConfig, load_config
from memory_bank.embeddings import Encoder, canonical_name, get_encoder
from memory_bank.errors import (
    EncoderMismatchError,
    InvalidInputError,
    MemoryBankError,
    MemoryDeletedError,
    MemoryNotFoundError,
    UserNotFoundError,
)
from memory_bank.explain import STRONG_RETENTION, Explanation, Status
from memory_bank.index import Partition, PartitionCache, SnapshotStore
from memory_bank.lexical_snapshot import LexicalSnapshot
from memory_bank.records import (
    MAX_STRENGTH,
    RETRIEVABLE_KINDS,
    Memory,
    MemoryKind,
    SearchResult,
    index_text,
    layer_id,
    turn_text,
)
from memory_bank.retrieval import rank
from memory_bank.retrieval.dialogue import query_vector
from memory_bank.retrieval.query import member
from memory_bank.stores import ForgetColumns, Storage, UserRecord, VectorBatch, describe_store
from memory_bank.text import MAX_TEXT as MAX_TEXT  # re-exported: the limit of one message
from memory_bank.text import (
    MAX_USER_NAME,
    TOKENIZER_VERSION,
    check_unicode,
    parse_day,
    parse_time,
    user_key,
    validate_user,
)
from memory_bank.text import check_text as _check_text

logger = logging.getLogger(__name__)

#: A lone surrogate (a byte a file name or terminal argument did not decode, as Python keeps it):
#: no store can hold one, so :meth:`MemoryBank.find_user` lets the user-name rule refuse it.
_SURROGATE = re.compile("[\ud800-\udfff]")

Clock = Callable[[], dt.datetime]

#: How many days a turn said now may be dated after the clock's day, to stay after the user's
#: latest turn (see ``MemoryBank.add_turn(in_order=...)``): time zones span 26 hours, so two days
#: cover a flight and a corrected clock; a later latest turn (a file dated in 2099) is not followed.
_CLOCK_BACK_DAYS = 2

When = dt.datetime | dt.date | str | None


_OWN_ID = r"_(?:overall_history|overall_personality|\d{4}-\d{2}-\d{2}_(?:summary|personality|\d+))"


def _check_memory_id(owner: str, memory_id: Any) -> None:
    """A caller's memory id: a non-empty string, and not one the bank gives its own memories
    (``<user>_<day>_<turn>``, ``<user>_<day>_summary``, ``<user>_overall_history``...): a
    summary layer written later would replace the memory, or the turn numbered so would be
    taken for it."""
    if not isinstance(memory_id, str) or not memory_id.strip() or memory_id.endswith("{turn}"):
        raise InvalidInputError(
            f"memory_id must be a non-empty string not ending in '{{turn}}', got {memory_id!r}"
        )
    check_unicode(memory_id, "memory_id")
    if any(unicodedata.category(c) == "Cc" for c in memory_id):  # NUL, line breaks: never found again
        raise InvalidInputError(f"memory_id {memory_id!r} contains control characters; use visible ones")
    if re.fullmatch(re.escape(owner) + _OWN_ID, memory_id):
        raise InvalidInputError(
            f"memory_id {memory_id!r} has the form of the ids the bank gives the user's own memories "
            f"({owner}_<day>_<turn>, {owner}_<day>_summary, {owner}_overall_history...); choose another id"
        )


#: The kinds of a day: deleting or hiding one blanks the summaries that may quote it.
_DAY_KINDS = frozenset({MemoryKind.TURN, MemoryKind.DAILY_SUMMARY, MemoryKind.DAILY_PERSONALITY})


def _turn_order(m: Memory) -> tuple[int, int]:
    return (-1 if m.turn is None else m.turn, m.rowid or 0)


def _context_of(previous: Memory | None) -> str | None:
    """What a turn after ``previous`` is indexed with: its reply, none after a hidden turn."""
    return previous.response if previous is not None and previous.response and not previous.hidden else None


def _check_extra(extra: Any) -> None:
    """``extra`` must be a dict the store can write as JSON (checked before anything is written)."""
    if extra is None:
        return
    if not isinstance(extra, dict):
        raise InvalidInputError(f"extra must be a dict, got {type(extra).__name__}")
    try:
        json.dumps(extra, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as e:
        raise InvalidInputError(
            f"extra cannot be stored as JSON ({type(e).__name__}: {e}); give strings, numbers, "
            "booleans, lists and dicts only"
        ) from e


def _forgotten(recalled: Sequence[Memory], report: ForgetReport | None) -> list[Memory]:
    """The recalled memories that a recall brings back to the live tier: those forgotten
    (persisted, or by the day's pass ``report`` just now), not those the user hid."""
    gone = set(report.forgotten) if report is not None else set()
    return [m for m in recalled if (m.archived or m.memory_id in gone) and not m.hidden]


def _keys(memories: Sequence[Memory]) -> list[tuple[int, str]]:
    """How a recall names ``memories`` to the store: (rowid, memory id), as they were read."""
    return [(m.rowid or 0, m.memory_id) for m in memories]


def _note_recall(memories: Sequence[Memory], day: str) -> None:
    """What :meth:`MemoryBank.reinforce` stored, on the in-memory copies: strength + 1 and
    the recall date ``day``, at most once a day (each object once, however often listed), never
    on a day before the memory was learned (its clock never moves back)."""
    for m in {id(m): m for m in memories}.values():
        if (m.last_recall_date is None or m.last_recall_date < day) and m.date[:10] <= day:
            m.strength = min(m.strength + 1, MAX_STRENGTH)
            m.last_recall_date = day


def ascending_ids(ids: np.ndarray) -> np.ndarray:
    """``np.sort(ids)`` for distinct non-negative ids (rowids). Where they are dense (spanning
    less than 8 times their count) they are marked in a bitmap and read back in order: O(n),
    about 10 against 49 ms for a million rowids (the live set, recomputed on a user's first
    search of each day); elsewhere, and should any repeat, they are sorted."""
    n = len(ids)
    if n < 4096:
        return np.sort(ids)
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi - lo >= 8 * n:
        return np.sort(ids)
    mark = np.zeros(hi - lo + 1, dtype=bool)
    mark[ids - lo] = True
    out = np.flatnonzero(mark)
    if len(out) != n:
        return np.sort(ids)
    out += lo
    return out.astype(ids.dtype, copy=False)


def _as_datetime(value: When, clock: Clock) -> dt.datetime:
    if value is None:
        return clock()
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    return parse_time(value)


def _as_date(value: When, clock: Clock) -> dt.date:
    if isinstance(value, str):
        return dt.date.fromisoformat(parse_day(value, "now"))
    return _as_datetime(value, clock).date()


@dataclasses.dataclass
class ForgetReport:
    """What a forgetting pass did, per user."""

    now: str
    mode: str
    examined: int = 0
    forgotten: list[str] = dataclasses.field(default_factory=list)
    action: str = "archive"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class _EarlyColumns:
    """A read of the forgetting columns started beside a partition build, and the user's
    counters just before it (see ``MemoryBank._read_forget_columns_early``)."""

    state: tuple[int, int, int]
    columns: concurrent.futures.Future[tuple[ForgetColumns, list[str]]]


class MemoryBank:
    """Long-term memory for a chatbot: three layers per user, hybrid retrieval, forgetting.

    Args:
        config: a :class:`MemoryBankConfig` (or build one from keyword ``overrides``).
        storage: a :class:`Storage` (default: SQLite in ``config.store``).
        encoder: an :class:`Encoder` instance, overriding the configured encoder.
        clock: returns "now"; inject a fixed clock to replay history or test forgetting.

    Example::

        bank = MemoryBank.open("./memories", language="en")
        bank.add_turn("Emily", "I went to the museum today.", "How was it?")
        for hit in bank.search("Emily", "Which museum did I visit?", k=2):
            print(hit.memory.date, hit.score, hit.memory.text)
    """

    def __init__(
        self,
        config: MemoryBankConfig | None = None,
        *,
        storage: Storage | None = None,
        encoder: Encoder | None = None,
        clock: Clock | None = None,
        **overrides: Any,
    ) -> None:
        self.config = config if config is not None else load_config(None, **overrides)
        if config is not None and overrides:
            self.config = load_config(None, **{**config.model_dump(), **overrides})
        if storage is None:
            from memory_bank.stores import open_storage

            storage = open_storage(self.config.store)
        self.storage: Storage = storage
        self._encoder = encoder
        #: The encoder once checked against the store's (see :attr:`encoder`).
        self._checked: Encoder | None = None
        #: Whether the store records this bank's encoder as its own.
        self._claimed = False
        self.clock: Clock = clock or dt.datetime.now
        self._cache = PartitionCache(
            loader=self._load_vectors,
            state=self._user_state,
            dim=lambda: self.encoder.dim,
            max_users=self.config.max_cached_users,
            snapshots=SnapshotStore(
                self._load_snapshot, self._save_snapshot, self._seal_vectors, self._has_snapshot
            ),
            tiers_kept=self._holds_both_tiers,
        )
        self._forget_lock = threading.Lock()
        #: The epoch each user had when this bank last checked the store's encoder.
        self._epochs: dict[int, int] = {}
        #: Forgotten memories, consulted when the live ones match poorly (``forgetting.cold_tier``).
        self.cold = ColdTier(
            self.storage,
            lambda: self.encoder_name,
            lambda: self.encoder.dim,
            self.config.max_cached_users,
        )

    @classmethod
    def open(
        cls, store: str | Path | None = None, *, config_file: str | Path | None = None, **overrides: Any
    ) -> MemoryBank:
        """Open (or create) the bank stored in ``store`` (a directory or URL; ``None``: the
        ``store:`` of ``config_file``, which must then give one)."""
        clock = overrides.pop("clock", None)
        encoder = overrides.pop("encoder_instance", None)
        config = load_config(config_file, store=None if store is None else str(store), **overrides)
        if store is None and "store" not in config.model_fields_set:
            raise InvalidInputError(
                "no store given: pass MemoryBank.open(store) or set store: in the config file"
            )
        return cls(config, clock=clock, encoder=encoder)

    def close(self) -> None:
        self._cache.close()
        self.storage.close()

    def __enter__(self) -> MemoryBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- encoder ------------------------------------------------------------------------------
    @property
    def encoder(self) -> Encoder:
        """The encoder, loaded on first use (opening a bank loads no model), checked against
        the store's (see :mod:`memory_bank.encoder_identity`): an encoder asked for by name
        (``encoder=``, the config key ``encoder``, ``--encoder``) that is not the store's is an
        :class:`EncoderMismatchError`; the language's default encoder gives way to the store's."""
        if self._checked is None:
            self._checked = self._store_encoder()
        return self._checked

    @property
    def encoder_name(self) -> str:
        """The encoder's name, without loading it: the store's encoder, else the configured one."""
        if self._checked is not None:
            return self._checked.name
        stored = self._recorded_encoder()
        if stored is not None and self._encoder is None and self.config.encoder is None:
            return stored.name
        return self._encoder.name if self._encoder is not None else self.config.encoder_for()

    def _recorded_encoder(self) -> identity.StoreEncoder | None:
        """The encoder the store records, else the one its vectors name (an older store)."""
        return identity.recorded(self.storage.meta()) or identity.from_vectors(self.storage.vector_encoders())

    def _asked_encoder(self) -> tuple[str, bool]:
        """The encoder this bank would use on an empty store, and whether it was asked for by
        name (an instance, the config key ``encoder``) rather than following from the language."""
        if self._encoder is not None:
            return self._encoder.name, True
        return canonical_name(self.config.encoder_for()), self.config.encoder is not None

    def _store_encoder(self) -> Encoder:
        stored = self._recorded_encoder()
        wanted, asked = self._asked_encoder()
        store = describe_store(self.config.store)  # a URL's password is never printed
        where = f"the store {store!r}"
        if stored is not None and stored.name != wanted:
            switch = (
                f"switch the store to {wanted!r} with 'memorybank reembed --store {store} --encoder {wanted}'"
            )
            if asked:
                raise EncoderMismatchError(
                    f"{where} holds vectors of encoder {identity.describe(stored)}, not {wanted!r}: "
                    f"pass --encoder {stored.name} (config key 'encoder: {stored.name}', "
                    f"MemoryBank(encoder={stored.name!r})) to use it, or {switch}"
                )
            try:
                encoder = get_encoder(stored.name)
            except MemoryBankError as e:
                raise EncoderMismatchError(
                    f"{where} holds vectors of encoder {identity.describe(stored)}, which cannot be "
                    f"loaded here ({e}); install it, or {switch}"
                ) from e
            # Said, not only logged for debugging, when the store is another language's (asking
            # for Chinese on a store the English encoder wrote searches Chinese with it: 26%
            # top-3 on a Chinese probe set); a store made with an encoder of its own choosing
            # is followed quietly, or every command would warn.
            other_language = stored.name in self.config.encoders.values()
            (logger.warning if other_language else logger.info)(
                "%s was embedded with %r: using it instead of %r (the %s default); to switch, run "
                "'memorybank reembed --store %s --encoder %s'",
                where,
                stored.name,
                wanted,
                self.config.language,
                store,
                wanted,
            )
        else:
            encoder = self._encoder if self._encoder is not None else get_encoder(wanted)
        if stored is not None:
            why = identity.difference(stored, encoder)
            if why is not None:
                raise EncoderMismatchError(
                    f"encoder {encoder.name!r} cannot read {where}: {why}; re-embed the store with "
                    f"'memorybank reembed --store {store} --encoder {encoder.name}'"
                )
        return encoder

    def check_encoder(self, *, load_new: bool = False) -> None:
        """Refuse now, loading no model, an encoder asked for by name that is not the store's:
        what an app does at start rather than at its first message (the dimension and
        fingerprint are checked when the encoder is first used). ``load_new``: an encoder asked
        for on a store that records none yet (a new one) is loaded now, so a name that cannot
        load is refused at start instead of failing every message."""
        stored = self._recorded_encoder()
        wanted, asked = self._asked_encoder()
        if asked and stored is not None and stored.name != wanted:
            self._store_encoder()  # raises the mismatch with its fix
        if load_new and asked and stored is None:
            self.encoder  # noqa: B018 (loads it, or raises naming the problem)

    def _refuse_half_switched(self, meta: Mapping[str, str]) -> None:
        """Refuse to build a partition while ``memorybank reembed`` is switching the store's
        encoder, or after it was interrupted: the memories it re-embedded have only the new
        encoder's vectors, and a search with the store's would silently leave them out."""
        target = meta.get(identity.SWITCHING_KEY)
        if target:
            store = describe_store(self.config.store)
            raise EncoderMismatchError(
                f"the store {store!r} is being re-embedded with encoder {target!r}, or a re-embedding "
                f"was interrupted: the memories done so far cannot be searched until it ends. Finish it "
                f"with 'memorybank reembed --store {store} --encoder {target}'"
            )

    def _follow_store_encoder(self, meta: Mapping[str, str] | None = None) -> None:
        """Notice that another process switched the store to another encoder since this bank
        checked it (``memorybank reembed``): this bank's searches then read vectors of an
        encoder the store no longer has (finding nothing, silently) and its writes stored
        vectors no search of the store's encoder finds. Its caches go, and the encoder is
        checked again as at open: the store's is taken, or, where this bank's was asked for by
        name, the mismatch is raised with its fix. One read of the store's small meta table (or meta, read already)."""
        if self._checked is None:
            return
        stored = identity.recorded(self.storage.meta() if meta is None else meta)
        if stored is None or canonical_name(stored.name) == canonical_name(self._checked.name):
            return
        logger.warning(
            "the store %r was switched to encoder %r by another process; following it",
            self.config.store,
            stored.name,
        )
        self._checked, self._claimed = None, False
        self._cache.clear()
        self.cold.clear()
        self.encoder  # noqa: B018 - the store's encoder, or the mismatch with its fix

    def _writing_encoder(self) -> Encoder:
        """The encoder, recorded as the store's before its first vectors are written (a store
        takes the first encoder that writes into it; a concurrent writer with another loses)."""
        if self._claimed:
            self._follow_store_encoder()
        encoder = self.encoder
        if not self._claimed:
            stored = identity.recorded(self.storage.meta())
            if stored is None or stored.fingerprint is None or stored.name != encoder.name:
                self.storage.set_meta(identity.meta_of(encoder))
                stored = identity.recorded(self.storage.meta())
                if stored is not None and stored.name != encoder.name:
                    self._checked = None
                    self.encoder  # noqa: B018 - raises the mismatch with its fix
            self._claimed = True
        return encoder

    def _embed(self, texts: Sequence[str], *, write: bool = False) -> np.ndarray:
        """Vectors of ``texts``; ``write`` when they go into the store."""
        encoder = self._writing_encoder() if write else self.encoder
        return encoder.encode(list(texts))

    # -- users --------------------------------------------------------------------------------
    def users(self) -> list[str]:
        return [u.name for u in self.storage.list_users()]

    def find_user(self, name: str) -> UserRecord | None:
        """The user ``name`` names, under the one user-name rule (:func:`validate_user`), or
        ``None``. A user stored under exactly ``name`` comes first: users stored before the rule
        under a name it refuses or changes (``' Jason '``, a trailing zero-width joiner) stay
        reachable by their exact name; then the rule's form of ``name``; then the one stored
        user whose name the rule makes the same (two such users are an error naming both)."""
        if isinstance(name, str) and len(name) <= 4 * MAX_USER_NAME and not _SURROGATE.search(name):
            rec = self.storage.get_user(name)  # (no stored name holds a surrogate: the rule says why)
            if rec is not None:
                return rec
        key = validate_user(name)
        rec = self.storage.get_user(key) if key != name else None
        if rec is not None:
            return rec
        same = [u for u in self.storage.list_users() if u.name != key and user_key(u.name) == key]
        if len(same) > 1:
            raise InvalidInputError(
                f"user name {name!r} matches {len(same)} stored users ({', '.join(repr(u.name) for u in same[:5])}); "
                "give the exact stored name"
            )
        return same[0] if same else None

    def user(self, name: str, *, create: bool = False) -> UserRecord:
        """The user record for ``name`` (see :meth:`find_user`); with ``create``, a missing user
        is created under the rule's form of the name."""
        rec = self.find_user(name)
        if rec is None:
            if not create:
                # Other users' names are not named: the message reaches MCP clients and the web
                # page, where one user must not learn who else keeps memories here.
                raise UserNotFoundError(
                    f"no memories for user {name!r} (names are case-sensitive; check the spelling)"
                )
            rec = self.storage.ensure_user(validate_user(name))
        return rec

    def has_user(self, name: str) -> bool:
        try:
            self.user(name)
        except UserNotFoundError:
            return False
        return True

    def has_memories(self, name: str) -> bool:
        """Whether ``name`` is a user with at least one memory that is not forgotten (one index
        lookup, whatever the size of the history)."""
        try:
            rec = self.user(name)
        except UserNotFoundError:
            return False
        return self.storage.has_memories(rec.id)

    def delete_user(self, name: str) -> int:
        """Delete a user and every memory, summary, portrait and vector of theirs. Returns the count."""
        rec = self.user(name)
        n = self.storage.delete_user(rec.id)
        self._cache.drop(rec.id)
        self.cold.drop(rec.id)
        logger.info("deleted user %r (%d memories)", rec.name, n)
        return n

    def _user_state(self, user_id: int) -> tuple[int, int, int]:
        """The user's counters, as the partition cache reads them before each search. A new
        epoch (a rebuild: every user's epoch moves when the store is re-embedded) checks first
        that the store still has this bank's encoder (:meth:`_follow_store_encoder`)."""
        state = self.storage.user_counters(user_id)
        if self._epochs.get(user_id) != state[1]:
            meta = self.storage.meta()
            self._refuse_half_switched(meta)
            self._follow_store_encoder(meta)
            if len(self._epochs) >= 16 * self.config.max_cached_users:
                self._epochs.clear()
            self._epochs[user_id] = state[1]
        return state

    def _load_vectors(
        self, user_id: int, after_rowid: int, upto_rowid: int | None, texts: bool
    ) -> VectorBatch:
        """The vectors of a user's partition: the live memories, and the forgotten ones too when
        the cold tier is ranked with them on every search (then the one partition holds both
        tiers, with its persisted lexical index, and forgetting costs no second index)."""
        return self.storage.vectors(
            user_id,
            self.encoder_name,
            RETRIEVABLE_KINDS,
            after_rowid,
            archived=None if self._holds_both_tiers() else False,
            upto_rowid=upto_rowid,
            texts=texts,
        )

    def _both_tiers(self) -> bool:
        """Whether every search ranks live and forgotten memories as one set (the default)."""
        f = self.config.forgetting
        return f.cold_tier and f.mode != "off" and f.cold_rank == "joint" and math.isinf(f.cold_below)

    def _holds_both_tiers(self) -> bool:
        """Whether a user's partition holds the forgotten memories too: when they are ranked
        with the live ones, and with forgetting off, where nothing is forgotten (what an earlier
        setting forgot is found again, as if it had never faded)."""
        return self._both_tiers() or self.config.forgetting.mode == "off"

    def _load_snapshot(self, user_id: int) -> LexicalSnapshot | None:
        data = self.storage.lexical_snapshot(user_id, self.encoder_name, TOKENIZER_VERSION)
        if data is None:
            return None
        try:
            return LexicalSnapshot.from_bytes(data)
        except ValueError as e:  # a damaged cache is rebuilt, never trusted
            logger.warning("ignoring the stored lexical index of user id %d: %s", user_id, e)
            return None

    def _has_snapshot(self, user_id: int) -> bool:
        return self.storage.has_lexical_snapshot(user_id, self.encoder_name, TOKENIZER_VERSION)

    def _seal_vectors(self, user_id: int, epoch: int) -> None:
        """Store the user's vectors in blocks, so the next restart reads them in a few rows
        (best effort, like the lexical snapshot: a read-only store reads rows again)."""
        try:
            n = self.storage.seal_vector_blocks(user_id, self.encoder_name, epoch)
            logger.debug("sealed %d vectors of user id %d into blocks", n, user_id)
        except MemoryBankError as e:
            logger.info("could not store the vector blocks of user id %d: %s", user_id, e)

    def _save_snapshot(self, user_id: int, epoch: int, snap: LexicalSnapshot) -> None:
        """Persist a partition's lexical index (best effort: a read-only store just rebuilds)."""
        try:
            self.storage.put_lexical_snapshot(
                user_id, self.encoder_name, TOKENIZER_VERSION, epoch, snap.to_bytes()
            )
        except MemoryBankError as e:
            logger.info("could not store the lexical index of user id %d: %s", user_id, e)

    # -- writing ------------------------------------------------------------------------------
    def add_turn(
        self,
        user: str,
        query: str,
        response: str = "",
        *,
        at: When = None,
        memory_id: str | None = None,
        extra: dict[str, Any] | None = None,
        recalled: Sequence[Memory] = (),
        revive_deleted: bool = False,
        standalone: bool = False,
        in_order: bool | None = None,
    ) -> Memory:
        """Store one dialog turn with the time it happened (default: now); searchable at once.

        ``memory_id`` (optional, e.g. the chat message's UUID) makes a retried add idempotent: if
        the user already has a memory with this id, it is returned and nothing is stored again;
        if the memory with this id was deleted (a retry or replay of a turn the user deleted
        since, even with the whole user), :class:`MemoryDeletedError` is raised and nothing is
        stored, unless ``revive_deleted`` (a key-value put after a delete). A deleted user's
        ids are remembered for :data:`~memory_bank.stores.base.RETIRED_USER_DAYS` days.
        ``extra`` is kept with the turn (JSON-serialisable; e.g. a LangGraph store item's value).
        ``recalled``: the user's memories the reply used (e.g. from :meth:`search`), reinforced
        on the turn's day as :meth:`reinforce` does, in the transaction that stores the turn and
        marks the day's summaries stale: a chat reply's memory writes are one commit. A recalled
        memory deleted meanwhile is not reinforced. ``standalone``: a note that answers nothing
        said before it (a memory the user adds by hand), indexed without the day's previous reply.
        ``in_order`` (default: when ``at`` is not given): a turn said now, after every turn stored,
        is dated no earlier than the user's latest turn's day, when that is at most two days after
        its own (a memory imported with a date years ahead is not followed). A clock that went back (a user who
        flew west, whose local time is a day behind; a corrected clock) would otherwise date it
        before the turns said hours earlier, and the history, the chat's resumed conversation and
        its prompt, which follow the days, would lose the last thing said. A turn given an earlier
        ``at`` on purpose (a replayed history) keeps it.
        """
        owner = self.find_user(user)  # the user-name rule, before anything is loaded or written
        if memory_id is not None:
            name = owner.name if owner is not None else validate_user(user)
            _check_memory_id(name, memory_id)
            if owner is None and not revive_deleted:  # before a deleted user is created again
                deleted_on = self.storage.retired_on(name, memory_id)
                if deleted_on is not None:
                    raise MemoryDeletedError(
                        f"memory {memory_id!r} of user {name!r} was deleted on {deleted_on}, with the "
                        "user; a retried or replayed add does not bring it back (store it under a new "
                        "id to keep it again)",
                        memory_id=memory_id,
                        deleted_on=deleted_on,
                    )
        _check_text(query, "query")
        _check_text(response, "response", allow_empty=True)
        _check_extra(extra)
        when = _as_datetime(at, self.clock)
        day = when.date().isoformat()
        text = turn_text(query, response)
        self._writing_encoder()  # an encoder that cannot load leaves no empty user behind
        rec = self.user(user, create=True)
        if at is None if in_order is None else in_order:
            ahead = (self._turn_day(rec, when.date()) - when.date()).days
            if ahead:
                when += dt.timedelta(days=ahead)
                day = when.date().isoformat()
        used = self._with_rowids(rec, recalled)
        report = self._daily_forget(rec, _as_date(None, self.clock), keep=used)
        context = None if standalone else _context_of(self.storage.last_turn(rec.id, day))
        vector = self._embed([index_text(text, context)], write=True)[0]
        memory = Memory(
            memory_id=memory_id if memory_id is not None else f"{rec.name}_{day}_{{turn}}",
            user=rec.name,
            kind=MemoryKind.TURN,
            date=day,
            text=text,
            query=query,
            response=response,
            timestamp=when.isoformat(timespec="seconds"),
            context=context,
            extra=dict(extra or {}),
            weight=salience.content_weight(query),
        )
        cold = _forgotten(used, report)
        before = self.storage.user_counters(rec.id) if cold else None
        memory = self.storage.add_turn(
            rec.id,
            memory,
            vector,
            self.encoder_name,
            # The day's summaries no longer cover every turn of it.
            stale=[MemoryKind.DAILY_SUMMARY, MemoryKind.DAILY_PERSONALITY],
            recalled=_keys(used),
            revived=_keys(cold),
            revive_deleted=revive_deleted,
        )
        for m in cold:
            m.archived = False
        if before is not None:  # the tier move, applied to the cached live set (no recompute)
            self.cold.revived(rec.id, before, day, [m.rowid or 0 for m in cold])
        _note_recall(used, day)
        return memory

    def turn_day(self, user: str, now: When = None) -> dt.date:
        """The day a turn ``user`` says at ``now`` (default: the clock's) is dated with
        ``add_turn(in_order=True)``: that day, or the user's latest turn's day when the clock
        went back and that is at most two days ahead (see :meth:`add_turn`)."""
        day = _as_date(now, self.clock)
        rec = self.find_user(user)
        return day if rec is None else self._turn_day(rec, day)

    def _turn_day(self, rec: UserRecord, day: dt.date) -> dt.date:
        latest = self.storage.last_turn_day(rec.id)
        if latest is None:
            return day
        ahead = (dt.date.fromisoformat(latest) - day).days
        return dt.date.fromisoformat(latest) if 0 < ahead <= _CLOCK_BACK_DAYS else day  # (further: imported)

    def _with_rowids(self, rec: UserRecord, memories: Sequence[Memory]) -> list[Memory]:
        """``memories`` as the user has them now, with their rowids, looked up by id (one
        query): a chat reply's memories were read before the reply was written, and one
        deleted meanwhile is left out. Its rowid is not trusted: SQLite gives a deleted
        latest memory's rowid to the next one stored (another tab's turn), which would be
        reinforced in its place. Memory ids are never reused."""
        if not memories:
            return []
        found = {
            m.memory_id: m for m in self.storage.memories_by_ids(rec.id, {m.memory_id for m in memories})
        }
        out = []
        for m in memories:
            now = found.get(m.memory_id)
            if now is not None:
                out.append(m if m.rowid == now.rowid else now)
        return out

    def add_memories(
        self,
        user: str,
        memories: Sequence[Memory],
        *,
        batch_size: int = 256,
        progress: Callable[[int], None] | None = None,
    ) -> list[int]:
        """Bulk insert prepared memories (e.g. an import), embedding the retrievable ones in batches."""
        if any(m.kind in RETRIEVABLE_KINDS for m in memories):
            self._writing_encoder()  # loaded before the user is created
        rec = self.user(user, create=True)
        rowids: list[int] = []
        for start in range(0, len(memories), batch_size):
            chunk = list(memories[start : start + batch_size])
            for m in chunk:
                m.user = rec.name
                if m.kind is MemoryKind.TURN and m.weight == 1.0:
                    m.weight = salience.content_weight(m.query if m.query is not None else m.text)
            retrievable = [m for m in chunk if m.kind in RETRIEVABLE_KINDS]
            others = [m for m in chunk if m.kind not in RETRIEVABLE_KINDS]
            if retrievable:
                vecs = self._embed([index_text(m.text, m.context) for m in retrievable], write=True)
                rowids += self.storage.add_memories(rec.id, retrievable, vecs, self.encoder_name)
            if others:
                rowids += self.storage.add_memories(rec.id, others, None, self.encoder_name)
            if progress:
                progress(len(chunk))
        return rowids

    def import_user(
        self,
        user: str,
        memories: Sequence[Memory],
        extra: dict[str, Any],
        *,
        batch_size: int = 256,
        progress: Callable[[int], None] | None = None,
        replace: bool = True,
    ) -> UserRecord:
        """Make ``user`` hold exactly ``memories`` (an import): the retrievable ones are embedded
        first, then the user is created, or replaced, in one transaction
        (:meth:`Storage.replace_user`). A failure or a kill at any point leaves the user as they
        were; a reader never sees a half-imported user. With ``replace=False`` a user who exists
        by the time of that transaction (another import, a first chat turn meanwhile) is an
        error and keeps everything."""
        found = self.find_user(user)
        user = found.name if found is not None else validate_user(user)
        retrievable = [i for i, m in enumerate(memories) if m.kind in RETRIEVABLE_KINDS]
        parts: list[np.ndarray] = []
        for start in range(0, len(retrievable), batch_size):
            chunk = [memories[i] for i in retrievable[start : start + batch_size]]
            parts.append(self._embed([index_text(m.text, m.context) for m in chunk], write=True))
            if progress:
                progress(len(chunk))
        if progress and len(memories) > len(retrievable):
            progress(len(memories) - len(retrievable))
        vectors = np.concatenate(parts) if parts else None
        for m in memories:
            m.user = user
        old = self.storage.get_user(user)
        rec = self.storage.replace_user(
            user, extra, memories, retrievable, vectors, self.encoder_name, replace=replace
        )
        if old is not None:
            self._cache.drop(old.id)
            self.cold.drop(old.id)
        return rec

    def set_layer(
        self,
        user: str,
        kind: MemoryKind,
        text: str,
        *,
        date: str | None = None,
        extra: dict[str, Any] | None = None,
        user_id: int | None = None,
    ) -> Memory:
        """Create or replace a summary layer: a daily summary/personality (``date`` needed) or a
        global summary/portrait. Daily summaries are indexed for retrieval.

        ``user_id``: the id of the user record the layer was made for (a summary run's): the
        layer is refused with :class:`UserNotFoundError` if that user was deleted meanwhile,
        even if a user of the same name exists again ("Forget me", then a new start)."""
        if kind is MemoryKind.TURN:
            raise InvalidInputError("use add_turn() for dialog turns")
        _check_text(text, f"{kind.value} text", allow_empty=True)
        if kind in RETRIEVABLE_KINDS and text.strip():
            self._writing_encoder()  # loaded before the user is created
        _check_extra(extra)
        if not kind.is_global and date is None:
            raise InvalidInputError(f"a {kind.value} needs the date it summarises (YYYY-MM-DD)")
        rec = self.user(user, create=user_id is None)
        if user_id is not None and rec.id != user_id:
            raise UserNotFoundError(
                f"user {rec.name!r} was deleted since this {kind.value} was made; not stored"
            )
        day = (date or self.clock().date().isoformat()) if kind.is_global else parse_day(date or "")
        memory_id = layer_id(rec.name, kind, day)
        held = self.storage.get_memory(rec.id, memory_id)
        if held is not None and (held.kind is not kind or (not kind.is_global and held.date != day)):
            raise InvalidInputError(  # never written over another memory (an imported turn's id)
                f"user {rec.name!r} has a {held.kind.value.replace('_', ' ')} of {held.date} under the id "
                f"{memory_id!r} of their {kind.value.replace('_', ' ')}; rename that memory first"
            )
        memory = Memory(memory_id=memory_id, user=rec.name, kind=kind, date=day, text=text, extra=extra or {})
        vector = self._embed([text], write=True)[0] if kind in RETRIEVABLE_KINDS and text.strip() else None
        return self.storage.upsert_memory(rec.id, memory, vector, self.encoder_name)

    def update_memory(
        self,
        user: str,
        memory_id: str,
        *,
        text: str | None = None,
        extra: dict[str, Any] | None = None,
        response: str | None = None,
    ) -> Memory:
        """Change one memory in place by id: new ``text`` (re-embedded) and/or new ``extra``.

        The memory keeps its id, day, strength and recall date (editing a memory is not a
        recall). A turn's new text becomes its query and its reply is cleared, or becomes
        ``response`` where one is given (a turn's message and reply, both changed); the words it
        replaces are left nowhere, as after :meth:`delete_memory`: the daily layers of its day
        and the global layers are blanked in the transaction of the edit (stale until the
        summariser regenerates them from what the user now wants kept), and the next turn of
        its day, indexed with the old reply as context, is re-indexed without it. Editing a
        summary layer, or only ``extra``, changes nothing else.
        """
        rec = self.user(user)
        target = self._find(rec, memory_id)
        _check_extra(extra)
        if response is not None and (target.kind is not MemoryKind.TURN or text is None):
            raise InvalidInputError(
                "a response is given with the text of a dialog turn (text=..., response=...)"
            )
        if text is None and extra is None:
            return target
        changed = dataclasses.replace(target)
        if text is not None:
            _check_text(text, "memory text", allow_empty=target.kind is not MemoryKind.TURN)
            changed.text = text
            if target.kind is MemoryKind.TURN:
                changed.query, changed.response = text, ""
                if response is not None:
                    _check_text(response, "response", allow_empty=True)
                    changed.text, changed.response = turn_text(text, response), response
        if extra is not None:
            changed.extra = dict(extra)
        rewritten = target.kind is MemoryKind.TURN and changed.text != target.text
        if rewritten:
            self._unlink_context(rec, target, kept=changed)
        vector = None
        if changed.kind in RETRIEVABLE_KINDS and changed.text.strip():
            vector = self._embed([index_text(changed.text, changed.context)], write=True)[0]
        memory = self.storage.upsert_memory(
            rec.id, changed, vector, self.encoder_name, scrub_dates=[target.date] if rewritten else None
        )
        if text is not None:
            self.storage.scrub()  # the words replaced are not kept in a file either
        return memory

    def complete_turn(
        self, user: str, memory_id: str, response: str, *, extra: dict[str, Any] | None = None
    ) -> Memory:
        """Give a stored turn whose reply is empty (its message was stored before the reply was
        made) its ``response``: re-embedded, and the daily layers of its day marked stale, as a
        late turn makes them. Unlike an edit, no words are replaced, so no summary is blanked: a
        global summary stays in the prompt while replies come in. A turn with a reply already is
        an edit: :meth:`update_memory`."""
        rec = self.user(user)
        target = self._find(rec, memory_id)
        if target.kind is not MemoryKind.TURN or target.response:
            raise InvalidInputError(
                f"{memory_id!r} is not a turn waiting for its reply; edit it with update_memory"
            )
        _check_text(response, "response", allow_empty=True)
        _check_extra(extra)
        changed = dataclasses.replace(
            target,
            response=response,
            text=turn_text(target.query or "", response),
            extra=dict(extra or target.extra),
        )
        vector = self._embed([index_text(changed.text, changed.context)], write=True)[0]
        memory = self.storage.upsert_memory(rec.id, changed, vector, self.encoder_name, only_existing=True)
        self.storage.mark_stale(
            rec.id, [MemoryKind.DAILY_SUMMARY, MemoryKind.DAILY_PERSONALITY], [target.date]
        )
        return memory

    def deleted_on(self, user: str, memory_id: str) -> str | None:
        """The day ``user``'s memory ``memory_id`` was deleted, while its id is retired (see
        :meth:`add_turn`), else ``None``. An adapter asks ``<id>#<value>`` of one of
        :data:`~memory_bank.stores.base.REPLAY_KEYS` to tell a replay from a new message."""
        owner = self.find_user(user)
        name = owner.name if owner is not None else user_key(user)
        return None if name is None else self.storage.retired_on(name, memory_id)

    def delete_memory(self, user: str, memory_id: str, *, retire: bool = True) -> Memory:
        """Delete one memory, and blank every summary that may quote it: the daily layers of its day
        and the global layers, in the same transaction. They stay marked stale until the
        summariser regenerates them from what is left, so no copy of deleted content survives.

        ``retire``: a turn's id that a caller chose is retired (a one-way digest), so that a
        retried or replayed :meth:`add_turn` of it is refused; ``False`` for a key that is
        meant to be written again (a key-value store's delete, then put)."""
        rec = self.user(user)
        target = self._find(rec, memory_id)
        days = [target.date] if target.kind is MemoryKind.TURN else []
        if target.kind is MemoryKind.TURN:
            self._unlink_context(rec, target)
        self.storage.delete_memories(rec.id, [target.rowid or 0], scrub_dates=days, retire=retire)
        return target

    def put_back(self, user: str, memories: Sequence[Memory]) -> list[Memory]:
        """Write ``memories`` back exactly as given, by id (inserted, or replacing the stored one),
        re-embedded where retrievable: how an undo restores a deleted memory together with the
        summaries its deletion blanked and the context it re-pointed (captured before the delete).
        A replaced memory keeps its stored strength and recall date (a recall since is kept)."""
        if any(m.kind in RETRIEVABLE_KINDS and m.text.strip() for m in memories):
            self._writing_encoder()
        rec = self.user(user, create=True)
        copies = [dataclasses.replace(m, user=rec.name, rowid=None, extra=dict(m.extra)) for m in memories]
        embedded = [i for i, m in enumerate(copies) if m.kind in RETRIEVABLE_KINDS and m.text.strip()]
        vectors: list[np.ndarray | None] = [None] * len(copies)
        if embedded:  # one encoder call for all of them
            batch = self._embed([index_text(copies[i].text, copies[i].context) for i in embedded], write=True)
            for i, vector in zip(embedded, batch, strict=True):
                vectors[i] = vector
        return [
            self.storage.upsert_memory(rec.id, m, v, self.encoder_name)
            for m, v in zip(copies, vectors, strict=True)
        ]

    def _unlink_context(self, rec: UserRecord, target: Memory, *, kept: Memory | None = None) -> None:
        """The turn after ``target`` is indexed with ``target``'s reply as context; re-index it
        (re-embedded) so that no trace of that reply is left: with the reply before ``target``
        when ``target`` is deleted, or with the reply of ``kept``, ``target`` as edited (none
        when it has none)."""
        day = [
            m
            for m in self.storage.memories(rec.id, kinds=[MemoryKind.TURN], date=target.date)
            if m.memory_id != target.memory_id
        ]
        after = [m for m in day if (m.turn or 0) > (target.turn or 0)]
        if not after:
            return
        follower = min(after, key=lambda m: m.turn or 0)
        if follower.context is None:
            return
        previous = kept
        if previous is None:
            before = [m for m in day if (m.turn or 0) < (target.turn or 0)]
            previous = max(before, key=lambda m: m.turn or 0) if before else None
        follower.context = _context_of(previous)
        vector = self._embed([index_text(follower.text, follower.context)], write=True)[0]
        self.storage.upsert_memory(rec.id, follower, vector, self.encoder_name, only_existing=True)

    def _relink_days(self, rec: UserRecord, days: Iterable[str], *, restored: bool = False) -> None:
        """After turns of ``days`` were deleted in bulk (a purge, forgetting with ``action:
        delete``) or hidden: a turn indexed with such a turn's reply as context is re-indexed
        with the reply before it now, none after a hidden turn (re-embedded), so that no trace of
        that reply is left, as :meth:`_unlink_context` does for one deletion. ``restored``: turns
        were shown again, and the turn after each is indexed with its reply again. A turn
        deleted meanwhile (another process) stays deleted."""
        changed: list[Memory] = []
        for day in sorted(set(days)):
            previous: Memory | None = None
            for m in sorted(
                self.storage.memories(rec.id, kinds=[MemoryKind.TURN], date=day), key=_turn_order
            ):
                wanted = _context_of(previous)
                if m.context != wanted and (m.context is not None or restored):
                    m.context = wanted
                    changed.append(m)
                previous = m
        if not changed:
            return
        vectors = self._embed([index_text(m.text, m.context) for m in changed], write=True)
        for m, vector in zip(changed, vectors, strict=True):
            self.storage.upsert_memory(rec.id, m, vector, self.encoder_name, only_existing=True)
        self.storage.scrub()  # the rows as they were (with the old context) leave the files too

    def _find(self, rec: UserRecord, memory_id: str) -> Memory:
        found = self.storage.get_memory(rec.id, memory_id)
        if found is None:
            raise MemoryNotFoundError(f"user {rec.name!r} has no memory with id {memory_id!r}")
        return found

    # -- reading ------------------------------------------------------------------------------
    def search(
        self,
        user: str,
        query: str,
        k: int | None = None,
        *,
        now: When = None,
        reinforce: bool = False,
        kinds: Iterable[MemoryKind] | None = None,
    ) -> list[SearchResult]:
        """The ``k`` memories of ``user`` most related to ``query``, best first.

        With ``reinforce=True`` the returned memories are recalled: strength +1, last recall = now.
        Otherwise a search writes nothing and takes no write lock (it works on a read-only
        store): which memories are forgotten at ``now`` follows from their stored strength,
        last recall and kind (:meth:`_live_now`); the daily pass that persists it runs on writes.
        """
        _check_text(query, "query")
        try:
            k = self.config.retrieval.top_k if k is None else int(k)
        except (TypeError, ValueError, OverflowError) as e:  # NaN, infinity, a word
            raise InvalidInputError(f"k must be a whole number of memories, got {k!r}") from e
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")
        rec = self.user(user)
        today = _as_date(now, self.clock)
        f = self.config.forgetting
        always = self._both_tiers()
        live_set = always or (f.mode != "off" and f.policy == "threshold")
        early = self._read_forget_columns_early(rec, today) if live_set else None
        try:
            return self._search(rec, query, k, today, kinds, reinforce, early)
        finally:
            if early is not None:
                concurrent.futures.wait([early.columns])  # nothing reads on after the search

    def _search(
        self,
        rec: UserRecord,
        query: str,
        k: int,
        today: dt.date,
        kinds: Iterable[MemoryKind] | None,
        reinforce: bool,
        early: _EarlyColumns | None,
    ) -> list[SearchResult]:
        f = self.config.forgetting
        # The cold tier ranked jointly on every search: the live index is not searched on its
        # own (one ranking of all memories, as with forgetting off; memory_bank.cold).
        cold_tier = f.cold_tier and f.mode != "off"  # with forgetting off nothing fades into it
        always = self._both_tiers()
        part = self._cache.get(rec.id, rec.counters)
        if len(part) == 0 and (always or not cold_tier):
            return []
        allowed = None
        if kinds is not None:
            allowed = frozenset(k_.value for k_ in kinds)
        elif not self.config.retrieval.include_summaries:
            allowed = frozenset({MemoryKind.TURN.value})
        qvec = query_vector(query, self._embed, self.config.retrieval.latest_turn_weight)
        if always:  # one ranking of the partition holding both tiers
            found = self._cold(rec, [], query, qvec, k, today, allowed, joint=True, part=part, early=early)
        else:
            found = self._live(rec, part, query, qvec, k, today, allowed, early)
            if cold_tier and (not found or found[0][1] < f.cold_below):
                found = self._cold(rec, found, query, qvec, k, today, allowed, joint=f.cold_rank == "joint")
        retention = self._retention([m for m, _ in found], today)
        results = [SearchResult(m, score, r) for (m, score), r in zip(found, retention, strict=True)]
        if reinforce and results:
            self.reinforce(
                rec.name,
                [r.memory.memory_id for r in results],
                now=today,
                _memories=[r.memory for r in results],
            )
        return results

    def _live(
        self,
        rec: UserRecord,
        part: Partition,
        query: str,
        qvec: np.ndarray,
        k: int,
        today: dt.date,
        allowed: frozenset[str] | None,
        early: _EarlyColumns | None = None,
    ) -> list[tuple[Memory, float]]:
        """The best live memories with their scores. Under the threshold policy a memory that
        has faded by ``today`` is left out, whether or not the day's pass has archived it yet
        (the same memories as after the pass; a stochastic pass draws, so until it runs what it
        would drop is still found)."""
        f = self.config.forgetting
        live = (
            self._live_now(rec, today, part, early) if f.mode != "off" and f.policy == "threshold" else None
        )
        faded = max(len(part) - len(live), 0) if live is not None else 0
        with part.lock:
            ranked = rank(
                part,
                query,
                qvec,
                k + min(faded, 256),
                self.config.retrieval,
                now=today,
                allowed_kinds=allowed,
            )
            rowids = part.rowids[ranked.positions].tolist()
        keep = (
            set(rowids)
            if live is None
            else set(np.asarray(rowids)[member(np.asarray(rowids), live)].tolist())
        )
        by_row = {m.rowid: m for m in self.storage.memories(rec.id, rowids=sorted(keep))}
        found = []
        for rowid, score in zip(rowids, ranked.scores.tolist(), strict=True):
            m = by_row.get(rowid)
            # Faded today, deleted or forgotten by another process (with forgetting off, what an
            # earlier setting forgot is found as it is: nothing is forgotten).
            if m is None or m.hidden or (m.archived and f.mode != "off"):
                continue
            found.append((m, score))
        return found[:k]

    def _cold(
        self,
        rec: UserRecord,
        found: list[tuple[Memory, float]],
        query: str,
        qvec: np.ndarray,
        k: int,
        today: dt.date,
        allowed: frozenset[str] | None,
        *,
        joint: bool,
        part: Partition | None = None,
        early: _EarlyColumns | None = None,
    ) -> list[tuple[Memory, float]]:
        """The cold tier consulted (see :mod:`memory_bank.cold`). ``joint``: live and forgotten
        memories ranked as one set (``found`` is replaced), forgotten ones ``cold_penalty``
        lower (in ``part`` when it holds both tiers); otherwise the best forgotten memories,
        merged with ``found`` by score."""
        live = self._live_now(rec, today, part, early) if joint else None
        hits = self.cold.search(
            rec.id,
            query,
            qvec,
            k,
            self.config.retrieval,
            now=today,
            allowed_kinds=allowed,
            live_rowids=live,
            penalty=self.config.forgetting.cold_penalty,
            part=part,
        )
        by_row = {m.rowid: m for m in self.storage.memories(rec.id, rowids=[r for r, _ in hits])}
        cold = [(by_row[r], s) for r, s in hits if r in by_row]
        if live is None:
            return sorted(found + [x for x in cold if x[0].archived], key=lambda x: -x[1])[:k]
        for m, _ in cold:  # forgotten at ``today``, whether or not a pass has persisted it yet
            m.archived = m.archived or not bool(member(np.asarray([m.rowid or 0]), live)[0])
        return cold

    def reinforce(
        self,
        user: str,
        memory_ids: Sequence[str],
        *,
        now: When = None,
        _memories: Sequence[Memory] | None = None,
    ) -> None:
        """Recall memories (paper §2.3): strength +1 and the forgetting clock restarts today.

        A memory is reinforced at most once a day, however often it is retrieved: the paper's
        strength counts the days it was recalled on (seven retrievals today give strength 2).
        A recalled memory that was forgotten comes back to the live tier (one the user hid stays
        hidden). A write: the user's forgetting pass of the day runs first, so that it cannot
        forget again what is recalled now (see :meth:`_daily_forget`). ``_memories`` (as a search
        read them) may be out of date: one deleted since is not recalled, nor is the memory
        stored since under its rowid (:meth:`Storage.reinforce`)."""
        rec = self.user(user)
        today = _as_date(now, self.clock)
        if _memories is None:
            wanted = set(memory_ids)
            _memories = self.storage.memories_by_ids(rec.id, wanted)
            missing = wanted - {m.memory_id for m in _memories}
            if missing:
                raise MemoryNotFoundError(f"user {rec.name!r} has no memory with id {sorted(missing)[0]!r}")
        report = self._daily_forget(rec, today, keep=_memories)
        day = today.isoformat()
        # Those recalled from the cold tier (or forgotten by the clock at ``now``) are live again.
        cold = _forgotten(_memories, report)
        self.storage.reinforce(rec.id, _keys(_memories), day, revived=_keys(cold))
        for m in cold:
            m.archived = False
        _note_recall(_memories, day)

    def memories(
        self,
        user: str,
        *,
        kinds: Iterable[MemoryKind] | None = None,
        include_archived: bool = True,
        now: When = None,
        mode: str | None = None,
    ) -> list[tuple[Memory, float]]:
        """Every memory of ``user`` with its current retention (under ``mode``, default the config's)."""
        rec = self.user(user)
        mems = self.storage.memories(rec.id, kinds=kinds, include_archived=include_archived)
        return list(zip(mems, self._retention(mems, _as_date(now, self.clock), mode), strict=True))

    def history(self, user: str, *, date: str | None = None) -> list[Memory]:
        """The user's dialog turns (of one day, if given), oldest first; forgotten ones excluded."""
        rec = self.user(user)
        day = None if date is None else parse_day(date)
        return self.storage.memories(rec.id, kinds=[MemoryKind.TURN], include_archived=False, date=day)

    def layer(self, user: str, kind: MemoryKind, date: str | None = None) -> Memory | None:
        """A summary layer record (global ones need no date), or ``None`` if not made yet."""
        rec = self.user(user)
        if not kind.is_global and date is None:
            return None
        found = self.storage.memories(
            rec.id, kinds=[kind], include_archived=False, date=None if kind.is_global else date
        )
        return found[0] if found else None

    def profile(self, user: str) -> dict[str, str]:
        """The global layers that go whole into a prompt: event summary and user portrait."""
        out = {"global_summary": "", "global_portrait": ""}
        if not self.has_user(user):
            return out
        for key, kind in (
            ("global_summary", MemoryKind.GLOBAL_SUMMARY),
            ("global_portrait", MemoryKind.GLOBAL_PORTRAIT),
        ):
            m = self.layer(user, kind)
            out[key] = m.text if m else ""
        return out

    def stats(self) -> dict[str, Any]:
        return self.storage.counts()

    # -- forgetting ---------------------------------------------------------------------------
    def _time_scales(self, kinds: Sequence[str], weights: np.ndarray | None) -> np.ndarray | float:
        """Each memory's forgetting time scale under the config (per kind and content weight)."""
        f = self.config.forgetting
        return forgetting.time_scales(
            f.tau,
            kinds,
            weights if f.content_weights else None,
            kind_scales=f.kind_scales,  # type: ignore[arg-type]
        )

    def _retention(self, mems: Sequence[Memory], today: dt.date, mode: str | None = None) -> list[float]:
        f = self.config.forgetting
        r = forgetting.retention_array(
            forgetting.elapsed_days([m.recall_anchor for m in mems], today),
            np.fromiter((m.strength for m in mems), dtype=np.float64, count=len(mems)),
            mode=(mode or f.mode),  # type: ignore[arg-type]
            tau=self._time_scales(
                [m.kind.value for m in mems],
                np.fromiter((m.weight for m in mems), dtype=np.float64, count=len(mems)),
            ),
        )
        return [
            1.0 if m.kind.is_global or m.kind is MemoryKind.DAILY_PERSONALITY else float(x)
            for m, x in zip(mems, r, strict=True)
        ]

    def _daily_forget(
        self, rec: UserRecord, today: dt.date, keep: Sequence[Memory] = ()
    ) -> ForgetReport | None:
        """The user's forgetting pass of ``today``, once a day, on a write (a turn added, a
        recall): it persists what the clock already decides (:meth:`_live_now`), so a search
        never needs to write. ``keep``: the memories this write recalls; with ``action:
        delete`` the pass leaves them (the recall brings them back, it must not destroy them)."""
        f = self.config.forgetting
        if f.mode == "off" or not f.daily_pass or rec.last_forget_date == today.isoformat():
            return None
        with self._forget_lock:
            # Two first writes of the day can both get here: the second waited while the first
            # ran the pass. It must not run another (a stochastic pass would draw again and
            # forget more), so the day is read again from the store.
            stored = self.storage.get_user(rec.name)
            if stored is None or stored.last_forget_date == today.isoformat():
                rec.last_forget_date = today.isoformat()
                return None
            return self._forget_user(rec, today, f.mode, f.seed, keep=keep)

    def _read_forget_columns_early(self, rec: UserRecord, today: dt.date) -> _EarlyColumns | None:
        """When a search is about to build the user's partition from the store and will need
        the day's live set, read what computing it reads (:meth:`_forget_columns`) on the
        partition cache's reader thread meanwhile (a million memories: about 1 s beside the
        build's 6). Used only if the partition then stands at the counters read here: no
        write came between, so the columns are no older than the partition."""
        if rec.id in self._cache:
            return None
        state = self.storage.user_counters(rec.id)
        if self.cold.live_cached(rec.id, state, today.isoformat()):
            return None
        columns = background.submit(self._cache.reader, self._forget_columns, rec)
        return None if columns is None else _EarlyColumns(state, columns)

    def _live_now(
        self,
        rec: UserRecord,
        today: dt.date,
        part: Partition | None = None,
        early: _EarlyColumns | None = None,
    ) -> np.ndarray:
        """The rowids (ascending) of the user's memories that are live at ``today``: stored as
        live and, under the threshold policy, with retention still at or above the threshold.
        Retention is a function of the clock, so this is the set a pass at ``today`` leaves
        live, without persisting anything (a stochastic pass draws: until it runs, what it
        would drop is still live). Read once per day and store change; with ``part`` (the
        partition being ranked), memories added since are examined alone."""
        f = self.config.forgetting
        threshold = f.policy == "threshold"

        def compute() -> tuple[np.ndarray, int]:
            if (
                early is not None
                and part is not None
                and early.state == (part.version, part.epoch, part.tiers)
            ):
                cols, kinds = early.columns.result()
            else:
                cols, kinds = self._forget_columns(rec)
            # The highest rowid examined is the columns' own: a memory the partition gained
            # after they were read (another search's refresh) is left to ``added``.
            top = int(cols.rowids.max()) if len(cols.rowids) else 0
            if not threshold or not len(cols.rowids):
                return ascending_ids(cols.rowids), top
            return ascending_ids(cols.rowids[~self._drop_mask(rec, cols, kinds, today, f.mode, None)]), top

        def added(after: int) -> tuple[np.ndarray, int]:
            assert part is not None
            with part.lock:  # another search may be appending to it
                held = part.rowids
                new = held[np.searchsorted(held, after, side="right") :].copy()
            if not len(new):
                return new, after
            mems = [m for m in self.storage.memories(rec.id, rowids=new.tolist()) if not m.archived]
            keep = [
                m.rowid or 0
                for m, r in zip(mems, self._retention(mems, today), strict=True)
                if not threshold or r >= f.threshold
            ]
            return np.asarray(sorted(keep), dtype=np.int64), int(new[-1])

        if part is not None:
            return self.cold.live_rowids(
                rec.id, (part.version, part.epoch, part.tiers), today.isoformat(), compute, added
            )
        return self.cold.live_rowids(rec.id, self.storage.user_counters(rec.id), today.isoformat(), compute)

    def _drop_mask(
        self,
        rec: UserRecord,
        cols: ForgetColumns,
        kinds: list[str],
        today: dt.date,
        mode: str,
        seed: int | None,
    ) -> np.ndarray:
        """Which of ``cols`` a pass at ``today`` forgets (see :mod:`memory_bank.forgetting`)."""
        f = self.config.forgetting
        r = forgetting.retention_array(
            (forgetting.day_number(today) - cols.anchors).astype(np.float64),
            cols.strengths,
            mode=mode,  # type: ignore[arg-type]
            tau=self._time_scales(kinds, cols.weights),
        )
        rng = forgetting.pass_rng(seed, rec.name, today) if f.policy == "stochastic" else None
        return forgetting.forget_mask(r, policy=f.policy, threshold=f.threshold, rng=rng)

    def forget(
        self, user: str | None = None, *, now: When = None, mode: str | None = None, seed: int | None = None
    ) -> dict[str, ForgetReport]:
        """Run a forgetting pass now (one user or all) and report what was forgotten."""
        today = _as_date(now, self.clock)
        mode = mode or self.config.forgetting.mode
        if mode not in forgetting.MODES:
            raise InvalidInputError(
                f"unknown forgetting mode {mode!r}; use one of {', '.join(forgetting.MODES)}"
            )
        seed = self.config.forgetting.seed if seed is None else seed
        recs = [self.user(user)] if user is not None else self.storage.list_users()
        with self._forget_lock:
            return {r.name: self._forget_user(r, today, mode, seed) for r in recs}

    def _forget_user(
        self, rec: UserRecord, today: dt.date, mode: str, seed: int | None, *, keep: Sequence[Memory] = ()
    ) -> ForgetReport:
        f = self.config.forgetting
        report = ForgetReport(now=today.isoformat(), mode=mode, action=f.action)
        # Columns, not Memory objects: a pass over a million memories is a few array operations.
        cols, kinds = self._forget_columns(rec)
        report.examined = len(cols.rowids)
        if mode != "off" and report.examined:
            drop = self._drop_mask(rec, cols, kinds, today, mode, seed)
            if keep and f.action == "delete":
                drop &= ~np.isin(cols.rowids, [m.rowid or 0 for m in keep])
            rowids = cols.rowids[drop].tolist()
            if rowids:
                keys = self.storage.memory_keys(rec.id, rowids)
                gone = [keys[r] for r in rowids if r in keys]  # (memory_id, kind, date), in order
                # Only those whose clock the store still starts before today: one recalled
                # since the columns were read (another thread's reply) has retention 1 today.
                day = today.isoformat()
                dates = sorted({date for _, kind, date in gone if kind in _DAY_KINDS})
                if f.action == "delete":
                    # Deleted for good: no summary keeps quoting them, no next turn is indexed
                    # with their reply (as delete_memory does).
                    self.storage.delete_memories(rec.id, rowids, dates or None, anchored_before=day)
                    self._relink_days(rec, dates)
                else:
                    self.storage.set_archived(rec.id, rowids, True, anchored_before=day)
                report.forgotten = [memory_id for memory_id, _, _ in gone]
        self.storage.set_forget_date(rec.id, today.isoformat())
        rec.last_forget_date = today.isoformat()
        if report.forgotten:
            logger.info(
                "forgot %d of %d memories of %r (%s)", len(report.forgotten), report.examined, rec.name, mode
            )
        return report

    def _forget_columns(self, rec: UserRecord) -> tuple[ForgetColumns, list[str]]:
        """What a pass reads, with each row's kind when kinds have their own time scales."""
        f = self.config.forgetting
        if not any(x != 1 for x in f.kind_scales.values()):
            cols = self.storage.forget_columns(rec.id, RETRIEVABLE_KINDS, weights=f.content_weights)
            return cols, [MemoryKind.TURN.value] * len(cols.rowids)
        parts = [
            (k, self.storage.forget_columns(rec.id, [k], weights=f.content_weights))
            for k in RETRIEVABLE_KINDS
        ]
        weights = [p.weights for _, p in parts]
        cols = ForgetColumns(
            np.concatenate([p.rowids for _, p in parts]),
            np.concatenate([p.anchors for _, p in parts]),
            np.concatenate([p.strengths for _, p in parts]),
            None if any(w is None for w in weights) else np.concatenate(weights),  # type: ignore[arg-type]
        )
        return cols, [k.value for k, p in parts for _ in range(len(p.rowids))]

    def explain(self, user: str, memory_id: str, *, now: When = None) -> Explanation:
        """Why one memory is strong, fading or forgotten (see :mod:`memory_bank.explain`): its
        recalls and strength, days since the last recall, content class, its kind's time scale,
        retention today, the projected day it is forgotten if not recalled again, and
        ``reason(language)``, a short sentence in English or Chinese."""
        rec = self.user(user)
        return self._explain(self._find(rec, memory_id), _as_date(now, self.clock))

    def explanations(
        self,
        user: str,
        *,
        kinds: Iterable[MemoryKind] | None = None,
        include_archived: bool = True,
        now: When = None,
    ) -> list[Explanation]:
        """:meth:`explain` for every memory of ``user`` (forgotten ones too, by default), in the
        store's order: what a memory view needs in one call; restore with :meth:`restore`."""
        rec = self.user(user)
        today = _as_date(now, self.clock)
        mems = self.storage.memories(rec.id, kinds=kinds, include_archived=include_archived)
        return [self._explain(m, today) for m in mems]

    def _explain(self, m: Memory, today: dt.date) -> Explanation:
        f = self.config.forgetting
        e = forgetting.explain(
            kind=m.kind.value,
            strength=m.strength,
            anchor=m.recall_anchor,
            now=today,
            weight=m.weight if f.content_weights else 1.0,
            mode=f.mode,  # type: ignore[arg-type]
            tau=f.tau,
            kind_scales=f.kind_scales,  # type: ignore[arg-type]
            policy=f.policy,
            threshold=f.threshold,
        )
        never = m.kind.is_global or m.kind is MemoryKind.DAILY_PERSONALITY
        if never or f.mode == "off":
            e.update(retention=1.0, forgets_on=None)
        retention = float(e["retention"])  # type: ignore[arg-type]
        status: Status
        forgets_on = e["forgets_on"]
        if m.hidden:
            status = "hidden"
        elif m.archived:
            status = "forgotten"
        elif never or f.mode == "off":
            status = "kept"
        elif f.policy == "threshold" and isinstance(forgets_on, str) and forgets_on <= today.isoformat():
            status = "forgotten"  # by the clock at ``today``, as a search then decides, pass or not
            # (the stochastic policy's day is when the odds turn: the pass decides, not the clock)
        else:
            status = "strong" if retention >= STRONG_RETENTION else "fading"
        return Explanation(
            memory_id=m.memory_id,
            kind=m.kind.value,
            archived=m.archived,
            status=status,
            strength=int(m.strength),
            recalls=int(e["recalls"]),  # type: ignore[call-overload]
            anchor=str(e["anchor"]),
            days_since=max(forgetting.day_number(today) - forgetting.day_number(m.recall_anchor), 0),
            content_class=salience.content_class(m.query) if m.kind is MemoryKind.TURN and m.query else None,
            weight=float(e["weight"]),  # type: ignore[arg-type]
            kind_scale=float(e["kind_scale"]),  # type: ignore[arg-type]
            time_scale_days=float(e["time_scale_days"]),  # type: ignore[arg-type]
            retention=retention,
            forgets_on=e["forgets_on"],  # type: ignore[arg-type]
            mode=f.mode,
            policy=f.policy,
            hidden=m.hidden,
        )

    def restore(self, user: str, memory_ids: Sequence[str], *, now: When = None) -> None:
        """Bring archived memories (forgotten or hidden) back into retrieval.

        Restoring counts as recalling (strength + 1, the forgetting clock restarts ``now``), as
        when the cold tier brings a memory back: otherwise the next daily pass would forget it
        again at once. An id the user does not have is an error and nothing is restored."""
        rec = self.user(user)
        wanted = set(memory_ids)
        mems = self.storage.memories_by_ids(rec.id, wanted)
        missing = wanted - {m.memory_id for m in mems}
        if missing:
            raise MemoryNotFoundError(f"user {rec.name!r} has no memory with id {sorted(missing)[0]!r}")
        self.storage.set_archived(rec.id, [m.rowid or 0 for m in mems], False)
        shown = sorted({m.date for m in mems if m.hidden and m.kind in _DAY_KINDS})
        if shown:  # the summaries that left them out are made again with them
            self.storage.mark_stale(rec.id, [MemoryKind.DAILY_SUMMARY, MemoryKind.DAILY_PERSONALITY], shown)
            self.storage.mark_stale(rec.id, [MemoryKind.GLOBAL_SUMMARY, MemoryKind.GLOBAL_PORTRAIT], None)
            self._relink_days(
                rec, {m.date for m in mems if m.hidden and m.kind is MemoryKind.TURN}, restored=True
            )
        for m in mems:
            m.archived = m.hidden = False
        self.reinforce(rec.name, list(wanted), now=now, _memories=mems)

    def archive(self, user: str, memory_ids: Sequence[str], *, hidden: bool = True) -> None:
        """Hide memories on purpose: out of every search, the cold tier's too, without deleting
        them (undo with :meth:`restore`). ``hidden=False`` forgets them as the curve does
        instead: out of the live tier, still found by the cold tier (``forgetting.cold_tier``)."""
        rec = self.user(user)
        mems = self.storage.memories_by_ids(rec.id, memory_ids)
        # Hidden: no summary keeps quoting them either (blanked, made again without them), and
        # no next turn is found by their words (re-indexed without them).
        days = sorted({m.date for m in mems if m.kind in _DAY_KINDS}) if hidden else []
        self.storage.set_archived(
            rec.id, [m.rowid or 0 for m in mems], True, hidden=hidden, scrub_dates=days if days else None
        )
        if hidden:
            self._relink_days(rec, {m.date for m in mems if m.kind is MemoryKind.TURN})

    def purge_archived(self, user: str | None = None) -> int:
        """Delete forgotten (archived) memories for good, with every copy of their words: the
        summaries of their days and the global layers are blanked (to be regenerated) in the
        same transaction, and the turns indexed with their replies are re-indexed."""
        recs = [self.user(user)] if user is not None else self.storage.list_users()
        n = 0
        for rec in recs:
            days = self.storage.archived_turn_days(rec.id)
            n += self.storage.delete_archived(rec.id)  # raises the turn floors in its transaction
            self._relink_days(rec, days)
        return n

    # -- maintenance --------------------------------------------------------------------------
    def reembed(self, *, batch_size: int = 256, progress: bool = False) -> int:
        """Embed every retrievable memory that has no vector from the configured encoder, and
        make it the store's encoder (how a store switches encoders: see
        :mod:`memory_bank.encoder_identity`). A model that changed under the store's encoder
        name re-embeds every memory."""
        encoder = self._encoder if self._encoder is not None else get_encoder(self.config.encoder_for())
        stored = self._recorded_encoder()
        changed = stored is not None and stored.name == encoder.name and identity.difference(stored, encoder)
        # A name no vector has makes every memory due.
        todo = self.storage.missing_vectors("" if changed else encoder.name, RETRIEVABLE_KINDS)
        # Each vector written replaces the old encoder's, which the store's searches read until
        # the switch below: marked first, so an interrupted run is refused, not searched.
        self.storage.set_meta({identity.SWITCHING_KEY: encoder.name}, replace=True)
        self._put_embedded(encoder, todo, batch_size, progress)
        self.storage.set_meta({**identity.meta_of(encoder), identity.SWITCHING_KEY: ""}, replace=True)
        # Memories another server stored meanwhile with the old encoder: no search would find
        # them. A server that writes after the switch follows it (see _follow_store_encoder).
        late = self.storage.missing_vectors(encoder.name, RETRIEVABLE_KINDS)
        self._put_embedded(encoder, late, batch_size, progress)
        self._checked, self._claimed = encoder, True
        self._cache.clear()
        self.cold.clear()
        return len(todo) + len(late)

    def _put_embedded(
        self, encoder: Encoder, todo: Sequence[tuple[int, str]], batch_size: int, progress: bool
    ) -> None:
        """Store ``encoder``'s vectors of the memories ``todo`` (rowid, text), in batches."""
        bar = None
        if progress and todo:
            from tqdm import tqdm

            bar = tqdm(total=len(todo), unit="memory", desc=f"embedding with {encoder.name}")
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            self.storage.put_vectors(
                [r for r, _ in chunk], encoder.encode([t for _, t in chunk]), encoder.name
            )
            if bar:
                bar.update(len(chunk))
        if bar:
            bar.close()
