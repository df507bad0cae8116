"""The compiled kernels (``memory_bank/_native.c``) give their NumPy paths' results bit for
bit: BM25's posting scan on random mixed-language corpora built through bulk adds, small adds
(the tail of recent postings) and merges, and the top-k of positive scores on random scores
full of ties, zeros and negatives; and both refuse arrays they cannot read safely."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_bank import index as index_module
from memory_bank import native
from memory_bank.index import LexicalIndex
from memory_bank.text import tokenize
from memory_bank.topk import numpy_top_positive, stable_top, top_positive

WORDS = [
    "museum", "painting", "hiking", "sister", "birthday", "jacket", "feel", "happy", "Vienna",
    "the", "a", "I", "went", "2023", "博物馆", "画展", "生日", "妹妹", "开心", "咖啡", "今天", "我",
]  # fmt: skip

scan = index_module._compiled_scan
needs_scan = pytest.mark.skipif(scan is None, reason="the compiled scan is not built (no C compiler)")


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_an_install_with_a_compiler_builds_the_compiled_scan() -> None:
    # `pip install -e .` (make install) builds it; without it every search takes the slower path.
    assert scan is not None and native.top_positive is not None
    assert LexicalIndex().compiled


def both(index: LexicalIndex, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The compiled and the NumPy scores of ``tokens``; their best 10 must agree too."""
    index.compiled = True
    fast, fast_at, fast_best = index.score_top(tokens, 10)
    index.compiled = False
    slow, slow_at, slow_best = index.score_top(tokens, 10)
    index.compiled = True
    assert fast_at.tolist() == slow_at.tolist() and fast_best.tobytes() == slow_best.tobytes()
    assert index.score_array(tokens).tobytes() == fast.tobytes()
    return fast, slow


sentence = st.lists(st.sampled_from(WORDS), min_size=0, max_size=14).map(" ".join)


@needs_scan
@settings(max_examples=40, deadline=None)
@given(
    corpus=st.lists(sentence, min_size=1, max_size=50),
    batches=st.lists(st.integers(1, 400), min_size=1, max_size=5),
    queries=st.lists(st.lists(st.sampled_from([*WORDS, "unknown"]), max_size=8), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_the_compiled_scan_gives_the_numpy_scores_bit_for_bit(
    corpus: list[str], batches: list[int], queries: list[list[str]], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    texts = [corpus[i] for i in rng.integers(0, len(corpus), size=len(corpus) * 15)] + [""]
    index = LexicalIndex()
    start = 0
    for size in batches * 3:
        if start >= len(texts):
            break
        index.add(texts[start : start + size])  # >= 256: straight into the arrays, else the tail
        start += size
        for words in queries:
            tokens = tokenize(" ".join(words)) + words[:1]  # a repeated token: query frequency 2
            fast, slow = both(index, tokens)
            assert fast.dtype == slow.dtype == np.float32
            assert fast.tobytes() == slow.tobytes()


@needs_scan
def test_a_large_index_scores_the_same_either_way() -> None:
    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 30)))) for _ in range(20_000)]
    index = LexicalIndex()
    index.add(texts)
    index.add(texts[:100])  # a tail beside the merged arrays
    for text in ("museum the", "妹妹 生日 I 妹妹", "Vienna"):
        fast, slow = both(index, tokenize(text))
        assert fast.tobytes() == slow.tobytes()
        assert fast.max() > 0


def run_scan(acc, lengths, runs, k=0, c0=0.5, c1=0.25):  # type: ignore[no-untyped-def]
    """The compiled scan with norms ``length * c1 + c0``: its top ``k`` positions and scores."""
    positions, best = np.empty(k, dtype=np.int64), np.empty(k, dtype=np.float32)
    count = scan(acc, lengths, c0, c1, runs, 2.2, positions, best)
    return positions[:count], best[:count]


