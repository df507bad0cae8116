"""The performance paths give exactly what the straightforward code gives.

Each fast path (sparse BM25 postings, O(n) top-k selection, date lookups, the columnar
forgetting read, dense codes with exact re-scoring) is checked against a plain reference
implementation on random data, so a speed-up can never change a ranking or a forgetting pass.
"""

from __future__ import annotations

import collections
import dataclasses
import math

import numpy as np
import pytest

from memory_bank import MemoryBank, MemoryKind
from memory_bank.bench.data import DialogGenerator, synth_vectors
from memory_bank.config import PAPER_FORGETTING
from memory_bank.embeddings import HashingEncoder
from memory_bank.index import LexicalIndex, Partition, stable_top
from memory_bank.records import RETRIEVABLE_KINDS, Memory
from memory_bank.stores import Storage, VectorBatch, open_storage
from memory_bank.text import tokenize


def reference_bm25(texts: list[str], query: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """BM25 as the index computes it (lists, float32, the same order of operations): each length
    norm ``K1 * (1 - B + B * length / avgdl)`` is ``length * c1 + c0`` with ``c1 = K1 * B /
    avgdl`` and ``c0 = K1 * (1 - B)`` rounded to float32."""
    k1, b = 1.2, 0.75
    postings: dict[str, tuple[list[int], list[int]]] = {}
    lengths_list: list[int] = []
    for pos, text in enumerate(texts):
        toks = tokenize(text)
        lengths_list.append(len(toks))
        for tok, tf in collections.Counter(toks).items():
            postings.setdefault(tok, ([], []))[0].append(pos)
            postings[tok][1].append(tf)
    n = len(lengths_list)
    lengths = np.asarray(lengths_list, dtype=np.float32)
    avgdl = sum(lengths_list) / n or 1.0
    c1, c0 = np.float32(k1 * b / avgdl), np.float32(k1 * (1 - b))
    acc = np.zeros(n, dtype=np.float32)
    for tok, qtf in collections.Counter(query).items():
        if tok not in postings:
            continue
        pos_a = np.asarray(postings[tok][0], dtype=np.int64)
        tf = np.asarray(postings[tok][1], dtype=np.float32)
        idf = math.log(1.0 + (n - len(pos_a) + 0.5) / (len(pos_a) + 0.5))
        acc[pos_a] += qtf * idf * tf * (k1 + 1) / (tf + (lengths[pos_a] * c1 + c0))
    hit = np.nonzero(acc)[0]
    return hit, acc[hit]


def test_bm25_scores_are_bit_identical_through_bulk_and_incremental_adds() -> None:
    gen = DialogGenerator(3)
    texts = [t.text for t in gen.turns(700)] + ["我们去博物馆看展", "博物馆 museum 2023-05-04"]
    queries = [tokenize(q) for q in gen.queries(25)] + [tokenize("博物馆"), tokenize("museum museum")]
    index = LexicalIndex()
    index.add(texts[:300])  # bulk: straight into the sparse arrays
    for i in range(300, len(texts), 7):  # small batches: the tail, merged now and then
        index.add(texts[i : i + 7])
        if i in (300, 405, 601):
            for q in queries:
                pos, sc = index.scores(q)
                ref_pos, ref_sc = reference_bm25(texts[: i + 7], q)
                assert np.array_equal(pos, ref_pos) and np.array_equal(sc, ref_sc)
    for q in queries:
        pos, sc = index.scores(q)
        ref_pos, ref_sc = reference_bm25(texts, q)
        assert np.array_equal(pos, ref_pos)
        assert np.array_equal(sc, ref_sc)  # bit for bit, not approximately


@pytest.mark.parametrize("n, k", [(0, 3), (5, 10), (1000, 64), (1000, 1), (50, 50)])
def test_stable_top_matches_a_stable_argsort(n: int, k: int) -> None:
    rng = np.random.default_rng(n + k)
    scores = rng.integers(0, 7, n).astype(np.float32) / 3  # many ties
    expected = np.argsort(-scores, kind="stable")[:k]
    assert stable_top(scores, k).tolist() == expected.tolist()


def _batch(turns: list[tuple[str, int | None, str]], vectors: np.ndarray, start: int = 1) -> VectorBatch:
    return VectorBatch(
        np.arange(start, start + len(turns), dtype=np.int64),
        vectors,
        [f"text {i}" for i in range(len(turns))],
        [kind for _, _, kind in turns],
        [d for d, _, _ in turns],
        [t for _, t, _ in turns],
    )


def test_partition_date_lookups_match_a_scan() -> None:
    rng = np.random.default_rng(0)
    days = [f"20{rng.integers(20, 24)}-0{rng.integers(1, 10)}-1{rng.integers(0, 10)}" for _ in range(300)]
    rows = [(d, i % 5, "turn" if i % 4 else "daily_summary") for i, d in enumerate(days)]
    part = Partition(8)
    vecs = rng.standard_normal((300, 8)).astype(np.float32)
    part.add(_batch(rows[:100], vecs[:100]))
    part.add(_batch(rows[100:], vecs[100:], start=101))
    assert part.years() == tuple(sorted({int(d[:4]) for d in part.dates}, reverse=True))
    wanted = {days[3], days[150], "1999-01-01"}
    expected = [i for i, d in enumerate(part.dates) if d in wanted]
    assert part.positions_on(wanted).tolist() == expected


def test_dense_codes_with_exact_rescoring() -> None:
    pool = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    vecs = synth_vectors(pool, 3000, seed=2)
    part = Partition(32)
    part.exact_limit = 1000
    part.add(_batch([("2023-01-01", None, "turn")] * 3000, vecs))
    assert part.approximate
    queries = synth_vectors(pool, 3020, seed=5)[3000:]
    hits = 0
    for q in queries:
        pos, scores = part.dense_top(q, 20)
        exact = np.argsort(-(vecs @ q), kind="stable")[:20]
        assert np.allclose(scores, vecs[pos] @ q)  # scores are exact inner products
        assert np.all(np.diff(scores) <= 1e-6)  # best first
        hits += len(set(pos.tolist()) & set(exact.tolist()))
    assert hits / (20 * len(queries)) > 0.9
    part.set_exact_limit(10_000)
    assert not part.approximate
    pos, _ = part.dense_top(queries[0], 20)
    assert pos.tolist() == np.argsort(-(vecs @ queries[0]), kind="stable")[:20].tolist()


def test_a_load_with_room_is_kept_and_any_other_array_is_copied() -> None:
    """A store's load hands over a buffer with room after its rows (``spare``): the partition
    keeps it (a restart holds one copy of the vectors) and appends into the room. A caller's
    own array is copied, so no later append ever writes into it."""
    rng = np.random.default_rng(3)
    room = np.zeros((50, 8), dtype=np.float32)
    room[:30] = rng.standard_normal((30, 8))
    loaded = dataclasses.replace(_batch([("2023-01-01", i, "turn") for i in range(30)], room[:30]), spare=True)
    part = Partition(8)
    part.add(loaded)
    assert np.shares_memory(part._xb(), room)
    more = rng.standard_normal((5, 8)).astype(np.float32)
    part.add(_batch([("2023-01-02", i, "turn") for i in range(5)], more, start=31))
    assert np.array_equal(room[30:35], more)  # appended into the room
    assert np.array_equal(part.vectors_at(np.arange(35)), np.concatenate([room[:30], more]))

    mine = rng.standard_normal((40, 8)).astype(np.float32)
    before = mine.copy()
    other = Partition(8)
    other.add(_batch([("2023-01-01", i, "turn") for i in range(20)], mine[:20]))  # a view, no room
    later = rng.standard_normal((10, 8)).astype(np.float32)
    other.add(_batch([("2023-01-02", i, "turn") for i in range(10)], later, start=21))
    assert np.array_equal(mine, before)  # the caller's rows after the view are untouched
    q = rng.standard_normal(8).astype(np.float32)
    flat = np.concatenate([mine[:20], later])
    pos, scores = other.dense_top(q, 7)
    assert pos.tolist() == np.argsort(-(flat @ q), kind="stable")[:7].tolist()
    assert np.allclose(scores, flat[pos] @ q)


def test_columnar_forgetting_read_equals_the_generic_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(16))
    # Out-of-order dates, summaries between turns, recalls, strengths, an archived memory.
    for day, hour in [("2023-05-03", 9), ("2023-05-01", 10), ("2023-05-03", 8), ("2023-05-02", 7)]:
        bank.add_turn("Ann", f"turn on {day} at {hour}", "ok", at=f"{day}T{hour:02d}:00")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "summary of the 2nd", date="2023-05-02")
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "", date="2023-05-01")  # no vector: still examined
    bank.set_layer("Ann", MemoryKind.GLOBAL_SUMMARY, "not examined")
    hit = bank.search("Ann", "turn on 2023-05-01", k=1, now="2023-05-06", reinforce=True)[0]
    rec = bank.user("Ann")
    bank.storage.set_archived(rec.id, [bank.history("Ann")[-1].rowid or 0], True)
    fast = bank.storage.forget_columns(rec.id, RETRIEVABLE_KINDS)
    slow = Storage.forget_columns(bank.storage, rec.id, RETRIEVABLE_KINDS)
    assert fast.rowids.tolist() == slow.rowids.tolist() and len(fast.rowids) == 5
    assert fast.anchors.tolist() == slow.anchors.tolist()
    assert fast.strengths.tolist() == slow.strengths.tolist()
    assert hit.memory.rowid in fast.rowids.tolist()
    # Unusual values take the generic path and still agree.
    bank.storage.add_memories(
        rec.id,
        [Memory(memory_id="odd", user="Ann", kind=MemoryKind.TURN, date="2023-05-04", text="odd",
                strength=9000, last_recall_date="2023-05-05T10:00:00"),
         Memory(memory_id="neg", user="Ann", kind=MemoryKind.TURN, date="2023-05-04", text="neg", strength=-1)],
        None,
        "x",
    )
    fast = bank.storage.forget_columns(rec.id, RETRIEVABLE_KINDS)
    slow = Storage.forget_columns(bank.storage, rec.id, RETRIEVABLE_KINDS)
    assert fast.rowids.tolist() == slow.rowids.tolist()
    assert fast.anchors.tolist() == slow.anchors.tolist()
    assert fast.strengths.tolist() == slow.strengths.tolist() and {9000.0, -1.0} <= set(fast.strengths.tolist())
    bank.close()


