"""Ranking changes measured here and not adopted in the core (yet), as terms on its pipeline.

The bank embeds a turn *with* the reply before it (``index_text``), which finds short answers
("Gulangyu, I loved it") but also gives the turn after a matching one the same similarity as
the match. ``proposed-v2`` embeds each turn by its own text only (:func:`build_partition` with
``own_text``) and replaces the bank's ``dense`` term by :class:`ComposedDense`, which composes
the in-context similarity from the vectors already stored, so nothing is embedded twice:

    own_weight * cos(q, v)  +  (1 - own_weight) * cos(q, normalise(v + v_previous_turn))

Everything else is the bank's pipeline (:class:`memory_bank.retrieval.Pipeline`) with other
weights (:data:`PROPOSALS`). It reaches a higher LoCoMo recall than the bank, but costs hit@2 on
the paper's English questions, and adopting it means storing vectors of a different text (a
re-embed of every store); see the Evaluation section of ``README.md`` for the figures.

:class:`ProposedSystem` runs a proposal as a benchmark system (see
:mod:`memory_bank.evaluation.benchmark`) and :func:`rank_memories` on any list of memories (the
paper's questions, ``eval_data/``).
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
from memory_bank.retrieval import Context, Dense, Pipeline, Query
from memory_bank.retrieval.dialogue import query_vector
from memory_bank.stores import VectorBatch
from memory_bank.text import tokenize

#: Retrieval weights that suit LoCoMo best (config keys of :class:`RetrievalConfig`); on the
#: paper's English questions they cost hit@2 (see README.md, Evaluation).
PROPOSED_CONFIG: dict[str, Any] = {"lexical_weight": 0.5, "prev_turn_weight": 0.3, "next_turn_weight": 0.3}


@dataclasses.dataclass(frozen=True)
class ComposedDense:
    """The ``dense`` term with in-context similarity composed from stored vectors (see the
    module docstring); ``own_weight=1`` is the bank's dense term."""

    weight: float
    own_weight: float = 0.5
    name: str = "dense"

    def score(self, ctx: Context, positions: np.ndarray) -> np.ndarray:
        part, q = ctx.part, ctx.query.vector
        vecs = part.vectors_at(positions)
        own = vecs @ q
        prevs = part.neighbour_positions(positions)[0]
        has_prev = prevs >= 0
        prev_vecs = np.zeros_like(vecs)
        if has_prev.any():
            prev_vecs[has_prev] = part.vectors_at(prevs[has_prev])
        combined = vecs + prev_vecs
        norms = np.linalg.norm(combined, axis=1)
        norms[norms == 0] = 1.0
        in_context = (combined @ q) / norms
        return self.own_weight * own + (1 - self.own_weight) * in_context


@dataclasses.dataclass(frozen=True, eq=False)
class OwnTextDense:
    """Cosine of the query with each memory's *own-text* vector (``vectors``, one row per
    position of the partition), next to the bank's ``dense`` term on the in-context vectors:
    a second vector per turn, measured before any store keeps one. ``query_vector``, when
    given, is the query embedded by the encoder of ``vectors`` (another encoder than the
    partition's: its in-context vectors with this one's own-text vectors)."""

    weight: float
    vectors: np.ndarray
    query_vector: np.ndarray | None = None
    name: str = "own_dense"

    def score(self, ctx: Context, positions: np.ndarray) -> np.ndarray:
        q = ctx.query.vector if self.query_vector is None else self.query_vector
        return self.vectors[positions] @ q


