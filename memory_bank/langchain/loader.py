"""The forgetting loader: a user's memories as LangChain documents, after a forgetting pass.

The original MemoryBank applied the forgetting curve when a user's memory file was loaded. This
loader does the same in front of any LangChain vector store: it reads a memory file in the
original format (or a :class:`~memory_bank.MemoryBank` store), draws each memory's fate from its
retention ``R = exp(-t / S)`` (paper §2.3), yields the survivors as documents and reports what it
forgot. It changes nothing on disk unless ``write_back=True``.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document

import memory_bank.forgetting as forgetting
from memory_bank.bank import MemoryBank
from memory_bank.errors import InvalidInputError
from memory_bank.langchain.documents import memory_document, require_user
from memory_bank.original_format import load_memory_file, user_memories, write_json_atomic
from memory_bank.records import RETRIEVABLE_KINDS, Memory, MemoryKind
from memory_bank.text import parse_day, user_key

logger = logging.getLogger(__name__)

When = dt.datetime | dt.date | str


@dataclasses.dataclass
class ForgettingResult:
    """What one load did.

    ``examined`` counts the memories subject to forgetting (turns and daily summaries);
    ``documents`` are the ones kept (plus any personality or global layers asked for);
    ``forgotten`` the ids of those dropped; ``written`` whether the source was changed.
    """

    user: str
    now: str
    mode: str
    seed: int | None
    examined: int
    documents: list[Document]
    forgotten: list[str]
    written: bool = False


def _today(now: When | None, clock: Callable[[], dt.datetime]) -> dt.date:
    if now is None:
        now = clock()
    if isinstance(now, dt.datetime):
        return now.date()
    if isinstance(now, dt.date):
        return now
    return dt.date.fromisoformat(parse_day(now, "now"))


class MemoryForgetterLoader(BaseLoader):
    """Load one user's memories as documents, forgetting some as the Ebbinghaus curve says.

    Args:
        source: a memory file in the original MemoryBank JSON format, or a :class:`MemoryBank`.
        user: whose memories to load (required; a user not in the source loads nothing).
        mode: ``paper`` (``R = exp(-t / (tau * S))``), ``original-code`` (the authors' code,
            ``exp(-t * S / 5)``) or ``off`` (keep everything).
        policy: ``stochastic`` drops a memory with probability ``1 - R`` (the paper);
            ``threshold`` drops it when ``R < threshold``.
        seed: makes a stochastic pass reproducible per (seed, user, day), with the same scheme as
            :meth:`MemoryBank.forget`; ``None`` draws fresh randomness.
        now: the day to forget up to (date, datetime or ``YYYY-MM-DD``); else ``clock()``, else
            the bank's clock (store source) or today.
        kinds: kinds to load (default: turns and daily summaries, the retrievable pieces).
            Personality and global layers are loaded whole, never forgotten.
        write_back: remove the forgotten memories from the source file (atomically), or
            archive/delete them in the store (per the bank's ``forgetting.action``).

    Each document has the memory text and the metadata of
    :func:`~memory_bank.langchain.documents.memory_metadata` (with ``retention`` at load time)
    plus ``source``. After a load, :attr:`last_result` says what was forgotten.

    Example::

        from langchain_community.vectorstores import FAISS
        from memory_bank.embeddings import get_encoder
        from memory_bank.langchain import MemoryForgetterLoader

        loader = MemoryForgetterLoader("memory_bank_en.json", "Emily", seed=7, now="2023-05-10")
        docs = loader.load()
        print("forgot", loader.last_result.forgotten)
        store = FAISS.from_documents(docs, get_encoder("minilm"))
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | MemoryBank,
        user: str,
        *,
        mode: forgetting.ForgettingMode = "paper",
        tau: float = 1.0,
        policy: forgetting.ForgettingPolicy = "stochastic",
        threshold: float = 0.05,
        seed: int | None = None,
        now: When | None = None,
        clock: Callable[[], dt.datetime] | None = None,
        kinds: Iterable[MemoryKind] | None = None,
        write_back: bool = False,
    ) -> None:
        if mode not in forgetting.MODES:
            raise InvalidInputError(
                f"unknown forgetting mode {mode!r}; use one of {', '.join(forgetting.MODES)}"
            )
        if policy not in forgetting.POLICIES:
            raise InvalidInputError(
                f"unknown forgetting policy {policy!r}; use one of {', '.join(forgetting.POLICIES)}"
            )
        if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not tau > 0 or tau == float("inf"):
            raise InvalidInputError(f"tau must be a number of days > 0, got {tau!r}")
        self.source = source if isinstance(source, MemoryBank) else Path(source)
        self.user = require_user(user, "MemoryForgetterLoader")
        self.mode, self.tau, self.policy, self.threshold = mode, tau, policy, threshold
        self.seed = seed
        self.now = now
        self.clock = clock or (source.clock if isinstance(source, MemoryBank) else dt.datetime.now)
        self.kinds = tuple(kinds) if kinds is not None else RETRIEVABLE_KINDS
        self.write_back = write_back
        self.last_result: ForgettingResult | None = None

    def lazy_load(self) -> Iterator[Document]:
        """The documents that survive a forgetting pass (see :meth:`forget`)."""
        yield from self.forget().documents

    def forget(self) -> ForgettingResult:
        """Run the pass: the documents kept, the ids forgotten; also kept as :attr:`last_result`."""
        today = _today(self.now, self.clock)
        name, memories, data_key, data = self._read()
        drop = self._draw(name, memories, today)
        kept = [(m, r) for (m, r), d in zip(memories, drop, strict=True) if not d]
        gone = [m for (m, _), d in zip(memories, drop, strict=True) if d]
        source = "memorybank" if isinstance(self.source, MemoryBank) else str(self.source)
        docs = []
        for m, r in kept:
            doc = memory_document(m, retention=r)
            doc.metadata["source"] = source
            docs.append(doc)
        result = ForgettingResult(
            user=name,
            now=today.isoformat(),
            mode=self.mode,
            seed=self.seed,
            examined=sum(m.kind in RETRIEVABLE_KINDS for m, _ in memories),
            documents=docs,
            forgotten=[m.memory_id for m in gone],
        )
        if self.write_back and gone:
            self._write(name, gone, data_key, data)
            result.written = True
        if gone:
            logger.info("forgot %d of %d memories of %r (%s)", len(gone), result.examined, name, self.mode)
        self.last_result = result
        return result

    # -- reading ------------------------------------------------------------------------------
    def _read(self) -> tuple[str, list[tuple[Memory, float]], str | None, dict[str, Any] | None]:
        """(user name, [(memory, retention placeholder)], file key, file data)."""
        if isinstance(self.source, MemoryBank):
            bank = self.source
            if not bank.has_user(self.user):
                logger.warning("user %r has no memories in the store; nothing to load", self.user)
                return self.user, [], None, None
            pairs = bank.memories(self.user, kinds=self.kinds, include_archived=False, mode="off")
            return bank.user(self.user).name, [(m, 1.0) for m, _ in pairs], None, None
        data = load_memory_file(self.source)
        key = self._file_key(data)
        if key is None:
            logger.warning(
                "user %r is not in %s (users: %s); nothing to load", self.user, self.source, ", ".join(data)
            )
            return self.user, [], None, data
        stripped = [k.strip() for k in data]
        name = key.strip() if stripped.count(key.strip()) == 1 else key
        mems, _ = user_memories(name, data[key])
        wanted = set(self.kinds)
        return name, [(m, 1.0) for m in mems if m.kind in wanted and not m.archived], key, data

    def _file_key(self, data: dict[str, Any]) -> str | None:
        if self.user in data:
            return self.user
        wanted = user_key(self.user) or self.user.strip()  # the user-name rule, as import applies it
        matches = [k for k in data if k.strip() == self.user.strip() or user_key(k) == wanted]
        return matches[0] if len(matches) == 1 else None

    # -- forgetting ---------------------------------------------------------------------------
    def _draw(self, name: str, memories: list[tuple[Memory, float]], today: dt.date) -> list[bool]:
        """Fill in each memory's retention (in place) and decide which are forgotten."""
        idx = [i for i, (m, _) in enumerate(memories) if m.kind in RETRIEVABLE_KINDS]
        drop = [False] * len(memories)
        if not idx:
            return drop
        subject = [memories[i][0] for i in idx]
        r = forgetting.retention_array(
            forgetting.elapsed_days([m.recall_anchor for m in subject], today),
            np.fromiter((m.strength for m in subject), dtype=np.float64, count=len(subject)),
            mode=self.mode,
            tau=self.tau,
        )
        for i, value in zip(idx, r.tolist(), strict=True):
            memories[i] = (memories[i][0], value)
        if self.mode == "off":
            return drop
        rng = forgetting.pass_rng(self.seed, name, today) if self.policy == "stochastic" else None
        mask = forgetting.forget_mask(r, policy=self.policy, threshold=self.threshold, rng=rng)
        for i, d in zip(idx, mask.tolist(), strict=True):
            drop[i] = bool(d)
        return drop

    # -- writing ------------------------------------------------------------------------------
    def _write(self, name: str, gone: list[Memory], key: str | None, data: dict[str, Any] | None) -> None:
        if isinstance(self.source, MemoryBank):
            bank = self.source
            if bank.config.forgetting.action == "delete":
                for m in gone:
                    bank.delete_memory(name, m.memory_id)
            else:
                bank.archive(name, [m.memory_id for m in gone], hidden=False)  # forgotten, not hidden
            return
        if key is None or data is None:  # the user is not in the file: nothing was loaded
            return
        out = copy.deepcopy(data)
        out[key] = _without(out[key], name, gone)
        write_json_atomic(self.source, out)
        logger.info("removed %d forgotten memories of %r from %s", len(gone), name, self.source)