@needs_scan
def test_the_scan_refuses_what_it_cannot_read_safely() -> None:
    acc = np.full(4, 7.0, dtype=np.float32)  # whatever it held: the scan sets every score
    lengths = np.full(4, 2.0, dtype=np.float32)  # norm 2 * 0.25 + 0.5 = 1
    tf = np.ones(2, dtype=np.float32)

    def one(acc, lengths, pos, tf, w=1.0):  # type: ignore[no-untyped-def]
        return run_scan(acc, lengths, [(pos, tf, w)], k=2)

    at, best = one(acc, lengths, np.array([0, 3], dtype=np.int32), tf)  # int32 positions are fine
    assert acc.tolist() == pytest.approx([1.1, 0.0, 0.0, 1.1]) and at.tolist() == [0, 3]
    assert best.tolist() == pytest.approx([1.1, 1.1])
    one(acc, lengths, np.array([1, 2], dtype=np.int64), np.ones(2, dtype=np.uint16))  # so are uint16 counts
    assert acc.tolist() == pytest.approx([0.0, 1.1, 1.1, 0.0])
    with pytest.raises(IndexError, match="past the 4 scored positions"):
        one(acc, lengths, np.array([1, 4], dtype=np.int64), tf)
    with pytest.raises(IndexError):
        one(acc, lengths, np.array([-1, 0], dtype=np.int64), tf)
    with pytest.raises(TypeError, match="acc"):
        one(acc.astype(np.float64), lengths, np.array([0, 1]), tf)
    with pytest.raises(TypeError, match="pos"):
        one(acc, lengths, np.array([0.0, 1.0]), tf)
    with pytest.raises(TypeError, match="tf"):
        one(acc, lengths, np.array([0, 1]), tf.astype(np.int16))
    with pytest.raises(ValueError, match="contiguous"):
        one(np.zeros(8, dtype=np.float32)[::2], lengths, np.array([0, 1]), tf)  # strided
    with pytest.raises(ValueError, match="must match"):
        one(acc, lengths[:3], np.array([0, 1]), tf)
    with pytest.raises(ValueError, match="must match"):
        one(acc.copy(), lengths, np.array([0, 1]), tf[:1].repeat(3))
    with pytest.raises(ValueError, match="must match"):
        scan(acc, lengths, 0.5, 0.25, [], 2.2, np.empty(2, dtype=np.int64), np.empty(3, dtype=np.float32))
    with pytest.raises(TypeError):
        run_scan(acc, lengths, [(np.array([0]), tf[:1])])  # a run without its weight
    frozen = np.zeros(4, dtype=np.float32)
    frozen.flags.writeable = False
    with pytest.raises((TypeError, ValueError, BufferError)):
        one(frozen, lengths, np.array([0, 1]), tf)
    shared = np.full(8, 2.0, dtype=np.float32)  # the scores would overwrite the lengths read
    with pytest.raises(ValueError, match="share memory"):
        one(shared[:4], shared[2:6], np.array([0, 1]), tf)
    with pytest.raises(ValueError, match="share memory"):
        one(shared[:4], shared[:4], np.array([0, 1]), tf)


