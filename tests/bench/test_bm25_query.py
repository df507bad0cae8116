"""A BM25 query's answers (best memories, best score, scores of given memories) are exactly
what scoring every memory gives: same positions, same order, same float32 values.

The corpora are random mixes of English and Chinese sentences, repeated texts (exact ties),
empty texts and texts of unknown words, built through bulk adds (straight into the sparse
arrays), small adds (the tail of recent postings) and the merges between them, with queries
asked between the adds.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_bank.index import LexicalIndex
from memory_bank.text import tokenize
from memory_bank.topk import stable_top, top_positive

WORDS = [
    "museum", "museums", "painting", "hiking", "sister", "birthday", "jacket", "feel", "happy",
    "Vienna", "Bart", "2023", "coffee", "the", "a", "博物馆", "画展", "生日", "妹妹", "开心",
    "咖啡", "维也纳", "爬山", "今天",
]  # fmt: skip


def expected(index: LexicalIndex, tokens: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The definition: the ``k`` best of the full scan by a stable sort, without the zeros."""
    full = index.score_array(tokens)
    top = np.argsort(-full, kind="stable")[:k]
    top = top[full[top] > 0]
    return top, full[top]


def check(index: LexicalIndex, tokens: list[str], k: int, rng: np.random.Generator) -> None:
    full = index.score_array(tokens)
    q = index.query(tokens)
    pos, scores = q.top(k)
    want_pos, want_scores = expected(index, tokens, k)
    assert pos.tolist() == want_pos.tolist()
    assert scores.dtype == np.float32 and scores.tobytes() == want_scores.tobytes()  # bit for bit
    assert q.best() == (float(full.max()) if len(full) else 0.0)
    some = rng.integers(0, max(1, len(index)), size=min(len(index), 50))
    assert q.at(some).tobytes() == full[some].tobytes()
    assert q.top(1)[0].tolist() == want_pos[:1].tolist()  # a smaller k from the one asked


sentence = st.lists(st.sampled_from(WORDS), min_size=0, max_size=12).map(" ".join)


@settings(max_examples=40, deadline=None)
@given(
    corpus=st.lists(sentence, min_size=1, max_size=60),
    repeats=st.integers(0, 20),
    batches=st.lists(st.integers(1, 300), min_size=1, max_size=6),
    queries=st.lists(
        st.lists(st.sampled_from([*WORDS, "unknown", "没有"]), min_size=0, max_size=6), min_size=1, max_size=4
    ),
    k=st.sampled_from([1, 3, 64]),
    seed=st.integers(0, 2**16),
)
def test_a_query_answers_what_the_full_scan_gives(
    corpus: list[str], repeats: int, batches: list[int], queries: list[list[str]], k: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    texts = corpus + corpus[:1] * repeats + ["", "xyzzy plugh"]  # exact ties, empty, unknown
    texts = [texts[i] for i in rng.permutation(len(texts))] * 12
    index = LexicalIndex()
    start = 0
    for size in batches * 4:
        if start >= len(texts):
            break
        index.add(texts[start : start + size])  # >= 256 at once: bulk, else the tail (merged now and then)
        start += size
        for words in queries:
            check(index, tokenize(" ".join(words)), k, rng)
    index.add(texts[start:])
    index.add(texts[:40])  # small adds after everything: a tail over merged parts
    for words in queries:
        check(index, tokenize(" ".join(words)), k, rng)


def test_an_empty_index_and_an_empty_query_answer_nothing() -> None:
    index = LexicalIndex()
    assert index.query(["museum"]).top(5)[0].tolist() == [] and index.query(["museum"]).best() == 0.0
    index.add(["the museum", "画展"])
    q = index.query([])
    assert q.top(5)[0].tolist() == [] and q.best() == 0.0 and q.at(np.array([0, 1])).tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    "n, k, positive", [(100_000, 64, 30), (100_000, 64, 60_000), (50, 64, 50), (1000, 1, 0)]
)
def test_top_positive_is_stable_top_without_the_zeros(n: int, k: int, positive: int) -> None:
    rng = np.random.default_rng(n + k + positive)
    scores = np.zeros(n, dtype=np.float32)
    at = rng.choice(n, positive, replace=False)
    scores[at] = rng.integers(1, 9, positive).astype(np.float32) / 4  # many ties
    pos, vals = top_positive(scores, k)
    want = stable_top(scores, k)
    want = want[scores[want] > 0]
    assert pos.tolist() == want.tolist() and vals.tobytes() == scores[want].tobytes()


@pytest.mark.parametrize("compiled", [True, False])
def test_any_k_is_answered_and_the_best_score_never_depends_on_what_was_asked_first(compiled: bool) -> None:
    index = LexicalIndex()
    index.compiled = compiled and index.compiled
    index.add(["the museum", "museum museum", "画展", "the park"])
    q = index.query(["museum"])
    assert q.top(0)[0].tolist() == []  # asked for nothing first
    assert q.best() == float(index.score_array(["museum"]).max()) > 0
    assert index.query(["museum"]).top(10**12)[0].tolist() == [1, 0]  # more than there are
    assert index.query(["museum"]).top(-3)[0].tolist() == []
    assert index.score_top(["museum"], 10**12)[1].tolist() == [1, 0]
