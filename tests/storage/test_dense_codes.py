"""Approximate dense search through product-quantised codes (memory_bank.dense_codes): the codes
find what exact search finds, appending equals encoding in bulk, and a restart reads the trained
codebook and codes from the lexical snapshot instead of training again, so it searches exactly
as before it."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import numpy as np
import pytest

import memory_bank.index as index_module
from memory_bank import MemoryBank
from memory_bank.bench.data import DialogGenerator, synth_vectors
from memory_bank.bench.systems import turn_memories
from memory_bank.dense_codes import MIN_TRAIN, DenseCodes, code_size
from memory_bank.index import Partition
from memory_bank.lexical_snapshot import LexicalSnapshot
from memory_bank.retrieval import rank
from memory_bank.stores import VectorBatch
from memory_bank.text import TOKENIZER_VERSION

DIM = 64
N = 1600  # above dense_codes.MIN_TRAIN, so a lowered exact limit makes the partition approximate


def _pool(dim: int, seed: int = 1) -> np.ndarray:
    pool = np.random.default_rng(seed).standard_normal((64, dim)).astype(np.float32)
    return pool / np.linalg.norm(pool, axis=1, keepdims=True)


def _batch(vecs: np.ndarray, start: int = 1) -> VectorBatch:
    n = len(vecs)
    return VectorBatch(
        np.arange(start, start + n), vecs, [f"memory {i}" for i in range(n)], ["turn"] * n,
        [f"2023-05-{1 + i % 28:02d}" for i in range(n)], list(range(n)), None, None,
    )  # fmt: skip


@pytest.mark.parametrize("dim", [30, 64, 384])
def test_codes_find_the_exact_nearest_and_appending_equals_encoding_in_bulk(dim: int) -> None:
    vecs = synth_vectors(_pool(dim), 3000, seed=2)
    bulk = DenseCodes.train(vecs)
    assert bulk.codes.shape == (3000, code_size(dim))
    grown = DenseCodes(dim, bulk.codebook, bulk.codes[:2000])
    grown.add(vecs[2000:2001])  # one at a time, as turns come
    grown.add(vecs[2001:2100])
    grown.add(vecs[2100:])  # many at once: repacked from the codes
    assert np.array_equal(grown.codes, bulk.codes)
    hits = 0
    for q in synth_vectors(_pool(dim), 3030, seed=5)[3000:]:
        found = bulk.search(q, 200)
        assert np.array_equal(found, grown.search(q, 200))
        exact = np.argsort(-(vecs @ q), kind="stable")[:20]
        hits += len(set(found.tolist()) & set(exact.tolist()))
    assert hits / (20 * 30) > 0.95  # the exact top 20 is among the 200 best estimates


def test_codes_refuse_a_codebook_of_another_dimension_and_too_few_vectors() -> None:
    codes = DenseCodes.train(synth_vectors(_pool(DIM), MIN_TRAIN, seed=3))
    with pytest.raises(ValueError, match="do not fit 32 dimensions"):
        DenseCodes(32, codes.codebook, codes.codes)
    with pytest.raises(ValueError, match=f"at least {MIN_TRAIN} vectors"):
        DenseCodes.train(np.ones((10, DIM), dtype=np.float32))


def test_an_approximate_partition_ranks_near_exact_and_keeps_the_caller_arrays() -> None:
    vecs = synth_vectors(_pool(DIM), N, seed=4)
    part = Partition(DIM)
    part.exact_limit = 1000
    part.add(_batch(vecs))
    assert part.approximate and part.codes_trained
    before = vecs.copy()
    part.add(_batch(synth_vectors(_pool(DIM), 10, seed=6), start=N + 1))
    assert np.array_equal(vecs, before)
    snap = part.lexical_snapshot()
    assert snap.dense_codes is not None and len(snap.dense_codes) == N + 10
    part.set_exact_limit(N + 10)  # exact, then back: the codes are kept, nothing is trained
    assert not part.approximate and part.dense_codes is None
    part.codes_trained = False
    part.set_exact_limit(1000)
    assert part.approximate and not part.codes_trained
    assert np.array_equal(part.lexical_snapshot().dense_codes, snap.dense_codes)


def _fill(bank: MemoryBank) -> None:
    rec = bank.user("Ann", create=True)
    turns = DialogGenerator(3).turns(N, per_day=10)
    mems = turn_memories("Ann", turns)
    vecs = bank.encoder.encode([m.text for m in mems])
    bank.storage.add_memories(rec.id, mems, vecs, bank.encoder_name)


QUERIES = ["Where did my sister go hiking?", "How was the concert?", "我的猫叫什么名字？", "What did I cook?"]


def _ranks(bank: MemoryBank) -> list[tuple[list[int], list[float]]]:
    part = bank._cache.get(bank.user("Ann").id)
    assert part.approximate
    out = []
    for q in QUERIES:
        r = rank(part, q, bank.encoder.encode([q])[0], 8, bank.config.retrieval, now=dt.date(2024, 1, 1))
        out.append((part.rowids[r.positions].tolist(), r.scores.tolist()))
    return out


def _stored(bank: MemoryBank) -> LexicalSnapshot | None:
    data = bank.storage.lexical_snapshot(bank.user("Ann").id, bank.encoder_name, TOKENIZER_VERSION)
    return None if data is None else LexicalSnapshot.from_bytes(data)


@pytest.fixture
def _small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "EXACT_SEARCH_LIMIT", 1000)


@pytest.mark.usefixtures("_small_limit")
def test_a_restart_reads_the_codes_and_searches_exactly_as_before(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    first = make_bank()
    _fill(first)
    expected = _ranks(first)  # trained at the first load, then stored with the snapshot
    snap = _stored(first)
    assert snap is not None and snap.dense_codes is not None and len(snap.dense_codes) == N

    def no_training(*_: Any) -> None:
        raise AssertionError("a restart trained the dense codes again")

    monkeypatch.setattr(DenseCodes, "train", no_training)
    restarted = make_bank()
    assert _ranks(restarted) == expected
    assert not restarted._cache.get(restarted.user("Ann").id).codes_trained


@pytest.mark.usefixtures("_small_limit")
def test_a_snapshot_without_codes_trains_them_once_and_stores_them(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    uid = bank.user("Ann").id
    expected = _ranks(bank)
    old = _stored(bank)
    assert old is not None
    older = dataclasses.replace(old, dense_codebook=None, dense_codes=None)  # as a round-5 store has it
    part = bank._cache.get(uid)
    assert bank.storage.put_lexical_snapshot(uid, bank.encoder_name, TOKENIZER_VERSION, part.epoch, older.to_bytes())
    restarted = make_bank()
    assert _ranks(restarted) == expected  # trained again, to the same codebook (deterministic)
    assert restarted._cache.get(uid).codes_trained
    again = _stored(restarted)
    assert again is not None and again.dense_codes is not None


@pytest.mark.usefixtures("_small_limit")
def test_re_embedding_deletes_the_stored_codes(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    _ranks(bank)
    assert _stored(bank) is not None
    part = bank._cache.get(bank.user("Ann").id)
    rowid = int(part.rowids[0])
    bank.storage.put_vectors([rowid], -part.vectors_at(np.array([0])), bank.encoder_name)
    assert _stored(bank) is None  # its codes were the old vectors'


def test_snapshot_dense_codes_round_trip_restrict_and_refuse_a_misfit() -> None:
    vecs = synth_vectors(_pool(DIM), N, seed=7)
    part = Partition(DIM)
    part.exact_limit = 1000
    part.add(_batch(vecs))
    snap = LexicalSnapshot.from_bytes(part.lexical_snapshot().to_bytes())
    assert snap.dense_codes is not None and snap.dense_codebook is not None
    assert np.array_equal(snap.dense_codes, part.lexical_snapshot().dense_codes)
    kept = snap.restricted(snap.rowids[::3])
    assert kept is not None and kept.dense_codes is not None
    assert np.array_equal(kept.dense_codes, snap.dense_codes[::3])
    bad = dataclasses.replace(snap, dense_codes=snap.dense_codes[:-1])
    with pytest.raises(ValueError, match="dense codes do not fit"):
        LexicalSnapshot.from_bytes(bad.to_bytes())


def test_a_query_the_codes_cannot_tell_apart_is_answered_as_exact_search_does() -> None:
    """A zero query vector (nothing to compare) scores every code alike and FAISS's fast scan
    returns nothing; the partition then answers as exact search would, not with no memories."""
    vecs = synth_vectors(_pool(DIM), N, seed=8)
    part = Partition(DIM)
    part.exact_limit = 1000
    part.add(_batch(vecs))
    assert part.approximate
    zero = np.zeros(DIM, dtype=np.float32)
    pos, scores = part.dense_top(zero, 10)
    part.set_exact_limit(N)
    exact_pos, exact_scores = part.dense_top(zero, 10)
    assert len(pos) == 10 and pos.tolist() == exact_pos.tolist() and scores.tolist() == exact_scores.tolist()