@needs_scan
@pytest.mark.parametrize("k", [0, 1, 64, 5000])
def test_long_runs_of_every_array_kind_add_in_the_order_given(k: int) -> None:
    """Runs of int32 and int64 positions, float32 and uint16 counts, scanned four postings at a
    time and the rest one by one: each score gets its
    runs' parts in the order of the runs (float32 addition is not associative), the same bits
    as the NumPy path, and the best k are ``top_positive``'s; a bad position in a later run is
    refused and named."""
    rng = np.random.default_rng(5)
    n = 50_000
    lengths = rng.integers(1, 60, n).astype(np.float32)
    c0, c1 = float(np.float32(0.3)), float(np.float32(1.2 * 0.75 / 17.3))
    runs = []
    for density in (0.9, 0.01, 0.5, 0.0002, 0.3):
        pos = np.flatnonzero(rng.random(n) < density)
        tf = rng.integers(1, 9, len(pos))
        kind = np.uint16 if density != 0.5 else np.float32
        runs.append((pos.astype(np.int32 if density > 0.2 else np.int64), tf.astype(kind), float(rng.random())))
    acc = np.full(n, np.nan, dtype=np.float32)
    at, best = run_scan(acc, lengths, runs, k, c0, c1)
    norms = lengths * np.float32(c1)
    norms += np.float32(c0)
    want = np.zeros(n, dtype=np.float32)
    for pos, tf, w in runs:  # one run after another, as the NumPy path adds them
        part = tf.astype(np.float32) * w
        part *= 2.2
        denom = norms.take(pos)
        denom += tf.astype(np.float32)
        part /= denom
        np.add.at(want, pos, part)
    assert acc.tobytes() == want.tobytes()
    want_at, want_best = numpy_top_positive(want, k)
    assert at.tolist() == want_at.tolist() and best.tobytes() == want_best.tobytes()
    bad = (np.array([5, 10_000, n], dtype=np.int64), np.ones(3, dtype=np.float32), 1.0)
    with pytest.raises(IndexError, match="run 1"):
        run_scan(np.zeros(n, dtype=np.float32), lengths, [runs[0], bad])


@needs_scan
def test_the_postings_check_finds_each_fault() -> None:
    check = native.postings_misfit
    assert check is not None
    starts = np.array([0, 3, 5], dtype=np.int64)
    good = np.array([0, 2, 7, 1, 9], dtype=np.int32), np.array([1, 2, 1, 1, 3], dtype=np.uint16)
    assert check(starts, *good, 10) is None
    assert check(starts, good[0].astype(np.int64), good[1].astype(np.float32), 10) is None
    assert "does not hold" in check(starts, good[0], good[1], 9)
    assert "ascending" in check(starts, np.array([0, 2, 2, 1, 9], dtype=np.int32), good[1], 10)
    assert "ascending" in check(starts, np.array([0, 7, 2, 1, 9], dtype=np.int32), good[1], 10)
    assert "does not hold" in check(starts, np.array([0, 2, 7, -1, 9], dtype=np.int32), good[1], 10)
    assert "positive" in check(starts, good[0], np.array([1, 2, 0, 1, 3], dtype=np.uint16), 10)
    assert "positive" in check(starts, good[0], np.array([1, 2, np.nan, 1, 3], dtype=np.float32), 10)
    assert "fit" in check(np.array([0, 3, 6], dtype=np.int64), *good, 10)
    with pytest.raises(TypeError, match="starts"):
        check(starts.astype(np.int32), *good, 10)


needs_top = pytest.mark.skipif(native.top_positive is None, reason="the compiled kernels are not built")


