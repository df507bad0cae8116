"""The bank's ranking, as optimised, equals a plain reference of its definition on a real store.

The reference below ranks by the definitions in :mod:`memory_bank.retrieval` written the
obvious way (Python sets and dicts, one memory at a time): the candidate union and its
neighbours, each term, the weighted sum, a day's evidence as the mean of its best scores, the
neighbour lift, the top k. Only the dense candidate *source* is taken from the partition, since
which memories the dense codes put forward is the index's business (its recall against exact
search is measured by ``memorybank bench``); everything the pipeline computes from it is
checked. The store is a real SQLite bank on disk, searched above its exact-search limit so the
codes path runs, with the default config and non-default ones (other weights, neighbours and
day evidence off, summaries excluded, a query that names days and months).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
from pathlib import Path

import numpy as np
import pytest

from memory_bank import MemoryBank, MemoryKind
from memory_bank.bench.data import DialogGenerator
from memory_bank.bench.systems import turn_memories
from memory_bank.config import RetrievalConfig
from memory_bank.embeddings import HashingEncoder
from memory_bank.index import Partition
from memory_bank.retrieval import Query, rank
from memory_bank.retrieval.terms import echo_penalty

NOW = dt.date(2030, 1, 1)


def reference_rank(
    part: Partition,
    text: str,
    vector: np.ndarray,
    k: int,
    cfg: RetrievalConfig,
    allowed: frozenset[str] | None,
) -> list[tuple[int, float]]:
    """The definition of the bank's ranking, one memory at a time (float64 throughout)."""
    q = Query.parse(part, text, vector, now=NOW, allowed_kinds=allowed)
    ok = (lambda p: True) if allowed is None else (lambda p: part.kinds[p] in allowed)
    n = len(part)
    bm25 = part.lexical.score_array(q.tokens).astype(
        np.float64
    )  # checked against its own reference elsewhere
    best = bm25.max()
    pool = max(cfg.candidates, k)
    found = set(part.dense_top(q.vector, pool)[0].tolist())
    if cfg.lexical_weight > 0 and best > 0:
        order = sorted(range(n), key=lambda p: (-bm25[p], p))[:pool]
        found |= {p for p in order if bm25[p] > 0}
    days = {i for i in range(n) if part.dates[i] in q.days}
    months = {i for i in range(n) if part.dates[i][:7] in q.months}
    if cfg.date_weight > 0:
        found |= days
    ranked = {p for p in found if ok(p)}
    if not ranked:
        return []
    neighbours = cfg.prev_turn_weight > 0 or cfg.next_turn_weight > 0

    if neighbours:
        ranked |= {int(x) for p in list(ranked) for x in part._nbrs[p] if x >= 0 and ok(int(x))}
    scored = set(ranked)
    if neighbours:
        scored |= {int(x) for p in ranked for x in part._nbrs[p] if x >= 0}
    qtok = set(q.tokens)
    base: dict[int, float] = {}
    for p in scored:
        s = (
            cfg.dense_weight * float(part.vectors_at(np.array([p]))[0] @ q.vector)
            if cfg.dense_weight
            else 0.0
        )
        if cfg.lexical_weight:
            lex = bm25[p] / best if best > 0 else 0.0
            if q.dialogue is not None:
                lex *= cfg.dialogue_lexical_scale
            s += cfg.lexical_weight * lex
        if cfg.date_weight:
            s += cfg.date_weight * (p in days)
        if cfg.month_weight:
            s += cfg.month_weight * (p in months and not (cfg.date_weight > 0 and p in days))
        if cfg.echo_weight:
            user = set(part._user_ids[part._user_starts[p] : part._user_starts[p + 1]].tolist())
            qids = {part.lexical._vocab[t] for t in qtok if t in part.lexical._vocab}
            echo = len(user & qids) / max(len(user), len(qtok)) if user and qtok else 0.0
            s -= cfg.echo_weight * float(echo_penalty(np.array(echo), cfg.echo_floor))
        if cfg.unanswered_weight:
            s -= cfg.unanswered_weight * bool(part._unanswered[p])
        base[p] = s
    scores = dict(base)
    if cfg.day_weight > 0:
        by_day: dict[str, list[float]] = collections.defaultdict(list)
        for p in scored:
            by_day[part.dates[p]].append(base[p])
        evidence = {d: float(np.mean(sorted(v, reverse=True)[: cfg.day_top])) for d, v in by_day.items()}
        scores = {p: base[p] + cfg.day_weight * evidence[part.dates[p]] for p in scored}
    final = {}
    for p in ranked:
        s = scores[p]
        prev, nxt = (int(x) for x in part._nbrs[p]) if neighbours else (-1, -1)
        if prev >= 0:
            s += cfg.prev_turn_weight * max(0.0, scores[prev] - scores[p])
        if nxt >= 0:
            s += cfg.next_turn_weight * max(0.0, scores[nxt] - scores[p])
        final[p] = s
    return sorted(final.items(), key=lambda x: (-x[1], x[0]))[:k]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryBank, Partition]:
    """A real bank on disk with 2,400 turns and daily summaries, searched through dense codes."""
    directory: Path = tmp_path_factory.mktemp("bank")
    encoder = HashingEncoder(64)
    bank = MemoryBank.open(directory, encoder_instance=encoder)
    rec = bank.user("big", create=True)
    mems = turn_memories("big", DialogGenerator(5).turns(2400, per_day=8))
    mems = [
        dataclasses.replace(m, kind=MemoryKind.DAILY_SUMMARY, turn=None, query=None, response=None)
        if i % 9 == 0
        else m
        for i, m in enumerate(mems)
    ]
    texts = [m.text for m in mems]
    bank.storage.add_memories(rec.id, mems, encoder.encode(texts), bank.encoder_name)
    part = bank._cache.get(rec.id)
    part.set_exact_limit(1000)
    assert part.approximate
    return bank, part


CONFIGS = {
    "default": RetrievalConfig(),
    "other weights": RetrievalConfig(
        lexical_weight=0.9,
        date_weight=1.5,
        month_weight=0.6,
        day_weight=0.4,
        day_top=9,
        prev_turn_weight=0.2,
        next_turn_weight=0.8,
        echo_weight=0.3,
        echo_floor=0.2,
        unanswered_weight=0.7,
        candidates=20,
    ),
    "no stages": RetrievalConfig(day_weight=0, prev_turn_weight=0, next_turn_weight=0, month_weight=0),
}


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("allowed", [None, frozenset({"turn"})])
def test_the_ranking_equals_its_definition(
    store: tuple[MemoryBank, Partition], name: str, allowed: frozenset[str] | None
) -> None:
    _, part = store
    cfg = CONFIGS[name]
    encoder = HashingEncoder(64)
    day = part.dates[len(part) // 2]
    queries = [
        *DialogGenerator(9).queries(12),
        f"What happened on {day}?",
        f"what did I do in {day[:7]}",
        "User: I adopted a cat\nAssistant: How lovely!\nUser: And her name?",
    ]
    y, m, d = (int(x) for x in day.split("-"))
    queries.append(f"and on {dt.date(y, m, d).strftime('%B')} {d}th, yesterday?")
    for text in queries:
        vec = encoder.encode([text])[0]
        got = rank(part, text, vec, 10, cfg, now=NOW, allowed_kinds=allowed)
        want = reference_rank(part, text, vec, 10, cfg, allowed)
        assert got.positions.tolist() == [p for p, _ in want], text
        assert got.scores.tolist() == pytest.approx([s for _, s in want], abs=1e-5), text