def test_content_weights_land_on_their_own_rows_through_the_fast_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The fast read lists rows in its index's order (by forgetting key), not by rowid; each of
    the few weighted rows must still get its own weight, as the generic path gives it."""
    storage = open_storage(tmp_path / "s")
    rng = np.random.default_rng(11)
    u = storage.ensure_user("Ann").id
    days = rng.integers(1, 28, 3000)
    weights = np.where(rng.random(3000) < 0.05, rng.choice([0.25, 0.5, 2.0, 3.0], 3000), 1.0)
    mems = [
        Memory(memory_id=f"m{i}", user="Ann", kind=MemoryKind.TURN, date=f"2023-05-{days[i]:02d}", turn=i,
               text=f"t{i}", strength=int(rng.integers(1, 5)), weight=float(weights[i]))
        for i in range(3000)
    ]  # fmt: skip
    storage.add_memories(u, mems, None, "x")
    fast = storage.forget_columns(u, RETRIEVABLE_KINDS, weights=True)
    slow = Storage.forget_columns(storage, u, RETRIEVABLE_KINDS, weights=True)
    assert fast.rowids.tolist() != sorted(fast.rowids.tolist())  # not in rowid order
    assert fast.rowids.tolist() == slow.rowids.tolist()
    assert fast.weights is not None and slow.weights is not None
    assert fast.weights.tolist() == slow.weights.tolist()
    assert sorted(fast.weights.tolist()) == sorted(weights.tolist())
    storage.close()


def test_ascending_ids_sorts_as_numpy_does() -> None:
    from memory_bank.bank import ascending_ids

    rng = np.random.default_rng(2)
    for n, span in [(0, 1), (7, 9), (5000, 5000), (20_000, 30_000), (20_000, 10**9)]:
        ids = rng.choice(span, n, replace=False).astype(np.int64) + 1
        assert ascending_ids(ids).tolist() == np.sort(ids).tolist()
    repeated = np.concatenate([np.arange(5000), [17, 4999]]).astype(np.int64)  # not distinct
    assert ascending_ids(repeated).tolist() == np.sort(repeated).tolist()


def test_a_seeded_forgetting_pass_forgets_the_same_memories_as_the_memory_object_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from memory_bank import forgetting

    bank = MemoryBank.open(
        tmp_path / "s", encoder_instance=HashingEncoder(16), forgetting={**PAPER_FORGETTING, "seed": 7, "tau": 3}
    )
    for i, t in enumerate(DialogGenerator(1).turns(120, per_day=6)):
        bank.add_turn("Ann", t.query, t.response, at=t.at)
        if i % 9 == 0:
            bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, f"summary {i}", date=t.at.date().isoformat())
    rec = bank.user("Ann")
    mems = bank.storage.memories(rec.id, kinds=RETRIEVABLE_KINDS, include_archived=False)
    today = mems[-1].date
    r = forgetting.retention_array(
        forgetting.elapsed_days([m.recall_anchor for m in mems], today),
        np.array([m.strength for m in mems], dtype=np.float64),
        tau=3,
    )
    drop = forgetting.forget_mask(r, rng=forgetting.pass_rng(7, "Ann", __import__("datetime").date.fromisoformat(today)))
    expected = [m.memory_id for m, d in zip(mems, drop, strict=True) if d]
    report = bank.forget("Ann", now=today)["Ann"]
    assert expected and report.forgotten == expected
    bank.close()


@pytest.mark.parametrize("batch", [37, 1000])  # the first batch is indexed in bulk, later ones one by one
def test_neighbours_match_a_lookup_at_query_time_even_with_duplicate_turns(batch: int) -> None:
    rng = np.random.default_rng(4)
    rows = [(f"2023-05-0{rng.integers(1, 4)}", int(rng.integers(0, 6)), "turn") for _ in range(200)]
    rows += [("2023-05-01", None, "daily_summary"), ("2023-05-02", 3, "daily_summary")]
    part = Partition(4)
    vecs = rng.standard_normal((len(rows), 4)).astype(np.float32)
    for s in range(0, len(rows), batch):  # in arbitrary day/turn order
        part.add(_batch(rows[s : s + batch], vecs[s : s + batch], start=s + 1))
    for day in ("2023-05-01", "2023-05-02", "2023-05-03"):
        assert part.positions_on([day]).tolist() == [p for p, r in enumerate(rows) if r[0] == day]
    assert part.years() == (2023,) and part.day_ids(np.arange(len(rows))).max() == 2
    latest: dict[tuple[str, int], int] = {}
    for pos, (day, turn, kind) in enumerate(rows):
        if kind == "turn" and turn is not None:
            latest[(day, turn)] = pos
    for pos, (day, turn, kind) in enumerate(rows):
        expected = (None, None)
        if kind == "turn" and turn is not None:
            expected = (latest.get((day, turn - 1)), latest.get((day, turn + 1)))
        assert part.neighbours(pos) == expected
    prev, nxt = part.neighbour_positions(np.arange(len(rows)))
    assert [(p if p >= 0 else None, n if n >= 0 else None) for p, n in zip(prev.tolist(), nxt.tolist(), strict=True)] == [
        part.neighbours(p) for p in range(len(rows))
    ]


def test_forgetting_keys_hold_the_anchor_day_and_strength(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The SQLite forgetting key equals the generic path for any day from 1970 on, with a recall
    date or time or not; a date before 1970 or an odd strength sends the pass to the generic path."""
    import datetime as dt

    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(8))
    rec = bank.user("Ann", create=True)
    rng = np.random.default_rng(3)
    mems = []
    for i, d in enumerate(rng.integers(0, 200_000, 500)):
        day = (dt.date(1970, 1, 1) + dt.timedelta(days=int(d))).isoformat()
        recall = None
        if i % 3 == 0:
            recall = (dt.date(1970, 1, 1) + dt.timedelta(days=int(d) + i)).isoformat() + ("T10:00:00" if i % 2 else "")
        mems.append(Memory(memory_id=f"m{i}", user="Ann", kind=MemoryKind.TURN, date=day, text="x",
                           strength=int(rng.integers(0, 8192)), last_recall_date=recall))
    bank.storage.add_memories(rec.id, mems, None, "x")
    fast = bank.storage.forget_columns(rec.id, RETRIEVABLE_KINDS)
    slow = Storage.forget_columns(bank.storage, rec.id, RETRIEVABLE_KINDS)
    assert len(fast.rowids) == 500
    for field in ("rowids", "anchors", "strengths"):
        assert getattr(fast, field).tolist() == getattr(slow, field).tolist(), field
    for odd in (Memory(memory_id="old", user="Ann", kind=MemoryKind.TURN, date="1969-12-31", text="x"),
                Memory(memory_id="big", user="Ann", kind=MemoryKind.TURN, date="2023-01-01", text="x", strength=8192)):
        bank.storage.add_memories(rec.id, [odd], None, "x")
        row = bank.storage._conn().execute("SELECT forget_key FROM memories WHERE memory_id = ?", (odd.memory_id,))
        assert row.fetchone()[0] is None
        fast = bank.storage.forget_columns(rec.id, RETRIEVABLE_KINDS)
        slow = Storage.forget_columns(bank.storage, rec.id, RETRIEVABLE_KINDS)
        for field in ("rowids", "anchors", "strengths"):
            assert getattr(fast, field).tolist() == getattr(slow, field).tolist(), field
    bank.close()


