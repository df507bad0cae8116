"""An LLM-free retrieval benchmark over dated dialog with labelled evidence (LoCoMo, LongMemEval).

A dataset becomes a list of :class:`Haystack`: one user's turns (MemoryBank :class:`Memory`
records in time order, each with ``extra["id"]``, the id evidence refers to, and
``extra["session"]``) and the questions asked at the end (:class:`Probe`, with evidence ids).
Each :class:`System` ingests a haystack and returns, per question, the ranked ids of the turns it
retrieved; :func:`evaluate` scores them:

* turn recall@k: the share of a question's evidence ids among the top-k retrieved turns;
* session recall@k: the share of its evidence sessions among the first k distinct sessions of
  the retrieved turns (a session is ranked by its best turn).

Systems: :class:`BM25System` (BM25 over the turns' own text), :class:`DenseSystem` (cosine of
the encoder's vectors of the turns' own text) and :class:`MemoryBankSystem` (a real
:class:`~memory_bank.MemoryBank` in a temporary store, searched with ``bank.search``), which can
also replay the sessions in date order with forgetting on (see :class:`MemoryBankSystem`).
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from memory_bank.embeddings import Encoder
from memory_bank.evaluation.metrics import first_distinct, mean, recall_at_k
from memory_bank.records import Memory

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Probe:
    """A question with the ids of the turns (and sessions) that hold its answer."""

    qid: str
    question: str
    category: str
    evidence: list[str]
    sessions: list[str]
    answer: Any = None


@dataclasses.dataclass
class Haystack:
    """One user's history and the questions asked about it on day ``now`` (``YYYY-MM-DD``)."""

    user: str
    memories: list[Memory]
    probes: list[Probe]
    now: str

    def sessions(self) -> list[list[Memory]]:
        """The memories grouped by session, in order."""
        out: list[list[Memory]] = []
        last: object = object()
        for m in self.memories:
            s = m.extra.get("session")
            if not out or s != last:
                out.append([])
                last = s
            out[-1].append(m)
        return out


class System(Protocol):
    name: str

    def retrieve(self, hay: Haystack, k: int) -> dict[str, list[str]]:
        """Ranked turn ids (best first, at most ``k``) for each probe's ``qid``."""
        ...


def _top(scores: np.ndarray, k: int, mask: np.ndarray | None = None) -> list[int]:
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    order = np.argsort(-scores, kind="stable")[:k]
    return [int(i) for i in order if np.isfinite(scores[i])]


class BM25System:
    """Plain BM25 over each turn's own text, with the bank's tokenizer (CJK-aware)."""

    name = "bm25"

    def retrieve(self, hay: Haystack, k: int) -> dict[str, list[str]]:
        from memory_bank.index import LexicalIndex
        from memory_bank.text import tokenize

        lex = LexicalIndex()
        lex.add([m.text for m in hay.memories])
        ids = [m.extra["id"] for m in hay.memories]
        out = {}
        for p in hay.probes:
            pos, sc = lex.scores(tokenize(p.question))
            order = pos[np.argsort(-sc, kind="stable")[:k]]
            out[p.qid] = [ids[i] for i in order.tolist()]
        return out


class DenseSystem:
    """Plain dense retrieval: cosine between the question and each turn's own text."""

    def __init__(self, encoder: Encoder, name: str = "dense") -> None:
        self.encoder = encoder
        self.name = name

    def retrieve(self, hay: Haystack, k: int) -> dict[str, list[str]]:
        if not hay.memories:
            return {p.qid: [] for p in hay.probes}
        docs = self.encoder.encode([m.text for m in hay.memories])
        qs = self.encoder.encode([p.question for p in hay.probes])
        ids = [m.extra["id"] for m in hay.memories]
        return {p.qid: [ids[i] for i in _top(docs @ q, k)] for p, q in zip(hay.probes, qs, strict=True)}