@dataclasses.dataclass(frozen=True)
class Proposal:
    """A measured ranking change: config weights, the vectors' text and the dense term."""

    retrieval: dict[str, Any]
    #: Embed each turn by its own text (the change); False keeps the bank's ``index_text``
    #: vectors, so with ``own_weight=1`` and the bank's weights this is the bank's ranking.
    own_text: bool
    own_weight: float
    summary: str

    def config(self, **overrides: Any) -> RetrievalConfig:
        """The retrieval config of this proposal, with ``overrides``."""
        return RetrievalConfig(**{**self.retrieval, **overrides})

    def pipeline(self, cfg: RetrievalConfig) -> Pipeline:
        """The bank's pipeline for ``cfg`` with this proposal's dense term."""
        pipeline = Pipeline.from_config(cfg)
        if self.own_weight == 1:
            return pipeline
        return pipeline.with_term(ComposedDense(cfg.dense_weight, self.own_weight))


#: The changes measured in README.md (Evaluation), by system name.
PROPOSALS: dict[str, Proposal] = {
    # Best on LoCoMo: also embed each turn's own text and compose the in-context similarity.
    "proposed-v2": Proposal(
        {**PROPOSED_CONFIG, "day_weight": 0.5, "day_top": 3, "month_weight": 0.3},
        own_text=True,
        own_weight=0.5,
        summary="own-text + composed in-context similarity, lexical 0.5, prev/next 0.3/0.3, day 0.5, month 0.3",
    ),
}


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


@dataclasses.dataclass(frozen=True, eq=False)
class TurnMaxDense:
    """Multi-vector query scoring: for a dialogue query, the best cosine of a memory with any
    one of the query's turns (``turn_vectors``, one row per turn), or with ``temperature`` > 0
    their soft maximum, instead of one mean vector."""

    weight: float
    turn_vectors: np.ndarray
    temperature: float = 0.0
    name: str = "turn_max_dense"

    def score(self, ctx: Context, positions: np.ndarray) -> np.ndarray:
        sims = ctx.part.vectors_at(positions) @ self.turn_vectors.T
        if self.temperature <= 0:
            return sims.max(axis=1).astype(np.float32)
        z = sims / self.temperature
        top = z.max(axis=1, keepdims=True)
        soft = self.temperature * (np.log(np.exp(z - top).sum(axis=1)) + top[:, 0])
        return (soft - self.temperature * np.log(sims.shape[1])).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Feedback:
    """Pseudo-relevance feedback (Rocchio for the vector, RM3-style for the words): rank once,
    then rank again with the query moved towards its ``top`` best memories: the vector by
    ``beta`` times their mean vector, the words by the ``terms`` words that weigh most in them
    (term frequency share times idf) and are not in the query."""

    top: int = 3
    beta: float = 0.3
    terms: int = 0

    def expand(
        self, pipeline: Pipeline, part: Partition, query: Query, doc_tokens: Sequence[list[str]]
    ) -> Query:
        first = pipeline.rank(part, query, self.top).positions
        if not len(first):
            return query
        vector = query.vector
        if self.beta > 0:
            mixed = vector + self.beta * part.vectors_at(first).mean(axis=0)
            vector = (mixed / max(1e-9, float(np.linalg.norm(mixed)))).astype(np.float32)
        out = dataclasses.replace(query, vector=vector)
        if self.terms > 0:
            n = len(doc_tokens)
            df: dict[str, int] = {}
            for toks in doc_tokens:
                for t in set(toks):
                    df[t] = df.get(t, 0) + 1
            have = set(query.tokens)
            weight: dict[str, float] = {}
            for p in first:
                toks = doc_tokens[int(p)]
                for t in set(toks):
                    if t not in have:
                        share = toks.count(t) / len(toks)
                        weight[t] = weight.get(t, 0.0) + share * float(np.log(n / df[t]))
            extra = sorted(weight, key=lambda t: (-weight[t], t))[: self.terms]
            out.__dict__["tokens"] = [*query.tokens, *extra]  # Query parses lazily: set its tokens
        return out


