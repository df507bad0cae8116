"""A ranking change measured here and not adopted in the core (yet).

:func:`rank_v2` is :func:`memory_bank.retrieval.rank` with the bank's date/month hints and day
evidence, plus **own-text and in-context similarity**: the bank embeds a turn *with* the reply
before it (``index_text``), which finds short answers ("Gulangyu, I loved it") but also gives
the turn after a matching one the same similarity as the match. Here each turn is embedded by
its own text only, and its in-context similarity is composed from the vectors already stored:
``cos(q, normalise(v_turn + v_previous_turn))``, so nothing is embedded twice. The dense score
is ``own_weight * own + (1 - own_weight) * in_context``. With other weights (:data:`PROPOSALS`)
it reaches a higher LoCoMo recall than the bank, but costs hit@2 on the paper's English
questions, and adopting it means storing vectors of a different text (a re-embed of every
store); see the Evaluation section of ``README.md`` for the figures.

:class:`ProposedSystem` runs it as a benchmark system (see :mod:`memory_bank.evaluation.benchmark`)
and :func:`rank_memories` on any list of memories (the paper's questions, ``eval_data/``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_bank.config import RetrievalConfig
from memory_bank.embeddings import Encoder
from memory_bank.index import Partition
from memory_bank.records import Memory, index_text
from memory_bank.storage import VectorBatch
from memory_bank.text import dates_in, months_in, tokenize

#: Retrieval weights that suit LoCoMo best (config keys of :class:`RetrievalConfig`); on the
#: paper's English questions they cost hit@2 (see README.md, Evaluation).
PROPOSED_CONFIG: dict[str, Any] = {"lexical_weight": 0.5, "prev_turn_weight": 0.3, "next_turn_weight": 0.3}


@dataclasses.dataclass(frozen=True)
class V2Settings:
    own_weight: float = 0.5
    day_weight: float = 0.5
    day_top: int = 3
    month_weight: float = 0.0
    #: Embed each turn by its own text (the change); False keeps the bank's ``index_text``
    #: vectors, so with ``own_weight=1`` and ``day_weight=0`` this is the bank's ranking.
    own_text: bool = True


@dataclasses.dataclass(frozen=True)
class Proposal:
    """A measured ranking change: config weights plus :class:`V2Settings`."""

    retrieval: dict[str, Any]
    v2: V2Settings
    summary: str


#: The changes measured in README.md (Evaluation), by system name.
PROPOSALS: dict[str, Proposal] = {
    # Best on LoCoMo: also embed each turn's own text and compose the in-context similarity.
    "proposed-v2": Proposal(
        dict(PROPOSED_CONFIG),
        V2Settings(own_text=True, own_weight=0.5, day_weight=0.5, month_weight=0.3),
        "own-text + composed in-context similarity, lexical 0.5, prev/next 0.3/0.3, day 0.5, month 0.3",
    ),
}


def rank_v2(
    part: Partition,
    query: str,
    query_vector: np.ndarray,
    k: int,
    cfg: RetrievalConfig,
    *,
    now: dt.date | None = None,
    allowed_kinds: frozenset[str] | None = None,
    v2: V2Settings = V2Settings(),
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` positions of ``part`` (whose vectors embed each memory's *own* text) and scores."""
    n = len(part)
    if n == 0 or k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    pool = max(cfg.candidates, k)
    dense_pos, _ = part.dense_top(query_vector, pool)

    lex_pos, lex_scores = part.lexical.scores(tokenize(query))
    lexical = np.zeros(n, dtype=np.float32)
    if len(lex_pos) and cfg.lexical_weight > 0:
        lexical[lex_pos] = lex_scores / float(lex_scores.max())
        top_lex = lex_pos[np.argsort(-lex_scores, kind="stable")[:pool]]
    else:
        top_lex = np.zeros(0, dtype=np.int64)

    # Date and month hints as in the bank (the partition's day lookups).
    date_bonus = np.zeros(n, dtype=np.float32)
    named: np.ndarray = np.zeros(0, dtype=np.int64)
    years = part.years()
    if v2.month_weight > 0:
        months = months_in(query, years=years)
        if months:
            date_bonus[part.positions_in_months(months)] = v2.month_weight
    if cfg.date_weight > 0:
        days = {d.isoformat() for d in dates_in(query, now=now, years=years)}
        if days:
            named = part.positions_on(days)
            date_bonus[named] = cfg.date_weight

    cand = np.unique(np.concatenate([dense_pos, top_lex, named]))
    if allowed_kinds is not None:
        cand = cand[np.fromiter((part.kinds[i] in allowed_kinds for i in cand), dtype=bool, count=len(cand))]
    if not len(cand):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)

    around = {q for p in cand.tolist() for q in part.neighbours(int(p)) if q is not None}
    if allowed_kinds is not None:
        around = {q for q in around if part.kinds[q] in allowed_kinds}
    cand = np.unique(np.concatenate([cand, np.asarray(sorted(around), dtype=np.int64)]))
    nbrs = {int(p): part.neighbours(int(p)) for p in cand}
    extra = [q for pair in nbrs.values() for q in pair if q is not None]
    need = np.unique(np.concatenate([cand, np.asarray(extra, dtype=np.int64)]))
    # Previous turns of everything scored, for the composed in-context similarity.
    prev_of = {int(p): part.neighbours(int(p))[0] for p in need}
    prevs = np.asarray([prev_of[int(p)] if prev_of[int(p)] is not None else -1 for p in need], dtype=np.int64)
    vecs = part.vectors_at(need)
    q = query_vector.astype(np.float32)
    own = vecs @ q
    has_prev = prevs >= 0
    prev_vecs = np.zeros_like(vecs)
    if has_prev.any():
        prev_vecs[has_prev] = part.vectors_at(prevs[has_prev])
    combined = vecs + prev_vecs
    norms = np.linalg.norm(combined, axis=1)
    norms[norms == 0] = 1.0
    in_context = (combined @ q) / norms
    dense = v2.own_weight * own + (1 - v2.own_weight) * in_context
    base_arr = cfg.dense_weight * dense + cfg.lexical_weight * lexical[need] + date_bonus[need]

    if v2.day_weight > 0:
        by_day: dict[str, list[float]] = {}
        for p, s in zip(need.tolist(), base_arr.tolist(), strict=True):
            by_day.setdefault(part.dates[p], []).append(s)
        day_score = {d: float(np.mean(sorted(v, reverse=True)[: v2.day_top])) for d, v in by_day.items()}
        base_arr = base_arr + v2.day_weight * np.asarray([day_score[part.dates[p]] for p in need.tolist()])
    base = dict(zip(need.tolist(), base_arr.tolist(), strict=True))

    wp, wn = cfg.prev_turn_weight, cfg.next_turn_weight

    def context(p: int) -> float:
        prev, nxt = nbrs.get(p, (None, None))
        me = base[p]
        before = wp * max(0.0, base[prev] - me) if prev is not None else 0.0
        after = wn * max(0.0, base[nxt] - me) if nxt is not None else 0.0
        return before + after

    final = np.array([base[p] + context(p) for p in cand.tolist()], dtype=np.float32)
    order = np.argsort(-final, kind="stable")[:k]
    return cand[order], final[order]


