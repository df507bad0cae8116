"""The compiled per-candidate steps of a ranking (``echo_share``, ``day_evidence``,
``neighbour_lift`` in ``memory_bank/_native.c``) give their NumPy paths' numbers bit for bit, on
random candidates full of ties, days with fewer memories than the top, positions without user
words and unknown query tokens; a whole search ranks the same with and without them; and each
refuses arrays it cannot read safely instead of reading past them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_bank import native
from memory_bank.index import echo_share, numpy_echo_share
from memory_bank.retrieval import stages
from memory_bank.retrieval.candidates import Candidates
from memory_bank.retrieval.stages import NeighbourLift, numpy_day_evidence

needs_kernels = pytest.mark.skipif(
    native.echo_share is None or native.day_evidence is None or native.neighbour_lift is None,
    reason="the compiled kernels are not built (no C compiler)",
)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype == np.float64 and a.tobytes() == b.tobytes()


@needs_kernels
@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 12), min_size=1, max_size=60),
    query=st.lists(st.integers(-3, 40), max_size=12, unique=True),
    seed=st.integers(0, 2**16),
)
def test_the_compiled_echo_is_the_numpy_one(sizes: list[int], query: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    ids = np.concatenate([rng.choice(40, s, replace=False) for s in sizes] or [[]]).astype(np.int32)
    positions = rng.integers(0, len(sizes), rng.integers(0, 3 * len(sizes) + 1)).astype(np.int64)
    q = np.asarray(sorted(query), dtype=np.int32)
    got = echo_share(starts, ids, positions, q)
    want = numpy_echo_share(starts, ids, positions, q)
    assert same_bits(got, want)
    assert ((got >= 0) & (got <= 1)).all()


@needs_kernels
@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 300),
    days=st.integers(1, 40),
    levels=st.integers(1, 6),
    top=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_the_compiled_day_evidence_is_the_numpy_one(
    n: int, days: int, levels: int, top: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    day = rng.integers(0, days, n).astype(np.int32)
    scores = rng.integers(-levels, levels + 1, n) / 3.0 + rng.random(n) * (rng.random(n) < 0.5)  # ties
    scores[rng.random(n) < 0.1] = -0.0
    out = np.empty(n, dtype=np.float64)
    native.day_evidence(day, scores, top, out)
    assert same_bits(out, numpy_day_evidence(day, scores, top))


def test_day_evidence_with_a_nan_takes_the_numpy_path() -> None:
    class Part:
        def day_ids(self, positions: np.ndarray) -> np.ndarray:
            return np.zeros(len(positions), dtype=np.int32)

    scores = np.array([0.5, np.nan, 0.25])
    got = stages.day_evidence(Part(), np.arange(3), scores, 2)  # type: ignore[arg-type]
    assert got.shape == (3,)  # the kernel refuses NaN; the search still gets its numbers


@needs_kernels
@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 200), seed=st.integers(0, 2**16), wp=st.floats(0, 1), wn=st.floats(0, 1))
def test_the_compiled_neighbour_lift_is_the_numpy_one(n: int, seed: int, wp: float, wn: float) -> None:
    rng = np.random.default_rng(seed)
    scored = np.unique(rng.integers(0, 4 * n, n)).astype(np.int64)
    ranked = np.unique(rng.choice(scored, rng.integers(1, len(scored) + 1)))
    pairs = rng.choice(scored, (len(ranked), 2))
    pairs[rng.random(pairs.shape) < 0.3] = -1  # no turn before / after
    cands = Candidates(ranked, scored, pairs[:, 0], pairs[:, 1])  # column views: not contiguous
    scores = rng.integers(0, 5, len(scored)) / 4.0  # ties
    lift = NeighbourLift(wp, wn)
    got = lift.apply(None, cands, scores)  # type: ignore[arg-type]
    assert same_bits(got, lift.numpy_apply(cands, scores))
    assert (got >= scores).all()


@needs_kernels
def test_the_kernels_refuse_what_they_cannot_read_safely() -> None:
    starts = np.array([0, 2, 3], dtype=np.int64)
    ids = np.array([1, 2, 3], dtype=np.int32)
    out = np.empty(1, dtype=np.float64)
    q = np.array([1], dtype=np.int32)
    with pytest.raises(IndexError, match="position"):  # past the last memory
        native.echo_share(starts, ids, np.array([2], dtype=np.int64), q, out)
    with pytest.raises(IndexError):  # row pointers past the ids
        native.echo_share(np.array([0, 9], dtype=np.int64), ids, np.array([0], dtype=np.int64), q, out)
    with pytest.raises(TypeError, match="user_ids"):
        native.echo_share(starts, ids.astype(np.int64), np.array([0], dtype=np.int64), q, out)
    with pytest.raises(ValueError, match="NaN"):
        native.day_evidence(np.zeros(2, dtype=np.int32), np.array([1.0, np.nan]), 3, np.empty(2))
    with pytest.raises(ValueError, match="one length"):
        native.day_evidence(np.zeros(2, dtype=np.int32), np.zeros(3), 3, np.empty(2))
    scored = np.array([1, 5, 9], dtype=np.int64)
    one = np.array([0], dtype=np.int64)
    with pytest.raises(ValueError, match="not scored"):  # a neighbour outside the scored
        native.neighbour_lift(
            scored, one, np.array([4], dtype=np.int64), -one - 1, np.zeros(3), 0.5, 0.5, np.empty(3)
        )
    with pytest.raises(IndexError, match="outside"):
        native.neighbour_lift(scored, one + 7, -one - 1, -one - 1, np.zeros(3), 0.5, 0.5, np.empty(3))


def test_a_search_ranks_the_same_with_and_without_the_kernels(
    bank: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = dt.date(2023, 4, 1)
    for i in range(60):  # questions asked again and their follow-ups: echo, days and neighbours at work
        at = dt.datetime.combine(first + dt.timedelta(days=i // 6), dt.time(9, i % 6))
        if i % 4 == 0:
            bank.add_turn("ann", f"Did I tell you about the museum trip number {i}?", "No, tell me!", at=at)
        else:
            bank.add_turn(
                "ann", f"I went hiking with Bo on trip {i}, 我们去了博物馆", f"How was trip {i}?", at=at
            )
    queries = ["Did I tell you about the museum?", "hiking with Bo", "我们去了博物馆", "trip 7 on April 2nd"]

    def ranked() -> list[list[tuple[int | None, float]]]:
        return [[(r.memory.rowid, r.score) for r in bank.search("ann", q, k=8)] for q in queries]

    with_kernels = ranked()
    for name in ("echo_share", "day_evidence", "neighbour_lift"):
        monkeypatch.setattr(native, name, None)
    assert ranked() == with_kernels and all(with_kernels)


@needs_kernels
def test_the_kernels_hold_at_the_edges_of_their_inputs() -> None:
    # A position at the top of int64 is refused, not wrapped round into a read before the buffer.
    big = np.array([0, 2, 5], dtype=np.int64)
    with pytest.raises(IndexError):
        native.echo_share(
            big[1:], np.array([7, 7], dtype=np.int32), np.array([2**63 - 1], dtype=np.int64),
            np.array([7], dtype=np.int32), np.empty(1),
        )  # fmt: skip
    # NaN and infinite scores lift as NumPy's maximum lifts them (a NaN stays NaN).
    cands = Candidates(np.array([1]), np.array([1, 2]), np.array([-1]), np.array([2]))
    lift = NeighbourLift(0.0, 0.5)
    for scores in ([0.5, np.nan], [-np.inf, -np.inf], [np.inf, np.inf], [np.nan, 1.0]):
        got = lift.apply(None, cands, np.array(scores))  # type: ignore[arg-type]
        with np.errstate(invalid="ignore"):  # inf - inf
            want = lift.numpy_apply(cands, np.array(scores))
        assert got.tobytes() == want.tobytes(), scores
    # A day's evidence of no memories is refused with a reason, compiled or not.
    with pytest.raises(ValueError, match="at least 1"):
        native.day_evidence(np.zeros(2, dtype=np.int32), np.ones(2), 0, np.empty(2))

    class Part:
        def day_ids(self, positions: np.ndarray) -> np.ndarray:
            return np.zeros(len(positions), dtype=np.int32)

    with pytest.raises(ValueError, match="at least 1"):
        stages.day_evidence(Part(), np.arange(2), np.ones(2), 0)  # type: ignore[arg-type]
