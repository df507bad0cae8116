"""The ranking is exactly what the per-candidate reference code computes (positions and scores,
bit for bit), on partitions large enough to use every fast path."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from memory_bank.bench.data import DialogGenerator
from memory_bank.bench.systems import turn_memories
from memory_bank.config import RetrievalConfig
from memory_bank.embeddings import HashingEncoder
from memory_bank.index import Partition
from memory_bank.records import index_text
from memory_bank.retrieval import rank
from memory_bank.stores import VectorBatch
from memory_bank.text import dates_in, months_in, tokenize


def reference_rank(part, query, qvec, k, cfg, now=None, allowed_kinds=None):  # type: ignore[no-untyped-def]
    """The ranking as first written: per-candidate Python, full sorts, scans over all dates."""
    n = len(part)
    pool = max(cfg.candidates, k)
    dense_pos, _ = part.dense_top(qvec, pool)
    lex_pos, lex_scores = part.lexical.scores(tokenize(query))
    lexical = np.zeros(n, dtype=np.float32)
    if len(lex_pos) and cfg.lexical_weight > 0:
        lexical[lex_pos] = lex_scores / float(lex_scores.max())
        top_lex = lex_pos[np.argsort(-lex_scores, kind="stable")[:pool]]
    else:
        top_lex = np.zeros(0, dtype=np.int64)
    date_bonus = np.zeros(n, dtype=np.float32)
    named = np.zeros(0, dtype=np.int64)
    if cfg.date_weight > 0:
        years = tuple(sorted({int(d[:4]) for d in part.dates}, reverse=True))
        days = {d.isoformat() for d in dates_in(query, now=now, years=years)}
        if days:
            named = np.fromiter((i for i, d in enumerate(part.dates) if d in days), dtype=np.int64)
            date_bonus[named] = cfg.date_weight
    if cfg.month_weight > 0:
        years = tuple(sorted({int(d[:4]) for d in part.dates}, reverse=True))
        months = months_in(query, years=years)
        in_month = np.fromiter((d[:7] in months for d in part.dates), dtype=bool, count=n)
        date_bonus[in_month & (date_bonus == 0)] = cfg.month_weight
    cand = np.unique(np.concatenate([dense_pos, top_lex, named]))
    if allowed_kinds is not None:
        cand = cand[np.fromiter((part.kinds[i] in allowed_kinds for i in cand), dtype=bool, count=len(cand))]
    wp, wn = cfg.prev_turn_weight, cfg.next_turn_weight
    if wp > 0 or wn > 0:  # neighbouring turns are candidates too
        around = {q for p in cand.tolist() for q in part.neighbours(int(p)) if q is not None}
        if allowed_kinds is not None:
            around = {q for q in around if part.kinds[q] in allowed_kinds}
        cand = np.unique(np.concatenate([cand, np.asarray(sorted(around), dtype=np.int64)]))
    nbrs = {int(p): part.neighbours(int(p)) for p in cand} if (wp > 0 or wn > 0) else {}
    extra = [q for pair in nbrs.values() for q in pair if q is not None]
    need = np.unique(np.concatenate([cand, np.asarray(extra, dtype=np.int64)]))
    dense = part.vectors_at(need) @ qvec.astype(np.float32)
    base = dict(zip(need.tolist(), (cfg.dense_weight * dense + cfg.lexical_weight * lexical[need]
                                    + date_bonus[need]).tolist(), strict=True))
    if cfg.day_weight > 0:
        by_day: dict[str, list[float]] = {}
        for p, v in base.items():
            by_day.setdefault(part.dates[p], []).append(v)
        day_score = {d: float(np.mean(sorted(v, reverse=True)[: cfg.day_top])) for d, v in by_day.items()}
        base = {p: v + cfg.day_weight * day_score[part.dates[p]] for p, v in base.items()}

    def context(p: int) -> float:
        prev, nxt = nbrs.get(p, (None, None))
        me = base[p]
        before = wp * max(0.0, base[prev] - me) if prev is not None else 0.0
        after = wn * max(0.0, base[nxt] - me) if nxt is not None else 0.0
        return before + after

    final = np.array([base[p] + context(p) for p in cand.tolist()], dtype=np.float32)
    order = np.argsort(-final, kind="stable")[:k]
    return cand[order], final[order]


def _partition(n: int, encoder: HashingEncoder) -> Partition:
    turns = DialogGenerator(11).turns(n, per_day=9)
    mems = turn_memories("u", turns)
    texts = [index_text(m.text, m.context) for m in mems]
    part = Partition(encoder.dim)
    for s in range(0, n, 400):
        chunk = mems[s : s + 400]
        part.add(
            VectorBatch(
                np.arange(s + 1, s + 1 + len(chunk), dtype=np.int64),
                encoder.encode(texts[s : s + 400]),
                texts[s : s + 400],
                ["turn" if i % 10 else "daily_summary" for i in range(s, s + len(chunk))],
                [m.date for m in chunk],
                [m.turn for m in chunk],
            )
        )
    return part


@pytest.mark.parametrize(
    "cfg",
    [
        RetrievalConfig(),
        RetrievalConfig(prev_turn_weight=0, next_turn_weight=0),
        RetrievalConfig(day_top=1, month_weight=0),
        RetrievalConfig(day_weight=0),
        RetrievalConfig(lexical_weight=0, date_weight=0, candidates=8),
    ],
)
def test_rank_equals_the_reference(cfg: RetrievalConfig) -> None:
    encoder = HashingEncoder(64)
    part = _partition(2500, encoder)
    queries = [*DialogGenerator(12).queries(30), "What did I do on January 5th?", "museum 2023-01-09",
               "What did I cook in February 2023?", "trip in January, on January 7th", "zzz"]
    for i, q in enumerate(queries):
        qvec = encoder.encode([q])[0]
        for k, allowed in ((5, None), (40, frozenset({"turn"}))):
            got = rank(part, q, qvec, k, cfg, now=dt.date(2023, 9, 1), allowed_kinds=allowed)
            pos, scores = reference_rank(part, q, qvec, k, cfg, now=dt.date(2023, 9, 1), allowed_kinds=allowed)
            assert got.positions.tolist() == pos.tolist(), (i, q)
            assert got.scores.tobytes() == scores.tobytes(), (i, q)
