"""The systems the benchmark compares, behind one small interface.

* :class:`MemoryBankSystem`: this package (SQLite store, per-user partitions).
* :class:`OriginalDesign`: the original MemoryBank code's design: one JSON file rewritten on every
  save, the FAISS index rebuilt by re-embedding the user's whole history at every login, new turns
  searchable only after the next login, forgetting as a Python loop at login.
* :class:`LangChainClassic`: ``VectorStoreRetrieverMemory`` over LangChain's ``FAISS`` vector
  store (in memory; ``save_local``/``load_local`` pickle it to disk).
* :class:`Mem0OSS`: mem0 open source with ``add(..., infer=False)`` (no LLM), its FAISS store and
  the same Hugging Face model; it lives in :mod:`memory_bank.bench.mem0_system` because mem0 is
  installed only in a separate environment.

Every system embeds with the same model. ``build`` pre-fills a system with memories and their
vectors (setup, not timed: it uses each system's own storage code, bypassing its per-add path);
everything else is what is timed.
"""

from __future__ import annotations

import json
import logging
import math
import random
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory_bank.bench.data import Turn
from memory_bank.embeddings import Encoder
from memory_bank.records import Memory, MemoryKind

logger = logging.getLogger(__name__)

Progress = Callable[[int], None] | None


class CachingEncoder(Encoder):
    """Wraps an encoder; ``cached`` queries skip the model, to time a search without its embedding."""

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.cache: dict[str, np.ndarray] = {}
        self.use_cache = False

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self.use_cache and texts and all(t in self.cache for t in texts):
            return np.stack([self.cache[t] for t in texts])
        return self.inner.encode(texts)


def turn_memories(user: str, turns: Sequence[Turn]) -> list[Memory]:
    """Turns as stored memories, numbered per day, each indexed after the reply before it."""
    out: list[Memory] = []
    day, n, previous = "", 0, None
    for t in turns:
        d = t.at.date().isoformat()
        if d != day:
            day, n, previous = d, 0, None
        out.append(
            Memory(
                memory_id=f"{user}_{d}_{n}",
                user=user,
                kind=MemoryKind.TURN,
                date=d,
                turn=n,
                query=t.query,
                response=t.response,
                text=t.text,
                timestamp=t.at.isoformat(timespec="seconds"),
                context=previous,
            )
        )
        n += 1
        previous = t.response
    return out


class System:
    """What the benchmark does with a memory system."""

    name = "system"
    #: Whether ``add`` includes a durable write.
    durable_add = True

    def build(self, user: str, turns: Sequence[Turn], vectors: np.ndarray) -> None:
        raise NotImplementedError

    def open(self) -> None:
        """(Re)start: open the store and get ready to search (timed as the restart)."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def restart(self) -> None:
        """Close and open again (what a process restart costs, the model aside)."""
        self.close()
        self.open()

    def add(self, user: str, turn: Turn) -> None:
        raise NotImplementedError

    def search_cached(self, user: str, query: str, vectors: dict[str, np.ndarray], k: int) -> list[str]:
        """``search`` with the query's embedding given: the search alone."""
        encoder: CachingEncoder = self.encoder  # type: ignore[attr-defined]
        encoder.cache.update(vectors)
        encoder.use_cache = True
        try:
            return self.search(user, query, k)
        finally:
            encoder.use_cache = False

    def search(self, user: str, query: str, k: int) -> list[str]:
        raise NotImplementedError

    def forget(self, user: str, now: str, tau: float) -> int | None:
        """A forgetting pass; the number forgotten, or ``None`` if the system has none."""
        return None

    def bulk_import(self, user: str, turns: Sequence[Turn], progress: Progress = None) -> None:
        raise NotImplementedError


