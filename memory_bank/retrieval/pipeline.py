"""The ranking pipeline: candidates, scoring terms, a fusion, stages, top k.

>>> pipeline = Pipeline.from_config(RetrievalConfig())
>>> [t.name for t in pipeline.terms], [s.name for s in pipeline.stages]
(['dense', 'lexical', 'named_day', 'named_month'], ['day_evidence', 'neighbour_lift'])

:meth:`Pipeline.with_term` swaps a term for another of the same name or adds a new one, so an
experimental ranking is a term (or a config), never a copy of the pipeline.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from memory_bank.config import RetrievalConfig
from memory_bank.index import Partition
from memory_bank.retrieval.candidates import CandidateStep, Source, dense_top, lexical_top, named_days
from memory_bank.retrieval.query import Context, Query
from memory_bank.retrieval.stages import Stage, default_stages
from memory_bank.retrieval.terms import Term, default_terms

#: How the terms' scores become one base score per scored memory (``float32``).
Fusion = Callable[[Context, Sequence[Term], np.ndarray], np.ndarray]


def weighted_sum(ctx: Context, terms: Sequence[Term], positions: np.ndarray) -> np.ndarray:
    """``sum of weight * score`` over ``terms``, added in order in ``float32``."""
    base = np.zeros(len(positions), dtype=np.float32)
    for term in terms:
        base += term.weight * term.score(ctx, positions)
    return base


@dataclasses.dataclass(frozen=True)
class ReciprocalRank:
    """Reciprocal-rank fusion (Cormack et al., 2009) of the ranking terms, a weighted sum of the rest.

    A term named in ``rankers`` (the dense and lexical similarities) contributes
    ``weight * (k + 1) / (k + rank)``, its rank among the scored memories (1 = best; a memory it
    scores 0 or less gets nothing), so the best memory of each ranker gets its full weight
    whatever the scale of its scores. The other terms (the date hints, the penalties) are 0/1
    flags and are added as in :func:`weighted_sum`.
    """

    k: int = 60
    rankers: frozenset[str] = frozenset({"dense", "lexical"})

    def __call__(self, ctx: Context, terms: Sequence[Term], positions: np.ndarray) -> np.ndarray:
        base = np.zeros(len(positions), dtype=np.float32)
        for term in terms:
            score = term.score(ctx, positions)
            if term.name not in self.rankers:
                base += term.weight * score
                continue
            order = np.argsort(-score, kind="stable")
            ranks = np.empty(len(score), dtype=np.float32)
            ranks[order] = np.arange(1, len(score) + 1, dtype=np.float32)
            fused = (self.k + 1) / (self.k + ranks)
            base += term.weight * np.where(score > 0, fused, 0.0).astype(np.float32)
        return base


def fusion_for(cfg: RetrievalConfig) -> Fusion:
    """The fusion ``cfg.fusion`` names: :func:`weighted_sum` or :class:`ReciprocalRank`."""
    return ReciprocalRank(cfg.rrf_k) if cfg.fusion == "rrf" else weighted_sum


@dataclasses.dataclass(frozen=True)
class Ranked:
    """Positions of a partition, best first, and their scores (``float32``)."""

    positions: np.ndarray
    scores: np.ndarray


_NOTHING = Ranked(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """Candidates, then ``fusion`` of ``terms`` (base score), then ``stages`` in order."""

    candidates: CandidateStep
    terms: tuple[Term, ...]
    stages: tuple[Stage, ...] = ()
    fusion: Fusion = weighted_sum

    @classmethod
    def from_config(cls, cfg: RetrievalConfig, *, fusion: Fusion | None = None) -> Pipeline:
        """The bank's ranking for ``cfg``: only the terms, sources and stages it weighs, fused
        as ``cfg.fusion`` says unless ``fusion`` is given."""
        sources: list[Source] = [dense_top]
        if cfg.lexical_weight > 0:
            sources.append(lexical_top)
        if cfg.date_weight > 0:
            sources.append(named_days)
        neighbours = cfg.prev_turn_weight > 0 or cfg.next_turn_weight > 0
        return cls(
            CandidateStep(tuple(sources), cfg.candidates, neighbours),
            tuple(default_terms(cfg)),
            tuple(default_stages(cfg)),
            fusion or fusion_for(cfg),
        )

    def with_term(self, term: Term) -> Pipeline:
        """This pipeline with ``term`` in place of the term of the same name, else added last."""
        names = [t.name for t in self.terms]
        if term.name in names:
            terms = tuple(term if t.name == term.name else t for t in self.terms)
        else:
            terms = (*self.terms, term)
        return dataclasses.replace(self, terms=terms)

    def rank(self, part: Partition, query: Query, k: int) -> Ranked:
        """Top-``k`` positions of ``part`` for ``query``, best first, with their scores."""
        if len(part) == 0 or k <= 0:
            return _NOTHING
        ctx = Context(part, query)
        cands = self.candidates(ctx, k)
        if cands is None:
            return _NOTHING
        # float64 from here, like Python floats: the stages compute what per-candidate code would.
        scores = self.fusion(ctx, self.terms, cands.scored).astype(np.float64)
        for stage in self.stages:
            scores = stage.apply(ctx, cands, scores)
        final = scores[cands.ranked_at].astype(np.float32)
        order = np.argsort(-final, kind="stable")[:k]
        return Ranked(cands.ranked[order], final[order])


def rank(
    part: Partition,
    query: str,
    query_vector: np.ndarray,
    k: int,
    cfg: RetrievalConfig,
    *,
    now: dt.date | None = None,
    allowed_kinds: frozenset[str] | None = None,
) -> Ranked:
    """Top-``k`` positions of ``part`` for ``query`` with the bank's pipeline for ``cfg``."""
    parsed = Query.parse(part, query, query_vector, now=now, allowed_kinds=allowed_kinds)
    return bank_pipeline(cfg).rank(part, parsed, k)


def bank_pipeline(cfg: RetrievalConfig) -> Pipeline:
    """``Pipeline.from_config(cfg)``, built once per distinct config: keyed by the config's
    values (a config may be changed in place); building one costs ~10 us."""
    return _bank_pipeline(tuple(cfg.__dict__.items()))


@functools.lru_cache(maxsize=64)
def _bank_pipeline(values: tuple[tuple[str, Any], ...]) -> Pipeline:
    return Pipeline.from_config(RetrievalConfig.model_validate(dict(values)))