@dataclasses.dataclass
class ReplayStats:
    memories: int = 0
    forgotten: int = 0
    passes: int = 0
    recalls: int = 0
    searches: int = 0  # every search: recalls during the replay and the questions
    cold_consulted: int = 0  # searches that also ranked the forgotten memories (the cold tier)


class MemoryBankSystem:
    """A real MemoryBank in a temporary store, searched with ``bank.search(user, question, k)``.

    ``retrieval`` and ``forgetting`` are overrides of the bank's config (see
    :class:`memory_bank.config.MemoryBankConfig`). With ``replay=True`` the sessions are added in
    date order with the clock at each session's date: a forgetting pass runs on each session's
    day (the bank's daily pass at the user's first access that day) and, when ``recall_k > 0``,
    every utterance of the session is first used as a query that recalls (reinforces) its top
    ``recall_k`` memories, as the chatbot does with each incoming message. The questions are
    asked on ``hay.now`` without reinforcing anything.

    ``forgetting={"policy": "stochastic-once", ...}`` is an experiment, not a bank setting: each
    memory draws one uniform number ``u`` per learning or recall (a hash of its id, its anchor
    date and ``seed``) and is forgotten once ``R < u``, so it is gone by day ``t`` with probability
    exactly ``1 - R(t)`` however many passes run. The bank's stochastic policy draws anew at every
    pass, so survival is the product of ``R`` over all passes and depends on how often the user
    comes back.
    """

    def __init__(
        self,
        encoder: Encoder,
        *,
        name: str = "memorybank",
        language: str = "en",
        retrieval: Mapping[str, Any] | None = None,
        forgetting: Mapping[str, Any] | None = None,
        replay: bool = False,
        recall_k: int = 0,
    ) -> None:
        self.encoder = encoder
        self.name = name
        self.language = language
        self.retrieval = dict(retrieval or {})
        self.forgetting = dict(forgetting or {})
        self.replay = replay
        self.recall_k = recall_k
        self.stats = ReplayStats()
        self.declared_forgetting = dict(self.forgetting)
        self.once = self.forgetting.get("policy") == "stochastic-once"
        if self.once:  # the bank's own passes drop nothing; _pass() does the forgetting
            self.seed = int(self.forgetting.get("seed") or 0)
            self.forgetting = {**self.forgetting, "policy": "threshold", "threshold": 0.0, "seed": None}

    def config(self) -> dict[str, Any]:
        return {
            "retrieval": self.retrieval,
            "forgetting": self.declared_forgetting,
            "replay": self.replay,
            "recall_k": self.recall_k,
            "encoder": self.encoder.name,
        }

    def retrieve(self, hay: Haystack, k: int) -> dict[str, list[str]]:
        from memory_bank.bank import MemoryBank

        ids = {m.memory_id: m.extra["id"] for m in hay.memories}
        recalls_before = self.stats.recalls
        with tempfile.TemporaryDirectory(prefix="mb-eval-") as store:
            bank = MemoryBank.open(
                store,
                language=self.language,
                encoder_instance=self.encoder,
                retrieval=self.retrieval or None,
                # Static retrieval (no replay): forgetting off unless asked for, since nothing
                # was recalled while the history was written.
                forgetting=self.forgetting or (None if self.replay else {"mode": "off"}),
            )
            try:
                if self.replay:
                    self._replay(bank, hay)
                else:
                    bank.add_memories(hay.user, [dataclasses.replace(m) for m in hay.memories])
                self.stats.memories += len(hay.memories)
                out = {}
                for p in hay.probes:
                    hits = bank.search(hay.user, p.question, k, now=hay.now)
                    out[p.qid] = [ids[h.memory.memory_id] for h in hits if h.memory.memory_id in ids]
                self.stats.searches += self.stats.recalls - recalls_before + len(hay.probes)
                self.stats.cold_consulted += bank.cold.consulted
                if self.replay:
                    self.stats.forgotten += sum(
                        1
                        for m, _ in bank.memories(hay.user, include_archived=True, now=hay.now)
                        if m.archived
                    )
            finally:
                bank.close()
        return out

    def _replay(self, bank: Any, hay: Haystack) -> None:
        for session in hay.sessions():
            day = session[0].date
            if bank.has_user(hay.user):
                if self.recall_k > 0:
                    for m in session:
                        bank.search(hay.user, m.text, self.recall_k, now=day, reinforce=True)
                        self.stats.recalls += 1
                self._pass(bank, hay.user, day)
                self.stats.passes += 1
            bank.add_memories(hay.user, [dataclasses.replace(m) for m in session])

    def _pass(self, bank: Any, user: str, day: str) -> None:
        if not self.once:
            bank.forget(user, now=day)  # a no-op when the day's pass already ran
            return
        from memory_bank.records import RETRIEVABLE_KINDS

        gone = [
            m
            for m, r in bank.memories(user, kinds=RETRIEVABLE_KINDS, include_archived=False, now=day)
            if r < _uniform(f"{self.seed}:{m.memory_id}:{m.recall_anchor}")
        ]
        if gone:
            bank.storage.set_archived(bank.user(user).id, [m.rowid or 0 for m in gone], True)