class MemoryBankSystem(System):
    name = "memorybank"

    def __init__(self, directory: Path, encoder: CachingEncoder) -> None:
        from memory_bank import MemoryBank

        self._cls = MemoryBank
        self.dir = directory
        self.encoder = encoder
        self.bank: Any = None

    def _open_bank(self) -> Any:
        return self._cls.open(self.dir, encoder_instance=self.encoder)

    def build(self, user: str, turns: Sequence[Turn], vectors: np.ndarray) -> None:
        bank = self._open_bank()
        rec = bank.user(user, create=True)
        mems = turn_memories(user, turns)
        for s in range(0, len(mems), 20_000):
            bank.storage.add_memories(
                rec.id, mems[s : s + 20_000], vectors[s : s + 20_000], bank.encoder_name
            )
        bank.close()

    def build_users(
        self, users: Sequence[str], turns: Sequence[Turn], vectors: Callable[[int], np.ndarray]
    ) -> None:
        """Pre-fill many users with the same dialog (``vectors(i)`` gives user i's vectors)."""
        bank = self._open_bank()
        for i, user in enumerate(users):
            rec = bank.user(user, create=True)
            bank.storage.add_memories(rec.id, turn_memories(user, turns), vectors(i), bank.encoder_name)
        bank.close()

    def open(self) -> None:
        self.close()
        self.bank = self._open_bank()

    def recall(
        self, user: str, queries: Sequence[str], vectors: dict[str, np.ndarray], k: int
    ) -> dict[str, Any] | None:
        """What the approximate dense search costs in recall: results against exact search."""
        part = self.bank._cache.get(self.bank.user(user).id)
        if not part.approximate:
            return None
        approx = [self.search_cached(user, q, vectors, k) for q in queries]
        dense_a = [set(part.dense_top(vectors[q], 64)[0].tolist()) for q in queries]
        limit = part.exact_limit
        part.set_exact_limit(len(part))
        try:
            exact = [self.search_cached(user, q, vectors, k) for q in queries]
            dense_e = [set(part.dense_top(vectors[q], 64)[0].tolist()) for q in queries]
        finally:
            part.set_exact_limit(limit)
        hits = sum(len(set(a) & set(e)) for a, e in zip(approx, exact, strict=True))
        return {
            "memories": len(part),
            "exact_limit": limit,
            "queries": len(queries),
            "recall_at_k": hits / max(1, sum(len(e) for e in exact)),
            "identical_results": sum(a == e for a, e in zip(approx, exact, strict=True)) / len(queries),
            "dense_recall_at_64": float(
                np.mean([len(a & e) / max(1, len(e)) for a, e in zip(dense_a, dense_e, strict=True)])
            ),
        }

    def close(self) -> None:
        if self.bank is not None:
            self.bank.close()
            self.bank = None

    def add(self, user: str, turn: Turn) -> None:
        self.bank.add_turn(user, turn.query, turn.response, at=turn.at)

    def search(self, user: str, query: str, k: int) -> list[str]:
        return [h.memory.text for h in self.bank.search(user, query, k=k)]

    def forget(self, user: str, now: str, tau: float) -> int | None:
        self.bank.config.forgetting.tau = tau
        self.bank.config.forgetting.policy = "stochastic"
        report = self.bank.forget(user, now=now, mode="paper", seed=0)
        return sum(len(r.forgotten) for r in report.values())

    def bulk_import(self, user: str, turns: Sequence[Turn], progress: Progress = None) -> None:
        self.bank.add_memories(user, turn_memories(user, turns), progress=progress)


