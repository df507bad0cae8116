"""Inverted lists over the dense codes (memory_bank.dense_lists): lists filled from stored codes
hold what FAISS's own add would put there, appending equals filling in bulk, a restart reads
the centroids and list numbers from the lexical snapshot and searches exactly as before it (both
backends), forgotten memories leave their lists, a partition grown past its lists learns new
ones, and a snapshot with damaged lists is never searched."""

from __future__ import annotations

import dataclasses
from typing import Any

import faiss
import numpy as np
import pytest

import memory_bank.dense_lists as lists_module
import memory_bank.index as index_module
from memory_bank import MemoryBank
from memory_bank.bench.data import synth_vectors
from memory_bank.dense_codes import DenseCodes
from memory_bank.dense_lists import DenseLists, assign, list_count, train_centroids
from memory_bank.index import Partition
from memory_bank.lexical_snapshot import LexicalSnapshot
from memory_bank.stores import VectorBatch
from memory_bank.text import TOKENIZER_VERSION
from tests.storage.test_dense_codes import N, _batch, _fill, _pool, _stored
from tests.storage.test_dense_codes import _ranks as _codes_ranks

DIM = 64  # N (1,600 memories) partitions search lists once the limits below are set


def _listed(limit: int = 1200) -> Partition:
    part = Partition(DIM)
    part.exact_limit = 1000
    part.list_limit = limit
    return part


def _members(lists: DenseLists) -> list[list[int]]:
    """The positions FAISS holds in each list, read from its inverted lists."""
    inv = lists._index.invlists
    assert inv is not None
    out = []
    for li in range(lists.nlist):
        size = inv.list_size(li)
        out.append(sorted(faiss.rev_swig_ptr(inv.get_ids(li), size).tolist()) if size else [])
    return out


def _expected_members(lists: DenseLists) -> list[list[int]]:
    numbers = lists.lists
    return [np.flatnonzero(numbers == li).tolist() for li in range(lists.nlist)]


@pytest.mark.parametrize("dim", [30, 64])
def test_lists_filled_from_codes_hold_what_faiss_would_add_and_appending_equals_bulk(dim: int) -> None:
    vecs = synth_vectors(_pool(dim), 3000, seed=2)
    codes = DenseCodes.train(vecs)
    pdim = codes.codebook.size // 16
    padded = np.pad(vecs, ((0, 0), (0, pdim - dim)))
    bulk = DenseLists.train(padded, codes.codebook, codes.codes)
    assert bulk.nlist == list_count(3000) and bulk.trained_at == 3000
    assert np.array_equal(bulk.lists, assign(bulk.centroids, padded))  # each in its nearest list
    assert _members(bulk) == _expected_members(bulk)
    # FAISS's own add (encode and assign) gives the same lists and the same search
    own = DenseLists(pdim, codes.codebook, bulk.centroids, codes.codes[:0], np.zeros(0, np.int32), 3000)
    own.add(padded[:10], codes.codes[:10])  # few: through FAISS's add
    own.add(padded[10:2000], codes.codes[:2000])  # many: laid out again from the codes
    for s in range(2000, 3000, 250):
        own.add(padded[s : s + 250], codes.codes[: s + 250])
    assert np.array_equal(own.lists, bulk.lists)
    assert _members(own) == _members(bulk)
    hits = 0
    for q in synth_vectors(_pool(dim), 3030, seed=5)[3000:]:
        query = np.pad(q, (0, pdim - dim)).reshape(1, -1)
        found = bulk.search(query, 200)
        assert np.array_equal(found, own.search(query, 200))
        exact = np.argsort(-(vecs @ q), kind="stable")[:20]
        hits += len(set(found.tolist()) & set(exact.tolist()))
    assert hits / (20 * 30) > 0.9  # the exact top 20 is among the 200 best of the probed lists


def test_lists_refuse_numbers_and_centroids_that_do_not_fit() -> None:
    vecs = synth_vectors(_pool(DIM), 2000, seed=3)
    codes = DenseCodes.train(vecs)
    centroids = train_centroids(vecs, 16)
    numbers = assign(centroids, vecs)
    with pytest.raises(ValueError, match="list numbers do not fit"):
        DenseLists(DIM, codes.codebook, centroids, codes.codes, np.full(2000, 16, np.int32), 2000)
    with pytest.raises(ValueError, match="list numbers do not fit"):
        DenseLists(DIM, codes.codebook, centroids, codes.codes, numbers[:-1], 2000)
    with pytest.raises(ValueError, match="do not fit 64 dimensions"):
        DenseLists(DIM, codes.codebook, centroids[:, :32], codes.codes, numbers, 2000)
    with pytest.raises(ValueError, match="do not fit"):
        codes.use_lists(DenseLists(DIM, codes.codebook, centroids, codes.codes[:10], numbers[:10], 10))


