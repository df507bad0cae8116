"""The ranking pipeline, step by step, against the definitions of its terms and stages.

Each step is checked on a hand-built partition with the numbers its definition gives (see
:mod:`memory_bank.retrieval`); the composed pipeline is checked the same way, then for its
wiring (weights of 0 build nothing, a term can be swapped, the fusion is pluggable, configs
changed in place take effect) on a generated partition large enough for the fast paths. That the
bank's rankings stayed bit-identical through the move to a pipeline was checked on the paper's
questions and LoCoMo dev when it was made (see the commit that added this file).
"""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from memory_bank.bench.data import DialogGenerator
from memory_bank.bench.systems import turn_memories
from memory_bank.config import RetrievalConfig
from memory_bank.embeddings import HashingEncoder
from memory_bank.index import Partition
from memory_bank.records import index_text
from memory_bank.retrieval import (
    Candidates,
    CandidateStep,
    Context,
    DayEvidence,
    Dense,
    Lexical,
    NamedDay,
    NamedMonth,
    NeighbourLift,
    Pipeline,
    Query,
    rank,
)
from memory_bank.retrieval.candidates import dense_top, lexical_top, named_days
from memory_bank.stores import VectorBatch

E = np.eye(4, dtype=np.float32)
# text, kind, date, turn, vector
ROWS = [
    ("museum trip", "turn", "2023-05-01", 0, E[0]),
    ("museum", "turn", "2023-05-01", 1, E[1]),
    ("cooking dinner", "turn", "2023-05-01", 2, np.array([0.6, 0.8, 0, 0], dtype=np.float32)),
    ("summary notes", "daily_summary", "2023-05-01", None, E[3]),
    ("garden roses", "turn", "2023-06-10", 0, E[2]),
    ("garden tulips", "turn", "2023-06-10", 1, E[3]),
    ("roses bloom", "turn", "2023-06-20", 0, E[2]),
]
ALL = np.arange(len(ROWS))
# BM25 of a one-token query in a document holding it once: idf * (K1 + 1) / (1 + K1 * (1 - B + B * len / avgdl)),
# K1 = 1.2, B = 0.75; every document has 2 tokens but "museum" (1): avgdl = 13 / 7.
_NORM = [1 + 1.2 * (0.25 + 0.75 * length * 7 / 13) for length in (2, 1)]
MUSEUM_0 = _NORM[1] / _NORM[0]  # "museum trip" relative to the best match, "museum"


@pytest.fixture
def part() -> Partition:
    p = Partition(4)
    p.add(
        VectorBatch(
            np.arange(1, len(ROWS) + 1),
            np.stack([r[4] for r in ROWS]),
            [r[0] for r in ROWS],
            [r[1] for r in ROWS],
            [r[2] for r in ROWS],
            [r[3] for r in ROWS],
        )
    )
    return p


def ctx(part: Partition, text: str, vector: np.ndarray = E[1], **kw: object) -> Context:
    return Context(part, Query.parse(part, text, vector, **kw))  # type: ignore[arg-type]


def test_query_is_parsed_against_the_memories_years(part: Partition) -> None:
    q = Query.parse(part, "What did I cook on May 1st, yesterday and in June?", E[0], now=dt.date(2023, 6, 21))
    assert q.tokens == ["cook", "1", "st", "yesterday", "june"]  # "may" is a stop word; digits split from letters
    assert q.days == {"2023-05-01", "2023-06-20"} and q.months == {"2023-06"}
    assert q.years == (2023,) and q.vector.dtype == np.float32


def test_dense_is_the_cosine(part: Partition) -> None:
    assert Dense(1.0).score(ctx(part, "x"), ALL).tolist() == pytest.approx([0, 1, 0.8, 0, 0, 0, 0], abs=1e-7)


def test_lexical_is_bm25_over_the_best_bm25(part: Partition) -> None:
    got = Lexical(1.0).score(ctx(part, "the museum"), ALL)
    assert got.dtype == np.float32
    assert got.tolist() == pytest.approx([MUSEUM_0, 1, 0, 0, 0, 0, 0], rel=1e-6)
    assert Lexical(1.0).score(ctx(part, "volcano"), ALL).tolist() == [0.0] * len(ROWS)