def test_echo_equals_the_set_definition_per_memory() -> None:
    """The vectorised echo against |U & Q| / max(|U|, |Q|) over each question turn's distinct
    user tokens, on generated turns and queries (known and unknown words, repeats, no words)."""
    turns = DialogGenerator(4).many(600)
    queries = [t.query for t in turns]
    part = Partition(8)
    part.add(
        VectorBatch(
            np.arange(1, len(turns) + 1),
            np.ones((len(turns), 8), dtype=np.float32),
            [t.text for t in turns],
            ["turn"] * len(turns),
            [t.at.date().isoformat() for t in turns],
            list(range(len(turns))),
            queries,
            [t.response for t in turns],
        )
    )
    asked = [i for i, q in enumerate(queries) if q.strip().endswith("?")]
    assert len(asked) > 20
    rng = np.random.default_rng(0)
    for text in [queries[i] for i in asked[:15]] + ["zebra quokka?", "", "the the the?"]:
        q = set(tokenize(text))
        positions = np.sort(rng.choice(len(turns), 200, replace=False))
        expected = [
            len(set(tokenize(queries[p])) & q) / max(len(set(tokenize(queries[p]))), len(q))
            if p in set(asked) and q and tokenize(queries[p])
            else 0.0
            for p in positions
        ]
        assert part.echo(positions, tokenize(text)).tolist() == pytest.approx(expected, abs=1e-12)