def build_partition(memories: Sequence[Memory], encoder: Encoder, *, own_text: bool) -> Partition:
    """A search partition over ``memories`` (no store): vectors of the own text or of ``index_text``."""
    texts = [m.text if own_text else index_text(m.text, m.context) for m in memories]
    lexical = [index_text(m.text, m.context) for m in memories]
    part = Partition(encoder.dim)
    if memories:
        part.add(
            VectorBatch(
                np.arange(1, len(memories) + 1, dtype=np.int64),
                encoder.encode(texts),
                lexical,
                [m.kind.value for m in memories],
                [m.date for m in memories],
                [m.turn for m in memories],
                [m.query for m in memories],
                [m.response for m in memories],
            )
        )
    return part


def rank_memories(
    memories: Sequence[Memory],
    questions: Sequence[str],
    encoder: Encoder,
    k: int,
    *,
    cfg: RetrievalConfig | None = None,
    v2: V2Settings | None = V2Settings(),
    now: dt.date | None = None,
) -> list[list[int]]:
    """Indexes into ``memories`` of the top-``k`` for each question.

    ``v2=None`` ranks with the bank's own :func:`memory_bank.retrieval.rank` (for comparison on
    the same partition code path).
    """
    from memory_bank.retrieval import rank

    cfg = cfg or RetrievalConfig(**PROPOSED_CONFIG)
    part = build_partition(memories, encoder, own_text=v2 is not None and v2.own_text)
    qvecs = encoder.encode(list(questions)) if questions else np.zeros((0, encoder.dim), np.float32)
    out = []
    for question, qv in zip(questions, qvecs, strict=True):
        if v2 is None:
            pos = rank(part, question, qv, k, cfg, now=now).positions
        else:
            pos, _ = rank_v2(part, question, qv, k, cfg, now=now, v2=v2)
        out.append([int(p) for p in pos])
    return out


class ProposedSystem:
    """:func:`rank_v2` as a benchmark system (see :mod:`memory_bank.evaluation.benchmark`)."""

    def __init__(
        self,
        encoder: Encoder,
        *,
        name: str = "proposed-v2",
        retrieval: dict[str, Any] | None = None,
        v2: V2Settings | None = None,
    ) -> None:
        proposal = PROPOSALS.get(name, PROPOSALS["proposed-v2"])
        self.encoder = encoder
        self.name = name
        self.cfg = RetrievalConfig(**{**proposal.retrieval, **(retrieval or {})})
        self.v2 = v2 if v2 is not None else proposal.v2

    def config(self) -> dict[str, Any]:
        return {
            "retrieval": self.cfg.model_dump(),
            "v2": dataclasses.asdict(self.v2),
            "encoder": self.encoder.name,
        }

    def retrieve(self, hay: Any, k: int) -> dict[str, list[str]]:
        ids = [m.extra["id"] for m in hay.memories]
        ranked = rank_memories(
            hay.memories,
            [p.question for p in hay.probes],
            self.encoder,
            k,
            cfg=self.cfg,
            v2=self.v2,
            now=dt.date.fromisoformat(hay.now),
        )
        return {p.qid: [ids[i] for i in r] for p, r in zip(hay.probes, ranked, strict=True)}