def test_a_listed_partition_ranks_near_exact_and_switches_between_lists_and_the_flat_scan() -> None:
    vecs = synth_vectors(_pool(DIM), N, seed=4)
    part = _listed()
    part.add(_batch(vecs))
    codes = part.dense_codes
    assert codes is not None and codes.lists is not None and part.codes_trained
    queries = synth_vectors(_pool(DIM), N + 20, seed=6)[N:]
    listed = [part.dense_top(q, 10)[0].tolist() for q in queries]
    part.set_exact_limit(N)
    exact = [part.dense_top(q, 10)[0].tolist() for q in queries]
    part.set_exact_limit(1000)  # back: the codes and lists are reused, nothing is learnt
    part.codes_trained = False
    assert [part.dense_top(q, 10)[0].tolist() for q in queries] == listed
    assert not part.codes_trained
    assert sum(len(set(a) & set(e)) for a, e in zip(listed, exact, strict=True)) / (10 * 20) > 0.9
    part.set_list_limit(N + 1)  # the flat scan again, then the same lists back
    assert part.dense_codes is not None and part.dense_codes.lists is None
    part.set_list_limit(1200)
    assert [part.dense_top(q, 10)[0].tolist() for q in queries] == listed and not part.codes_trained


def test_new_memories_join_their_nearest_list_and_a_partition_grown_4x_learns_new_lists() -> None:
    vecs = synth_vectors(_pool(DIM), 4 * N, seed=7)
    part = _listed()
    part.add(_batch(vecs[:1300]))
    codes = part.dense_codes
    assert codes is not None and codes.lists is not None
    first = codes.lists
    assert first.trained_at == 1300
    for i in range(1300, 1310):  # one at a time, as turns come
        part.add(_batch(vecs[i : i + 1], start=i + 1))
    part.add(_batch(vecs[1310:5199], start=1311))  # 5,199 < 4 x 1,300: the same centroids
    assert codes.lists is first and len(first) == 5199
    assert np.array_equal(first.lists, assign(first.centroids, vecs[:5199]))
    assert _members(first) == _expected_members(first)
    part.add(_batch(vecs[5199:5200], start=5200))  # 4 x 1,300: learnt again, from every memory
    assert codes.lists is not first and codes.lists.trained_at == 5200
    assert codes.lists.nlist == list_count(5200)
    assert _members(codes.lists) == _expected_members(codes.lists)


def test_snapshot_lists_round_trip_restrict_and_refuse_damage() -> None:
    vecs = synth_vectors(_pool(DIM), N, seed=8)
    part = _listed()
    part.add(_batch(vecs))
    snap = LexicalSnapshot.from_bytes(part.lexical_snapshot().to_bytes())
    assert snap.dense_centroids is not None and snap.dense_lists is not None and snap.dense_lists_at == N
    codes = part.dense_codes
    assert codes is not None and codes.lists is not None
    assert np.array_equal(snap.dense_lists, codes.lists.lists)
    assert np.array_equal(snap.dense_centroids, codes.lists.centroids)
    # forgotten memories leave their lists: a partition of the rest holds each in its list
    keep = snap.rowids[np.arange(N) % 3 != 1]
    kept = snap.restricted(keep)
    assert kept is not None and kept.dense_lists is not None
    assert np.array_equal(kept.dense_lists, snap.dense_lists[np.arange(N) % 3 != 1])
    rest = _listed(1000)
    rest.add(_subset(vecs, keep), snapshot=kept)
    lists = rest.dense_codes.lists if rest.dense_codes is not None else None
    assert lists is not None and not rest.codes_trained
    assert np.array_equal(lists.lists, kept.dense_lists)
    assert _members(lists) == _expected_members(lists)
    # damaged lists: never searched
    n = len(snap)
    bad_lists = [
        dataclasses.replace(
            snap, dense_lists=np.full(n, len(snap.dense_centroids), np.int32)
        ),  # no such list
        dataclasses.replace(snap, dense_lists=snap.dense_lists[:-1]),  # one memory short
        dataclasses.replace(snap, dense_centroids=snap.dense_centroids.reshape(-1)),  # not a matrix
        dataclasses.replace(snap, dense_lists_at=0),
    ]
    for bad in bad_lists:
        with pytest.raises(ValueError, match="inverted lists do not fit"):
            LexicalSnapshot.from_bytes(bad.to_bytes())
    partial = dataclasses.replace(snap, dense_centroids=None)  # written whole or not at all
    assert LexicalSnapshot.from_bytes(partial.to_bytes()).dense_lists is None


