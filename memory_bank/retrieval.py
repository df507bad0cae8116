"""Hybrid ranking of one user's memories for a query.

The paper ranks memory pieces by dense similarity alone. Chat memories are short and full of
names, titles and dates that a sentence encoder blurs, so each candidate's score here is

    dense cosine  +  w_lex * BM25 / max BM25  +  w_date * [memory is on a day the query names]

and a turn is then lifted towards the score of the turn just before it (``prev_turn_weight``)
and just after it (``next_turn_weight``) on the same day, when those score higher: in dialog the
answer is usually in the turn *after* the one that names the topic ("I went to a concert" /
"Whose?" / "Jay Chou's!"), so a turn that matches the question pulls its follow-up into the
top-k without pushing itself out. Turns are also indexed with the previous turn's reply as
context (see :func:`memory_bank.records.index_text`), which makes a short answer findable. Candidates are the union of the
dense top-N, the lexical top-N and the memories on named days; everything else scores lower by
construction, so the ranking of the top-k is exact with respect to this score.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np

from memory_bank.config import RetrievalConfig
from memory_bank.index import Partition
from memory_bank.text import dates_in, tokenize


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

    lex_pos, lex_scores = part.lexical.scores(tokenize(query))
    lexical = np.zeros(n, dtype=np.float32)
    if len(lex_pos) and cfg.lexical_weight > 0:
        lexical[lex_pos] = lex_scores / float(lex_scores.max())
        top_lex = lex_pos[np.argsort(-lex_scores, kind="stable")[:pool]]
    else:
        top_lex = np.zeros(0, dtype=np.int64)

    date_bonus = np.zeros(n, dtype=np.float32)
    named: np.ndarray = np.zeros(0, dtype=np.int64)
    if cfg.date_weight > 0:
        years = tuple(sorted({int(d[:4]) for d in part.dates}, reverse=True))
        days = {d.isoformat() for d in dates_in(query, now=now, years=years)}
        if days:
            named = np.fromiter((i for i, d in enumerate(part.dates) if d in days), dtype=np.int64)
            date_bonus[named] = cfg.date_weight

    cand = np.unique(np.concatenate([dense_pos, top_lex, named]))
    if allowed_kinds is not None:
        cand = cand[np.fromiter((part.kinds[i] in allowed_kinds for i in cand), dtype=bool, count=len(cand))]
    if not len(cand):
        return Ranked(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))

    # Base scores for the candidates and their neighbouring turns.
    wp, wn = cfg.prev_turn_weight, cfg.next_turn_weight
    nbrs = {int(p): part.neighbours(int(p)) for p in cand} if (wp > 0 or wn > 0) else {}
    extra = [q for pair in nbrs.values() for q in pair if q is not None]
    need = np.unique(np.concatenate([cand, np.asarray(extra, dtype=np.int64)]))
    dense = part.vectors_at(need) @ query_vector.astype(np.float32)
    base = dict(
        zip(
            need.tolist(),
            (cfg.dense_weight * dense + cfg.lexical_weight * lexical[need] + date_bonus[need]).tolist(),
            strict=True,
        )
    )

    def context(p: int) -> float:
        prev, nxt = nbrs.get(p, (None, None))
        me = base[p]
        before = wp * max(0.0, base[prev] - me) if prev is not None else 0.0
        after = wn * max(0.0, base[nxt] - me) if nxt is not None else 0.0
        return before + after

    final = np.array([base[p] + context(p) for p in cand.tolist()], dtype=np.float32)
    order = np.argsort(-final, kind="stable")[:k]
    return Ranked(cand[order], final[order])