def _without(user: dict[str, Any], name: str, gone: list[Memory]) -> dict[str, Any]:
    """A user's file record without the forgotten turns and daily summaries.

    Turns after a removed one move up a place; those without a stored ``memory_id`` get their
    old one pinned, so a memory keeps its id (as the original code's forgetting-enabled files do).
    """
    turns_gone: dict[str, set[int]] = {}
    summaries_gone = set()
    for m in gone:
        if m.kind is MemoryKind.TURN and m.turn is not None:
            turns_gone.setdefault(m.date, set()).add(m.turn)
        elif m.kind is MemoryKind.DAILY_SUMMARY:
            summaries_gone.add(m.date)
    history = user.get("history") or {}
    for day_key, turns in history.items():
        day = parse_day(day_key)
        drop = turns_gone.get(day)
        if not drop:
            continue
        kept: list[Any] = []
        for i, turn in enumerate(turns):
            if i in drop:
                continue
            if i > min(drop):
                if isinstance(turn, list):
                    turn = {"query": turn[0], "response": turn[1]}
                turn.setdefault("memory_id", f"{name}_{day}_{i}")
            kept.append(turn)
        history[day_key] = kept
    summary = user.get("summary") or {}
    for day_key in [d for d in summary if parse_day(d) in summaries_gone]:
        del summary[day_key]
    return user