def rank_memories(
    memories: Sequence[Memory],
    questions: Sequence[str],
    encoder: Encoder,
    k: int,
    *,
    proposal: Proposal | None = None,
    cfg: RetrievalConfig | None = None,
    now: dt.date | None = None,
    own_text_weight: float = 0.0,
    feedback: Feedback | None = None,
    turn_max: tuple[float, float] = (0.0, 0.0),
    own_text_encoder: Encoder | None = None,
) -> list[list[int]]:
    """Indexes into ``memories`` of the top-``k`` for each question, ranked by ``proposal``
    (``None``: the bank's pipeline on the bank's vectors) with ``cfg`` (default: the
    proposal's weights, or the bank's defaults). ``own_text_weight`` > 0 (with no proposal)
    moves that share of the dense weight to :class:`OwnTextDense` on own-text vectors, of
    ``own_text_encoder`` when given (queried with its own query vectors), else of ``encoder``."""
    if proposal is None:
        cfg = cfg or RetrievalConfig()
        pipeline = Pipeline.from_config(cfg)
    else:
        cfg = cfg or proposal.config()
        pipeline = proposal.pipeline(cfg)
    part = build_partition(memories, encoder, own_text=proposal is not None and proposal.own_text)
    own_terms: list[OwnTextDense] = []
    if own_text_weight > 0 and proposal is None and memories:
        own_enc = own_text_encoder or encoder
        own = own_enc.encode([m.text for m in memories])
        w = cfg.dense_weight
        pipeline = pipeline.with_term(Dense(w * (1 - own_text_weight))).with_term(
            OwnTextDense(w * own_text_weight, own)
        )
        if own_text_encoder is not None:
            own_terms = [
                OwnTextDense(
                    w * own_text_weight, own, query_vector(q, own_enc.encode, cfg.latest_turn_weight)
                )
                for q in questions
            ]
    qvecs = [query_vector(q, encoder.encode, cfg.latest_turn_weight) for q in questions]
    doc_tokens = [tokenize(index_text(m.text, m.context)) or [""] for m in memories] if feedback else []
    out = []
    for i, (question, qv) in enumerate(zip(questions, qvecs, strict=True)):
        query = Query.parse(part, question, qv, now=now)
        if feedback is not None:
            query = feedback.expand(pipeline, part, query, doc_tokens)
        ranking = pipeline.with_term(own_terms[i]) if own_terms else pipeline
        dialogue = query.dialogue if turn_max[0] > 0 else None
        if dialogue is not None:
            share, temperature = turn_max
            turns = encoder.encode([t for _, t, _ in dialogue.turns])
            ranking = pipeline.with_term(Dense(cfg.dense_weight * (1 - share))).with_term(
                TurnMaxDense(cfg.dense_weight * share, turns, temperature)
            )
        ranked = ranking.rank(part, query, k)
        out.append([int(p) for p in ranked.positions])
    return out


class ProposedSystem:
    """A :class:`Proposal` as a benchmark system (see :mod:`memory_bank.evaluation.benchmark`)."""

    def __init__(
        self,
        encoder: Encoder,
        *,
        name: str = "proposed-v2",
        retrieval: dict[str, Any] | None = None,
        proposal: Proposal | None = None,
    ) -> None:
        self.encoder = encoder
        self.name = name
        self.proposal = proposal or PROPOSALS.get(name, PROPOSALS["proposed-v2"])
        self.cfg = self.proposal.config(**(retrieval or {}))

    def config(self) -> dict[str, Any]:
        return {
            "retrieval": self.cfg.model_dump(),
            "own_text": self.proposal.own_text,
            "own_weight": self.proposal.own_weight,
            "encoder": self.encoder.name,
        }

    def retrieve(self, hay: Any, k: int) -> dict[str, list[str]]:
        ids = [m.extra["id"] for m in hay.memories]
        ranked = rank_memories(
            hay.memories,
            [p.question for p in hay.probes],
            self.encoder,
            k,
            proposal=self.proposal,
            cfg=self.cfg,
            now=dt.date.fromisoformat(hay.now),
        )
        return {p.qid: [ids[i] for i in r] for p, r in zip(hay.probes, ranked, strict=True)}
