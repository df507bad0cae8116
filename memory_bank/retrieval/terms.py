"""Scoring terms: each gives every scored memory one number, and the fusion combines them.

A term has a ``name``, a ``weight`` and ``score(ctx, positions)``, which returns one ``float32``
per position, *unweighted*; the default fusion (:func:`memory_bank.retrieval.pipeline.weighted_sum`)
adds ``weight * score`` over the terms, in their order. The default terms, built from
:class:`~memory_bank.config.RetrievalConfig` by :func:`default_terms`:

* ``dense``: the cosine of the memory's stored vector and the query vector;
* ``lexical``: the memory's BM25 score divided by the best score of the query (0..1), scaled
  by ``dialogue_lexical_scale`` when the query is a dialogue;
* ``named_day``: 1 for a memory on a day the query names ("May 4th", "5月4日", "yesterday");
* ``named_month``: 1 for a memory in a month the query names ("in July 2023"), unless the
  ``named_day`` term is on and the memory lies on a named day (a memory gets one date hint);
* ``echo``: minus how much a turn's own question repeats the query (0 up to ``echo_floor``,
  -1 where it is the query): what the user *asked* before is no evidence of the answer, so such
  turns give way to the turn where the user *said* it;
* ``unanswered``: minus 1 for a question turn whose reply gave no answer ("I'm not sure...").

Not built from the retrieval config: ``cold`` (:class:`ColdPenalty`), minus 1 for a forgotten
(archived) memory, which the bank adds when it ranks live and forgotten memories together
(``forgetting.cold_rank: joint``, see :mod:`memory_bank.cold`).

A term whose weight is 0 is not built, so it costs nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from memory_bank.config import RetrievalConfig
from memory_bank.retrieval.query import Context, member


class Term(Protocol):
    """One scoring term (see the module docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def weight(self) -> float: ...

    def score(self, ctx: Context, positions: np.ndarray) -> np.ndarray:
        """One ``float32`` per position, before the weight."""
        ...


@dataclasses.dataclass(frozen=True)
class Dense:
    """Cosine similarity of the stored (normalised) vectors with the query vector."""

    weight: float
    name: str = "dense"

    def score(self, ctx: Context, positions: np.ndarray) -> np.ndarray:
        return ctx.part.dot(positions, ctx.query.vector)


@dataclasses.dataclass(frozen=True)
class Lexical:
    """BM25 scaled by the query's best BM25 score, so 1 is the best lexical match; times
    ``dialogue_scale`` for a dialogue query, whose many turns' words make BM25 a noisier
    signal than a question's few (see :mod:`memory_bank.retrieval.dialogue`)."""

    weight: float
    dialogue_scale: float = 1.0
    name: str = "lexical"

    def score(self, ctx: Context, positions: np.ndarray) -> np.ndarray:
        best = ctx.bm25_max
        if best <= 0:
            return np.zeros(len(positions), dtype=np.float32)
        scaled = ctx.bm25.at(positions) / best
        if self.dialogue_scale != 1.0 and ctx.query.dialogue is not None:
            scaled *= np.float32(self.dialogue_scale)
        return scaled


@dataclasses.dataclass(frozen=True)
class NamedDay:
    """1 on the days the query names."""

    weight: float
    name: str = "named_day"

    def score(self, ctx: Context, positions: np.ndarray) -> np.ndarray:
        return member(positions, ctx.on_named_days).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class NamedMonth:
    """1 in the months the query names; 0 on a named day when ``yield_to_days`` (the
    ``named_day`` term gives those their hint)."""

    weight: float
    yield_to_days: bool = True
    name: str = "named_month"

    def score(self, ctx: Context, positions: np.ndarray) -> np.ndarray:
        hit = member(positions, ctx.in_named_months)
        if self.yield_to_days and hit.any():
            hit &= ~member(positions, ctx.on_named_days)
        return hit.astype(np.float32)


def echo_penalty(echo: np.ndarray, floor: float) -> np.ndarray:
    """0 up to ``floor``, rising linearly to 1 where a turn's question is the query.

    A turn in which the user asked the same question before (and got no answer, or a wrong
    guess) resembles the question more than the turn that holds the fact does.
    """
    return np.clip((echo - floor) / max(1e-9, 1.0 - floor), 0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class Echo:
    """Minus the share of the query a turn's own question repeats, above ``floor``."""

    weight: float
    floor: float
    name: str = "echo"

    def score(self, ctx: Context, positions: np.ndarray) -> np.ndarray:
        echo = ctx.part.echo(positions, ctx.query.tokens)
        return -echo_penalty(echo, self.floor).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Unanswered:
    """Minus 1 for a question turn whose reply did not answer it."""

    weight: float
    name: str = "unanswered"

    def score(self, ctx: Context, positions: np.ndarray) -> np.ndarray:
        return -np.asarray(ctx.part.unanswered(positions), dtype=np.float32)


@dataclasses.dataclass(frozen=True, eq=False)
class ColdPenalty:
    """Minus 1 for a memory that is not live (its rowid is not in ``live_rowids``, ascending).

    Ranking forgotten memories in one candidate set with the live ones keeps every other term
    consistent (BM25 normalised over both, day evidence and neighbours across both); the
    penalty then says how much better a forgotten memory must match to outrank a live one.
    """

    weight: float
    live_rowids: np.ndarray
    name: str = "cold"

    def score(self, ctx: Context, positions: np.ndarray) -> np.ndarray:
        live = member(ctx.part.rowids[positions], self.live_rowids)
        return -(~live).astype(np.float32)


def default_terms(cfg: RetrievalConfig) -> list[Term]:
    """The bank's terms for ``cfg``, in fusion order, leaving out those of weight 0 (the dense
    candidates are taken whatever the dense term's weight: see
    :class:`~memory_bank.retrieval.candidates.CandidateStep`)."""
    terms: list[Term] = []
    if cfg.dense_weight > 0:
        terms.append(Dense(cfg.dense_weight))
    if cfg.lexical_weight > 0:
        terms.append(Lexical(cfg.lexical_weight, cfg.dialogue_lexical_scale))
    if cfg.date_weight > 0:
        terms.append(NamedDay(cfg.date_weight))
    if cfg.month_weight > 0:
        terms.append(NamedMonth(cfg.month_weight, yield_to_days=cfg.date_weight > 0))
    if cfg.echo_weight > 0:
        terms.append(Echo(cfg.echo_weight, cfg.echo_floor))
    if cfg.unanswered_weight > 0:
        terms.append(Unanswered(cfg.unanswered_weight))
    return terms