class OriginalDesign(System):
    """The original code's design, reduced to its costs (see the module docstring)."""

    name = "original"

    def __init__(self, directory: Path, encoder: CachingEncoder) -> None:
        import faiss

        self._faiss = faiss
        self.dir = directory
        self.file = directory / "memory.json"
        self.encoder = encoder
        self.data: dict[str, Any] = {}
        self.index: Any = None
        self.texts: list[str] = []
        self.embed_limit: int | None = None
        self._vectors: np.ndarray | None = None
        self.reembed_s: float | None = None
        self.reembed_estimated = False

    def build(self, user: str, turns: Sequence[Turn], vectors: np.ndarray) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        history: dict[str, list[dict[str, Any]]] = {}
        for t in turns:
            history.setdefault(t.at.date().isoformat(), []).append(
                {"query": t.query, "response": t.response, "memory_strength": 1}
            )
        self.data = {user: {"name": user, "history": history}}
        self._save()
        self._vectors = vectors

    def _save(self) -> None:
        self.file.write_text(json.dumps(self.data, ensure_ascii=False), encoding="utf-8")

    def open(self) -> None:
        """Login: load the file and re-embed every memory to rebuild the index. Re-embedding a
        large history takes minutes; above ``embed_limit`` memories a sample is embedded, the
        time scaled up (``reembed_estimated``) and the stored vectors used for the index."""
        import time

        self.data = json.loads(self.file.read_text(encoding="utf-8"))
        self.texts = [
            f"{turn['query']}\n{turn['response']}"
            for user in self.data.values()
            for turns in user["history"].values()
            for turn in turns
        ]
        n = len(self.texts)
        limit = self.embed_limit or n
        start = time.perf_counter()
        vecs = self.encoder.encode(self.texts[:limit])
        took = time.perf_counter() - start
        if limit < n:
            assert self._vectors is not None
            vecs = np.ascontiguousarray(self._vectors[:n])
            took *= n / limit
            self.reembed_estimated = True
        index = self._faiss.IndexFlatL2(self.encoder.dim)
        index.add(np.ascontiguousarray(vecs, dtype=np.float32))
        self.index = index
        self.reembed_s = took

    def add(self, user: str, turn: Turn) -> None:
        # The original appends to the in-memory dict and rewrites the whole file; the new turn is
        # searchable only after the next login.
        day = turn.at.date().isoformat()
        self.data[user]["history"].setdefault(day, []).append(
            {"query": turn.query, "response": turn.response, "memory_strength": 1}
        )
        self._save()

    def search(self, user: str, query: str, k: int) -> list[str]:
        q = self.encoder.encode([query])
        _, pos = self.index.search(q, k)
        return [self.texts[i] for i in pos[0] if i >= 0]

    def forget(self, user: str, now: str, tau: float) -> int | None:
        """The original's pass: a Python loop over every memory with an unseeded random draw,
        hard-deleting, then rewriting the file."""
        import datetime as dt

        today = dt.date.fromisoformat(now)
        gone = 0
        for day, turns in self.data[user]["history"].items():
            t = (today - dt.date.fromisoformat(day)).days
            kept = []
            for turn in turns:
                retention = math.exp(-t / (tau * turn.get("memory_strength", 1)))
                if random.random() > retention:
                    gone += 1
                else:
                    kept.append(turn)
            self.data[user]["history"][day] = kept
        self._save()
        return gone

    def bulk_import(self, user: str, turns: Sequence[Turn], progress: Progress = None) -> None:
        for t in turns:
            self.data.setdefault(user, {"name": user, "history": {}})["history"].setdefault(
                t.at.date().isoformat(), []
            ).append({"query": t.query, "response": t.response, "memory_strength": 1})
        self._save()
        self.encoder.encode([t.text for t in turns])  # indexed at the next login
        if progress:
            progress(len(turns))


class LangChainClassic(System):
    """``VectorStoreRetrieverMemory`` over ``langchain_community.vectorstores.FAISS``."""

    name = "langchain"
    durable_add = False

    def __init__(self, directory: Path, encoder: CachingEncoder) -> None:
        self.dir = directory
        self.encoder = encoder
        self.store: Any = None
        self.memory: Any = None
        self.k = 5

    def _wrap(self) -> None:
        import warnings

        from langchain_classic.memory import VectorStoreRetrieverMemory

        retriever = self.store.as_retriever(search_kwargs={"k": self.k})
        with warnings.catch_warnings():  # deprecated in favour of agents: known, it is the baseline
            warnings.simplefilter("ignore")
            self.memory = VectorStoreRetrieverMemory(
                retriever=retriever, memory_key="history", input_key="input"
            )

    def build(self, user: str, turns: Sequence[Turn], vectors: np.ndarray) -> None:
        from langchain_community.vectorstores import FAISS

        texts = [f"input: {t.query}\noutput: {t.response}" for t in turns]
        self.store = FAISS.from_embeddings(list(zip(texts, vectors.tolist(), strict=True)), self.encoder)
        self.persist()

    def persist(self) -> None:
        """Its only way to disk: pickle the docstore and write the whole index."""
        self.store.save_local(str(self.dir))

    def open(self) -> None:
        from langchain_community.vectorstores import FAISS

        self.store = FAISS.load_local(str(self.dir), self.encoder, allow_dangerous_deserialization=True)
        self._wrap()

    def add(self, user: str, turn: Turn) -> None:
        self.memory.save_context({"input": turn.query}, {"output": turn.response})

    def search(self, user: str, query: str, k: int) -> list[str]:
        if k != self.k:
            self.k = k
            self._wrap()
        return str(self.memory.load_memory_variables({"input": query})["history"]).split("\n")

    def bulk_import(self, user: str, turns: Sequence[Turn], progress: Progress = None) -> None:
        texts = [f"input: {t.query}\noutput: {t.response}" for t in turns]
        for s in range(0, len(texts), 256):
            self.store.add_texts(texts[s : s + 256])
            if progress:
                progress(len(texts[s : s + 256]))


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
