"""Stages: scores that depend on other memories' scores, applied in order to the fused base.

A stage has a ``name`` and ``apply(ctx, cands, scores)``, which takes the ``float64`` scores of
``cands.scored`` and returns new ones (the same length). The bank's stages, built from
:class:`~memory_bank.config.RetrievalConfig` by :func:`default_stages`:

* ``day_evidence``: each memory gains ``weight`` times its day's evidence, the mean score of the
  day's ``top`` best scored memories. A day that matches the question as a whole (the role a
  daily event summary plays in the paper) lifts all its relevant turns.
* ``neighbour_lift``: each candidate turn moves ``prev_weight`` of the way towards the score of
  the turn just before it and ``next_weight`` of the way towards the turn just after it (same
  day), when those score higher. In dialog the answer is often in the turn after the one that
  names the topic ("I went to a concert" / "Whose?" / "Jay Chou's!"): a matching turn pulls its
  follow-up into the top k without pushing itself out.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from memory_bank import native
from memory_bank.config import RetrievalConfig
from memory_bank.index import Partition
from memory_bank.retrieval.candidates import Candidates
from memory_bank.retrieval.query import Context


class Stage(Protocol):
    """One stage (see the module docstring)."""

    @property
    def name(self) -> str: ...

    def apply(self, ctx: Context, cands: Candidates, scores: np.ndarray) -> np.ndarray:
        """New ``float64`` scores of ``cands.scored`` from the current ones."""
        ...


@dataclasses.dataclass(frozen=True)
class DayEvidence:
    """``score + weight * mean of the top best scores on the memory's day``."""

    weight: float
    top: int = 3
    name: str = "day_evidence"

    def apply(self, ctx: Context, cands: Candidates, scores: np.ndarray) -> np.ndarray:
        return scores + self.weight * day_evidence(ctx.part, cands.scored, scores, self.top)


@dataclasses.dataclass(frozen=True)
class NeighbourLift:
    """``score + prev_weight * max(0, prev - score) + next_weight * max(0, next - score)`` for
    each candidate, with ``prev``/``next`` the scores of the turns around it (0 where none).
    Only the candidates are lifted; the other scored memories are not ranked."""

    prev_weight: float
    next_weight: float
    name: str = "neighbour_lift"

    def apply(self, ctx: Context, cands: Candidates, scores: np.ndarray) -> np.ndarray:
        at = cands.ranked_at
        if native.neighbour_lift is not None:
            out = np.empty(len(scores), dtype=np.float64)
            native.neighbour_lift(
                np.ascontiguousarray(cands.scored, dtype=np.int64),
                np.ascontiguousarray(at, dtype=np.int64),
                np.ascontiguousarray(cands.prev, dtype=np.int64),
                np.ascontiguousarray(cands.next, dtype=np.int64),
                np.ascontiguousarray(scores, dtype=np.float64),
                self.prev_weight,
                self.next_weight,
                out,
            )
            return out
        return self.numpy_apply(cands, scores)

    def numpy_apply(self, cands: Candidates, scores: np.ndarray) -> np.ndarray:
        """:meth:`apply` in NumPy (the compiled loop gives the same numbers)."""
        at = cands.ranked_at
        me = scores[at]

        def lift(weight: float, other: np.ndarray) -> np.ndarray:
            out = np.zeros(len(at))
            has = other >= 0
            out[has] = weight * np.maximum(0.0, scores[cands.at(other[has])] - me[has])
            return out

        lifted = scores.copy()
        lifted[at] = me + (lift(self.prev_weight, cands.prev) + lift(self.next_weight, cands.next))
        return lifted


def day_evidence(part: Partition, positions: np.ndarray, scores: np.ndarray, top: int) -> np.ndarray:
    """For each position, the mean of the ``top`` best ``scores`` among ``positions`` on its day.

    One sort by (day, best score first): a day is a run of it, and the run's first ``top``
    scores are summed in that order (so the sums are those of adding them best first). The
    compiled loop where it is built (and no score is NaN), else :func:`numpy_day_evidence`:
    the same numbers."""
    if top < 1:
        raise ValueError(f"day evidence averages a day's {top} best scores; it needs at least 1")
    days = part.day_ids(positions)
    if native.day_evidence is not None and not np.isnan(scores).any():
        out = np.empty(len(positions), dtype=np.float64)
        native.day_evidence(
            np.ascontiguousarray(days, dtype=np.int32),
            np.ascontiguousarray(scores, dtype=np.float64),
            top,
            out,
        )
        return out
    return numpy_day_evidence(days, scores, top)


def numpy_day_evidence(days: np.ndarray, scores: np.ndarray, top: int) -> np.ndarray:
    """:func:`day_evidence` given each position's day number, in NumPy."""
    n = len(days)
    order = np.lexsort((-scores, days))
    grouped = days[order]
    new_run = np.empty(n, dtype=bool)
    new_run[:1] = True
    np.not_equal(grouped[1:], grouped[:-1], out=new_run[1:])
    run = np.cumsum(new_run) - 1  # the run (day) of each sorted position
    starts = np.flatnonzero(new_run)
    best = np.arange(n) - starts[run] < top
    sums = np.bincount(run[best], weights=scores[order][best])
    means = sums / np.bincount(run[best])
    out = np.empty(n, dtype=np.float64)
    out[order] = means[run]
    return out


def default_stages(cfg: RetrievalConfig) -> list[Stage]:
    """The bank's stages for ``cfg``, in order, leaving out those of weight 0."""
    stages: list[Stage] = []
    if cfg.day_weight > 0:
        stages.append(DayEvidence(cfg.day_weight, cfg.day_top))
    if cfg.prev_turn_weight > 0 or cfg.next_turn_weight > 0:
        stages.append(NeighbourLift(cfg.prev_turn_weight, cfg.next_turn_weight))
    return stages