def _subset(vecs: np.ndarray, rowids: np.ndarray) -> VectorBatch:
    full = _batch(vecs)
    at = rowids - 1
    return VectorBatch(
        rowids, vecs[at], [full.texts[i] for i in at], ["turn"] * len(at),
        [full.dates[i] for i in at], [full.turns[i] for i in at], None, None,
    )  # fmt: skip


def _ranks(bank: MemoryBank) -> list[tuple[list[int], list[float]]]:
    part = bank._cache.get(bank.user("Ann").id)
    assert part.dense_codes is not None and part.dense_codes.lists is not None
    return _codes_ranks(bank)


@pytest.fixture
def _small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "EXACT_SEARCH_LIMIT", 1000)
    monkeypatch.setattr(index_module, "LIST_SEARCH_LIMIT", 1200)


def _no_learning(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("a restart learnt the inverted lists again")

    monkeypatch.setattr(lists_module, "train_centroids", refuse)
    monkeypatch.setattr(DenseCodes, "train", refuse)


@pytest.mark.usefixtures("_small_limits")
def test_a_restart_reads_the_lists_and_searches_exactly_as_before(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    first = make_bank()
    _fill(first)
    expected = _ranks(first)  # codes and lists learnt at the first load, then stored
    snap = _stored(first)
    assert snap is not None and snap.dense_lists is not None and len(snap.dense_lists) == N
    _no_learning(monkeypatch)
    restarted = make_bank()
    assert _ranks(restarted) == expected  # same memories, same scores
    part = restarted._cache.get(restarted.user("Ann").id)
    assert not part.codes_trained
    assert part.dense_codes is not None and part.dense_codes.lists is not None
    assert np.array_equal(part.dense_codes.lists.lists, snap.dense_lists)


@pytest.mark.usefixtures("_small_limits")
def test_turns_added_and_forgotten_after_the_snapshot_keep_the_lists_right(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    _ranks(bank)  # stores the snapshot with the lists
    for i in range(3):
        bank.add_turn("Ann", f"Anna and I went hiking again, trip {i}!", "Great.", at="2023-05-20T10:00")
    bank.archive("Ann", [m.memory_id for m in bank.history("Ann")[:40]])  # forgotten: restricted
    live = _ranks(bank)
    _no_learning(monkeypatch)
    restarted = make_bank()
    assert _ranks(restarted) == live  # the new turns joined their lists, the forgotten left theirs
    part = restarted._cache.get(restarted.user("Ann").id)
    assert len(part) == N + 3 - 40  # built from the restricted snapshot and the new turns
    assert part.dense_codes is not None and part.dense_codes.lists is not None
    assert _members(part.dense_codes.lists) == _expected_members(part.dense_codes.lists)


@pytest.mark.usefixtures("_small_limits")
def test_a_snapshot_without_lists_learns_them_once_and_stores_them(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    uid = bank.user("Ann").id
    expected = _ranks(bank)
    old = _stored(bank)
    assert old is not None
    older = dataclasses.replace(old, dense_centroids=None, dense_lists=None, dense_lists_at=0)  # round 6
    part = bank._cache.get(uid)
    assert bank.storage.put_lexical_snapshot(
        uid, bank.encoder_name, TOKENIZER_VERSION, part.epoch, older.to_bytes()
    )
    restarted = make_bank()
    assert _ranks(restarted) == expected  # learnt again, to the same lists (deterministic)
    assert restarted._cache.get(uid).codes_trained
    again = _stored(restarted)
    assert again is not None and again.dense_lists is not None
    assert np.array_equal(again.dense_lists, old.dense_lists)


@pytest.mark.usefixtures("_small_limits")
def test_a_snapshot_with_damaged_lists_is_rebuilt_never_searched(make_bank, caplog) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    uid = bank.user("Ann").id
    expected = _ranks(bank)
    old = _stored(bank)
    assert old is not None and old.dense_lists is not None
    damaged = dataclasses.replace(old, dense_lists=old.dense_lists + 10_000)  # lists that do not exist
    part = bank._cache.get(uid)
    assert bank.storage.put_lexical_snapshot(
        uid, bank.encoder_name, TOKENIZER_VERSION, part.epoch, damaged.to_bytes()
    )
    restarted = make_bank()
    assert _ranks(restarted) == expected
    assert "inverted lists do not fit" in caplog.text
    again = _stored(restarted)
    assert again is not None and again.dense_lists is not None
    assert np.array_equal(again.dense_lists, old.dense_lists)