def test_named_day_and_month_give_one_date_hint(part: Partition) -> None:
    c = ctx(part, "On June 10th, and in June?")
    assert NamedDay(0.5).score(c, ALL).tolist() == [0, 0, 0, 0, 1, 1, 0]
    assert NamedMonth(0.3).score(c, ALL).tolist() == [0, 0, 0, 0, 0, 0, 1]  # June 10th has its day hint
    assert NamedMonth(0.3, yield_to_days=False).score(c, ALL).tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert NamedDay(0.5).score(ctx(part, "what now?"), ALL).tolist() == [0.0] * len(ROWS)


def test_candidates(part: Partition) -> None:
    # The nearest vector (turn 2) and the turn before it; scored also holds that turn's predecessor.
    near_2 = np.array([0.6, 0.8, 0, 0], dtype=np.float32)
    c = CandidateStep((dense_top,), size=1)(ctx(part, "x", near_2), 1)
    assert c is not None
    assert (c.ranked.tolist(), c.scored.tolist()) == ([1, 2], [0, 1, 2])
    assert (c.prev.tolist(), c.next.tolist()) == ([0, 1], [2, -1])
    # All three sources, turns only: dense 2, lexical 1 ("museum" is the shorter match), June 10th 4 and 5.
    step = CandidateStep((dense_top, lexical_top, named_days), size=1, neighbours=False)
    turns = ctx(part, "museum on June 10th", near_2, allowed_kinds=frozenset({"turn"}))
    c = step(turns, 1)
    assert c is not None and c.ranked.tolist() == c.scored.tolist() == [1, 2, 4, 5]
    assert (c.prev.tolist(), c.next.tolist()) == ([-1] * 4, [-1] * 4)
    c = CandidateStep((dense_top, lexical_top, named_days), size=1)(turns, 1)
    assert c is not None and c.ranked.tolist() == c.scored.tolist() == [0, 1, 2, 4, 5]
    # Summaries only: no turn is a candidate, and a summary has no neighbours.
    summaries = ctx(part, "x", allowed_kinds=frozenset({"daily_summary"}))
    c = CandidateStep((dense_top,), size=len(ROWS))(summaries, 1)
    assert c is not None and c.ranked.tolist() == c.scored.tolist() == [3]
    assert CandidateStep((dense_top,), size=2)(summaries, 1) is None  # its two nearest are turns


def test_day_evidence_adds_the_mean_of_the_days_best(part: Partition) -> None:
    scores = np.array([0.9, 0.5, 0.4, 0.1, 0.2, 0.6, 0.3])
    c = Candidates(ALL, ALL, np.full(7, -1), np.full(7, -1))
    got = DayEvidence(0.5, top=3).apply(ctx(part, "x"), c, scores)
    evidence = [0.6] * 4 + [0.4, 0.4, 0.3]  # (0.9 + 0.5 + 0.4) / 3; (0.2 + 0.6) / 2; 0.3
    assert got.tolist() == pytest.approx((scores + 0.5 * np.array(evidence)).tolist(), abs=1e-15)


def test_neighbour_lift_moves_a_turn_towards_better_neighbours(part: Partition) -> None:
    c = Candidates(np.arange(3), np.arange(3), np.array([-1, 0, 1]), np.array([1, 2, -1]))
    got = NeighbourLift(0.6, 0.45).apply(ctx(part, "x"), c, np.array([0.2, 0.8, 0.5]))
    assert got.tolist() == pytest.approx([0.2 + 0.45 * 0.6, 0.8, 0.5 + 0.6 * 0.3], abs=1e-15)
    # Only candidates are lifted: the scored neighbours keep their scores.
    c = Candidates(np.array([1]), np.arange(3), np.array([0]), np.array([2]))
    got = NeighbourLift(0.6, 0.45).apply(ctx(part, "x"), c, np.array([0.9, 0.1, 0.3]))
    assert got.tolist() == pytest.approx([0.9, 0.1 + 0.6 * 0.8 + 0.45 * 0.2, 0.3], abs=1e-15)


def test_the_bank_pipeline_composes_the_steps(part: Partition) -> None:
    """The default config on "museum" with the query vector e1, by hand: base = dense + 0.4 *
    lexical; + 0.15 * the day's evidence; then the neighbour lift (0.6 back, 0.45 forward)."""
    base = [0.4 * MUSEUM_0, 1.0 + 0.4, 0.8, 0, 0, 0, 0]
    day = (base[1] + base[2] + base[0]) / 3  # May 1st's three best; the other days score 0
    b = [s + 0.15 * day for s in base[:4]] + base[4:]
    expected = {
        1: b[1],  # both neighbours score lower
        2: b[2] + 0.6 * (b[1] - b[2]),  # after the best turn
        0: b[0] + 0.45 * (b[1] - b[0]),  # before it
        3: b[3],  # the summary: no neighbours
    }
    got = rank(part, "museum", E[1], 4, RetrievalConfig())
    assert got.positions.tolist() == [1, 2, 0, 3]
    assert got.scores.dtype == np.float32
    assert got.scores.tolist() == pytest.approx([expected[p] for p in (1, 2, 0, 3)], rel=1e-6)
    assert rank(part, "museum", E[1], 0, RetrievalConfig()).positions.tolist() == []
    assert rank(Partition(4), "museum", E[1], 3, RetrievalConfig()).positions.tolist() == []