@needs_top
@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(0, 3000),
    k=st.integers(0, 80),
    levels=st.integers(1, 12),
    positive=st.floats(0, 1),
    negative=st.floats(0, 0.3),
    seed=st.integers(0, 2**16),
)
def test_the_compiled_top_k_is_the_numpy_one(
    n: int, k: int, levels: int, positive: float, negative: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    scores = np.zeros(n, dtype=np.float32)
    kind = rng.random(n)
    pos = kind < positive
    scores[pos] = rng.integers(1, levels + 1, int(pos.sum())).astype(np.float32) / 7  # many ties
    neg = (kind >= positive) & (kind < positive + negative)
    scores[neg] = -rng.random(int(neg.sum()), dtype=np.float32)
    got_at, got = top_positive(scores, k)
    want_at, want = numpy_top_positive(scores, k)
    assert got_at.dtype == want_at.dtype == np.int64 and got.dtype == want.dtype == np.float32
    assert got_at.tolist() == want_at.tolist() and got.tobytes() == want.tobytes()
    order = stable_top(scores, k)
    assert got_at.tolist() == order[scores[order] > 0].tolist()  # best first, ties to the earlier


@needs_top
def test_the_compiled_top_k_skips_nan_and_negative_zero_and_handles_the_edges() -> None:
    scores = np.array([np.nan, -0.0, 0.5, np.inf, 0.5, -np.inf, 1e-38, 0.5], dtype=np.float32)
    at, vals = top_positive(scores, 10)
    assert at.tolist() == [3, 2, 4, 7, 6] and vals.tolist() == [np.inf, 0.5, 0.5, 0.5, pytest.approx(1e-38)]
    assert top_positive(scores, 2)[0].tolist() == [3, 2]
    assert top_positive(scores, 0)[0].tolist() == [] and top_positive(scores[:0], 3)[0].tolist() == []
    assert top_positive(np.zeros(5, dtype=np.float32), 3)[0].tolist() == []
    as64 = top_positive(scores.astype(np.float64), 3)  # not float32: the NumPy path, same order
    assert as64[0].tolist() == [3, 2, 4] and as64[1].dtype == np.float64


@needs_top
def test_the_compiled_top_k_refuses_what_it_cannot_read_safely() -> None:
    kernel = native.top_positive
    scores = np.array([1, 2, 3], dtype=np.float32)
    pos, out = np.empty(2, dtype=np.int64), np.empty(2, dtype=np.float32)
    assert kernel(scores, pos, out) == 2 and pos.tolist() == [2, 1] and out.tolist() == [3.0, 2.0]
    with pytest.raises(TypeError, match="scores"):
        kernel(scores.astype(np.float64), pos, out)
    with pytest.raises(TypeError, match="out_positions"):
        kernel(scores, pos.astype(np.int32), out)
    with pytest.raises(TypeError, match="out_scores"):
        kernel(scores, pos, out.astype(np.float64))
    with pytest.raises(ValueError, match="must match"):
        kernel(scores, pos, np.empty(3, dtype=np.float32))
    with pytest.raises(ValueError, match="contiguous"):
        kernel(np.zeros(8, dtype=np.float32)[::2], pos, out)
    frozen = np.empty(2, dtype=np.int64)
    frozen.flags.writeable = False
    with pytest.raises((TypeError, ValueError, BufferError)):
        kernel(scores, frozen, out)


@settings(max_examples=30, deadline=None)
@given(
    corpus=st.lists(sentence, min_size=1, max_size=40),
    batches=st.lists(st.integers(1, 700), min_size=1, max_size=6),
    seed=st.integers(0, 2**16),
)
def test_an_index_built_in_any_batches_equals_one_built_at_once(
    corpus: list[str], batches: list[int], seed: int
) -> None:
    """Tail adds, bulk adds (>= 256 documents: merged at once) and the merges the tail
    triggers give the postings a single bulk add gives: every token's run holds its
    positions ascending, with their counts, and the snapshot's arrays are the same."""
    rng = np.random.default_rng(seed)
    texts = [corpus[i] for i in rng.integers(0, len(corpus), size=sum(batches))]
    big = seed % 4 == 0
    if big:
        texts[0] = texts[0] + " museum" * 70_000  # a count past uint16
    built = LexicalIndex()
    start = 0
    for size in batches:
        built.add(texts[start : start + size])
        start += size
        if rng.random() < 0.3:
            built.arrays()  # a snapshot merges the tail
    whole = LexicalIndex()
    whole.add(texts + [""] * (LexicalIndex.BULK - min(len(texts), LexicalIndex.BULK)))
    got, want = built.arrays(), whole.arrays()
    assert got[0] == want[0]  # the same token ids, in first-seen order
    n = len(texts)
    for t in range(len(got[0])):
        a, b = slice(got[1][t], got[1][t + 1]), slice(want[1][t], want[1][t + 1])
        keep = want[2][b] < n  # the padding documents only in `whole`
        assert got[2][a].tolist() == want[2][b][keep].tolist()
        assert got[3][a].astype(np.float64).tolist() == want[3][b][keep].astype(np.float64).tolist()
    assert got[3].dtype == (np.float32 if big else np.uint16)  # counts as uint16 where they fit
    assert got[4].tolist() == want[4][:n].tolist()
