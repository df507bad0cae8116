"""Hybrid ranking of one user's memories for a query.

The paper ranks memory pieces by dense similarity alone. Chat memories are short and full of
names, titles and dates that a sentence encoder blurs, so each candidate's base score here is

    dense cosine  +  w_lex * BM25 / max BM25
                  +  w_date * [on a day the query names]  (or w_month * [in a month it names])

then each memory gains ``day_weight`` times its day's evidence, the mean base score of the
day's ``day_top`` best candidates (a day that matches the question as a whole, the role a daily
event summary plays in the paper, lifts all its relevant turns), and a turn is lifted towards
the score of the turn just before it (``prev_turn_weight``) and just after it
(``next_turn_weight``) on the same day, when those score higher: in dialog the answer is usually
in the turn *after* the one that names the topic ("I went to a concert" / "Whose?" / "Jay
Chou's!"), so a turn that matches the question pulls its follow-up into the top-k without
pushing itself out. Turns are also indexed with the previous turn's reply as context (see
:func:`memory_bank.records.index_text`), which makes a short answer findable. Candidates are the
union of the dense top-N, the lexical top-N, the memories on named days and the turns next to
any of those. The weights were
chosen on the paper's probing questions and the LoCoMo development set together (README,
Evaluation).
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np

from memory_bank.config import RetrievalConfig
from memory_bank.index import Partition, stable_top
from memory_bank.text import dates_in, months_in, tokenize


@dataclasses.dataclass(frozen=True)
class Ranked:
    positions: np.ndarray
    scores: np.ndarray


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
    """Top-``k`` positions of ``part`` for ``query``, best first, with their scores."""
    n = len(part)
    if n == 0 or k <= 0:
        return Ranked(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
    pool = max(cfg.candidates, k)
    dense_pos, _ = part.dense_top(query_vector, pool)

    query_tokens = tokenize(query)
    bm25 = part.lexical.score_array(query_tokens)  # 0 where no query token occurs
    best = float(bm25.max())
    if best > 0 and cfg.lexical_weight > 0:
        lexical = bm25 / best
        top_lex = stable_top(bm25, pool)
        top_lex = top_lex[bm25[top_lex] > 0]
    else:
        lexical = np.zeros(n, dtype=np.float32)
        top_lex = np.zeros(0, dtype=np.int64)

    date_bonus = np.zeros(n, dtype=np.float32)
    named: np.ndarray = np.zeros(0, dtype=np.int64)
    years = part.years()
    if cfg.month_weight > 0:
        months = months_in(query, years=years)
        if months:
            date_bonus[part.positions_in_months(months)] = cfg.month_weight
    if cfg.date_weight > 0:
        days = {d.isoformat() for d in dates_in(query, now=now, years=years)}
        if days:
            named = part.positions_on(days)
            date_bonus[named] = cfg.date_weight

    def of_allowed_kinds(positions: np.ndarray) -> np.ndarray:
        if allowed_kinds is None:
            return positions
        keep = np.fromiter(
            (part.kinds[i] in allowed_kinds for i in positions), dtype=bool, count=len(positions)
        )
        return positions[keep]

    cand = of_allowed_kinds(np.unique(np.concatenate([dense_pos, top_lex, named])))
    if not len(cand):
        return Ranked(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))

    # Base scores for the candidates and their neighbouring turns (-1: no such turn). The turns
    # next to a candidate are candidates too: the lift can carry them into the top-k.
    wp, wn = cfg.prev_turn_weight, cfg.next_turn_weight
    if wp > 0 or wn > 0:
        prev, nxt = part.neighbour_positions(cand)
        cand = np.union1d(cand, of_allowed_kinds(np.concatenate([prev[prev >= 0], nxt[nxt >= 0]])))
        prev, nxt = part.neighbour_positions(cand)
    else:
        prev = nxt = np.full(len(cand), -1, dtype=np.int64)
    need = np.unique(np.concatenate([cand, prev[prev >= 0], nxt[nxt >= 0]]))
    dense = part.vectors_at(need) @ query_vector.astype(np.float32)
    # In float64, like Python floats: the lift below is computed exactly as per-candidate code would.
    base = (cfg.dense_weight * dense + cfg.lexical_weight * lexical[need] + date_bonus[need]).astype(
        np.float64
    )
    if cfg.echo_weight > 0:
        base = base - cfg.echo_weight * echo_penalty(part.echo(need, query_tokens), cfg.echo_floor)
    if cfg.unanswered_weight > 0:
        base = base - cfg.unanswered_weight * part.unanswered(need)
    if cfg.day_weight > 0:
        base = base + cfg.day_weight * _day_evidence(part, need, base, cfg.day_top)
    me = base[np.searchsorted(need, cand)]

    def lift(weight: float, other: np.ndarray) -> np.ndarray:
        """``weight * max(0, neighbour's base - own base)`` where the neighbour exists, else 0."""
        out = np.zeros(len(cand))
        has = other >= 0
        out[has] = weight * np.maximum(0.0, base[np.searchsorted(need, other[has])] - me[has])
        return out

    final = (me + (lift(wp, prev) + lift(wn, nxt))).astype(np.float32)
    order = np.argsort(-final, kind="stable")[:k]
    return Ranked(cand[order], final[order])


def _day_evidence(part: Partition, positions: np.ndarray, scores: np.ndarray, top: int) -> np.ndarray:
    """For each position, the mean of the ``top`` best ``scores`` among ``positions`` on its day."""
    _, day = np.unique(part.day_ids(positions), return_inverse=True)
    order = np.lexsort((-scores, day))  # by day, best first within a day
    grouped = day[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    rank_in_day = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    best = rank_in_day < top
    sums = np.bincount(grouped[best], weights=scores[order][best])
    return (sums / np.bincount(grouped[best]))[day]


def echo_penalty(echo: np.ndarray, floor: float) -> np.ndarray:
    """0 up to ``floor``, rising linearly to 1 where a turn's question is the query.

    A turn in which the user asked the same question before (and got no answer, or a wrong
    guess) resembles the question more than the turn that holds the fact does; what the user
    asked is no evidence of the answer, so such turns give way to what the user said.
    """
    return np.clip((echo - floor) / max(1e-9, 1.0 - floor), 0.0, 1.0)