def test_weights_of_zero_build_nothing() -> None:
    off = RetrievalConfig(
        dense_weight=0,
        lexical_weight=0,
        date_weight=0,
        month_weight=0,
        day_weight=0,
        prev_turn_weight=0,
        next_turn_weight=0,
        echo_weight=0,
        unanswered_weight=0,
    )
    p = Pipeline.from_config(off)
    assert (p.terms, p.stages, p.candidates.sources, p.candidates.neighbours) == ((), (), (dense_top,), False)
    p = Pipeline.from_config(RetrievalConfig(date_weight=0))
    assert [t.name for t in p.terms] == ["dense", "lexical", "named_month", "echo", "unanswered"]
    assert p.terms[2] == NamedMonth(0.3, yield_to_days=False)  # no day hint to yield to
    assert named_days not in p.candidates.sources


def test_terms_can_be_swapped_added_and_fused_otherwise(part: Partition) -> None:
    bank = Pipeline.from_config(RetrievalConfig(day_weight=0, prev_turn_weight=0, next_turn_weight=0))
    query = Query.parse(part, "museum", E[1])
    swapped = bank.with_term(Dense(2.0))
    assert [t.name for t in swapped.terms] == [t.name for t in bank.terms] and swapped.terms[0] == Dense(2.0)
    assert swapped.rank(part, query, 2).scores.tolist() == pytest.approx([2.4, 1.6])  # 2 * cos + 0.4 * lexical
    added = bank.with_term(NamedDay(5.0, name="june"))
    assert added.terms[-1].name == "june" and len(added.terms) == len(bank.terms) + 1

    def lexical_only(c: Context, terms: object, positions: np.ndarray) -> np.ndarray:
        return Lexical(1.0).score(c, positions)

    fused = Pipeline(bank.candidates, bank.terms, fusion=lexical_only).rank(part, query, 3)
    assert fused.positions.tolist() == [1, 0, 2]
    assert fused.scores.tolist() == pytest.approx([1.0, MUSEUM_0, 0.0], rel=1e-6)


def _generated(n: int, encoder: HashingEncoder) -> Partition:
    mems = turn_memories("u", DialogGenerator(11).turns(n, per_day=9))
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


def test_rank_on_a_large_partition_follows_its_config() -> None:
    encoder = HashingEncoder(64)
    part = _generated(2500, encoder)
    cfg = RetrievalConfig()
    now = dt.date(2023, 9, 1)
    queries = [*DialogGenerator(12).queries(10), "What did I do on January 5th?", "trip in January 2023"]
    for q in queries:
        qvec = encoder.encode([q])[0]
        top = rank(part, q, qvec, 40, cfg, now=now, allowed_kinds=frozenset({"turn"}))
        assert all(part.kinds[p] == "turn" for p in top.positions) and len(set(top.positions.tolist())) == 40
        assert np.all(np.diff(top.scores) <= 0)
        short = rank(part, q, qvec, 5, cfg, now=now, allowed_kinds=frozenset({"turn"}))
        assert short.positions.tolist() == top.positions[:5].tolist()  # the top 5 is the top 40's head
    # A config changed in place ranks with its new weights (pipelines are cached by value).
    q = queries[-2]
    qvec = encoder.encode([q])[0]
    before = rank(part, q, qvec, 5, cfg, now=now)
    cfg.date_weight = 5.0
    after = rank(part, q, qvec, 5, cfg, now=now)
    assert all(part.dates[p] == "2023-01-05" for p in after.positions) != all(
        part.dates[p] == "2023-01-05" for p in before.positions
    )
    direct = Pipeline.from_config(cfg).rank(part, Query.parse(part, q, qvec, now=now), 5)
    assert after.positions.tolist() == direct.positions.tolist()
    assert after.scores.tobytes() == direct.scores.tobytes()
    assert math.isfinite(float(after.scores[0]))