def _uniform(key: str) -> float:
    import hashlib

    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little") / 2.0**64


# -- scoring --------------------------------------------------------------------------------
def session_of(memories: Iterable[Memory]) -> dict[str, str]:
    return {m.extra["id"]: str(m.extra.get("session")) for m in memories}


def score_system(
    haystacks: Sequence[Haystack], ranked: Mapping[str, Mapping[str, list[str]]], ks: Sequence[int]
) -> dict[str, Any]:
    """Turn and session recall@k, overall (``"all"``) and per category, for one system.

    ``ranked[user][qid]`` is the system's ranked list of turn ids for that question.
    """
    turn: dict[str, dict[int, list[float]]] = {}
    sess: dict[str, dict[int, list[float]]] = {}
    for hay in haystacks:
        where = session_of(hay.memories)
        for p in hay.probes:
            ids = ranked[hay.user][p.qid]
            sessions = first_distinct(where.get(i, "?") for i in ids)
            for group in ("all", p.category):
                for k in ks:
                    # Questions without labelled turns (or sessions) are not scored on that level.
                    if p.evidence:
                        turn.setdefault(group, {}).setdefault(k, []).append(recall_at_k(p.evidence, ids, k))
                    if p.sessions:
                        sess.setdefault(group, {}).setdefault(k, []).append(
                            recall_at_k(p.sessions, sessions, k)
                        )

    def agg(table: dict[str, dict[int, list[float]]]) -> dict[str, dict[str, float]]:
        return {g: {str(k): round(mean(v), 4) for k, v in per.items()} for g, per in table.items()}

    def count(table: dict[str, dict[int, list[float]]]) -> dict[str, int]:
        return {g: len(next(iter(per.values()))) for g, per in table.items()}

    return {
        "turn_recall": agg(turn),
        "session_recall": agg(sess),
        "n": count(turn),
        "n_sessions": count(sess),
    }


def evaluate(
    haystacks: Sequence[Haystack],
    systems: Sequence[System],
    ks: Sequence[int],
    *,
    progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, dict[str, list[str]]]]]:
    """Run every system on every haystack; returns (metrics per system, ranked ids per system)."""
    k = max(ks)
    ranked: dict[str, dict[str, dict[str, list[str]]]] = {s.name: {} for s in systems}
    seconds = dict.fromkeys(ranked, 0.0)
    for hay in haystacks:
        for system in systems:
            t0 = time.perf_counter()
            ranked[system.name][hay.user] = system.retrieve(hay, k)
            seconds[system.name] += time.perf_counter() - t0
        if progress:
            progress(1)
    metrics = {}
    for system in systems:
        metrics[system.name] = score_system(haystacks, ranked[system.name], ks)
        metrics[system.name]["seconds"] = round(seconds[system.name], 2)
    return metrics, ranked
