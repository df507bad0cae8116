"""Vectors in blocks (schema version 6): a restart reads a user's vectors in a few rows, the
same vectors, in the same order, as from their rows; no block outlives a deleted memory or a
rewritten vector; an older store migrates without loss. On both backends."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import numpy as np
import pytest

import memory_bank.index as index_module
import memory_bank.stores.sql as sql_module
from memory_bank import MemoryBank, vector_blocks
from memory_bank.records import RETRIEVABLE_KINDS, MemoryKind
from memory_bank.retrieval import rank
from memory_bank.stores.base import SCHEMA_VERSION, Storage, VectorBatch
from memory_bank.stores.sql import SQLStorage
from tests.conftest import UNDO_SCHEMA_6, downgrade

QUERIES = [
    "Where did my sister go hiking?",
    "What did Tom bake on May 3rd?",
    "我的猫叫什么名字？",
    "How was the concert?",
]


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_blocks, "BLOCK", 8)  # a test store fills several blocks
    monkeypatch.setattr(index_module, "SEAL_MIN", 8)
    monkeypatch.setattr(index_module, "SNAPSHOT_MIN", 1)


def _fill(bank: MemoryBank, n: int = 60) -> None:
    texts = [
        ("My sister Anna went hiking near the lake.", "How lovely!"),
        ("Tom baked a cherry pie on May 3rd.", "Yum, was it good?"),
        ("我的猫叫米索。", "好可爱的名字！"),
        ("The concert was loud but amazing.", "Whose concert was it?"),
    ]
    for i in range(n):
        q, r = texts[i % len(texts)]
        bank.add_turn("Ann", f"{q} ({i})", r, at=f"2023-05-{1 + i // 6:02d}T10:{i % 60:02d}")


def _ranks(bank: MemoryBank) -> list[tuple[list[int], list[float]]]:
    part = bank._cache.get(bank.user("Ann").id)
    out = []
    for q in QUERIES:
        r = rank(part, q, bank.encoder.encode([q])[0], 8, bank.config.retrieval, now=dt.date(2023, 6, 1))
        out.append((part.rowids[r.positions].tolist(), r.scores.tolist()))
    return out


def _blocks(storage: Storage, user_id: int) -> list[tuple[Any, ...]]:
    assert isinstance(storage, SQLStorage)
    return storage._rows(
        "SELECT first_rowid, last_rowid, rowids, vectors FROM vector_blocks WHERE user_id = ? ORDER BY first_rowid",
        (user_id,),
        binary=True,
    )


def _same(a: Any, b: Any) -> None:
    assert a.rowids.tolist() == b.rowids.tolist()
    if len(a.rowids):
        np.testing.assert_array_equal(a.vectors, b.vectors)
    assert (a.kinds, a.dates, a.turns) == (b.kinds, b.dates, b.turns)


def test_blocks_hold_what_the_rows_hold_and_a_restart_reads_few_rows(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    rows = bank.history("Ann")
    bank.archive("Ann", [m.memory_id for m in rows[3:9]])  # forgotten: still in the blocks
    bank.archive("Ann", [rows[20].memory_id], hidden=True)  # hidden: in a block, never in a batch
    expected = _ranks(bank)  # built from rows; seals the blocks
    uid = bank.user("Ann").id
    storage = bank.storage
    assert isinstance(storage, SQLStorage)
    blocks = _blocks(storage, uid)
    assert len(blocks) == 7 and sum(len(b[2]) for b in blocks) == 56 * 8  # int64 rowids: the newest 4 wait
    ranges = [(int(b[0]), int(b[1])) for b in blocks]
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    top = max(m.rowid or 0 for m in rows)
    enc = bank.encoder_name
    for archived in (False, True, None):
        for after, upto in ((0, None), (5, None), (0, 30), (9, 17), (top - 2, None)):
            got = storage.vectors(
                uid, enc, RETRIEVABLE_KINDS, after, archived=archived, upto_rowid=upto, texts=False
            )
            want = storage._row_vectors(uid, enc, RETRIEVABLE_KINDS, after, upto, archived, False)
            _same(got, want)
    turns_only = storage.vectors(uid, enc, [MemoryKind.TURN], texts=False, archived=None)
    _same(turns_only, storage._row_vectors(uid, enc, [MemoryKind.TURN], 0, None, None, False))

    read: list[int] = []
    original = SQLStorage._row_vectors

    def counting(self: SQLStorage, *args: Any) -> Any:
        batch = original(self, *args)
        read.append(len(batch.rowids))
        return batch

    monkeypatch.setattr(SQLStorage, "_row_vectors", counting)
    restarted = make_bank()
    assert _ranks(restarted) == expected
    assert sum(read) <= 4  # the memories after the last block, not the history
    part = restarted._cache.get(uid)
    held, before = part._vecs, len(part)
    assert len(held) > len(part)  # the load's matrix, kept with room for the next turns
    restarted.add_turn("Ann", "One more turn after the restart.", "Noted.", at="2023-05-30T10:00")
    grown = restarted._cache.get(uid)
    assert grown is part and len(part) == before + 1 and part._vecs is held  # appended in place


def test_no_block_keeps_a_deleted_memory_or_a_rewritten_vector(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    _ranks(bank)
    uid = bank.user("Ann").id
    storage = bank.storage
    before = _blocks(storage, uid)
    victim = bank.history("Ann")[10]
    vec = storage.embeddings(uid)[victim.rowid or 0][1].astype(np.float32).tobytes()
    assert any(vec in bytes(b[3]) for b in before)
    bank.delete_memory("Ann", victim.memory_id)
    after = _blocks(storage, uid)
    assert len(after) == len(before) - 1  # only the block that held it
    assert all(victim.rowid not in np.frombuffer(bytes(b[2]), dtype="<i8") for b in after)
    assert all(vec not in bytes(b[3]) for b in after)  # nor its vector
    _ranks(make_bank())  # the next load seals the gap again, without the deleted memory
    assert len(_blocks(storage, uid)) == len(before)
    assert all(vec not in bytes(b[3]) for b in _blocks(storage, uid))

    edited = bank.history("Ann")[30]
    bank.update_memory("Ann", edited.memory_id, text="Something else entirely.")
    assert all(
        edited.rowid not in np.frombuffer(bytes(b[2]), dtype="<i8") for b in _blocks(storage, uid)
    )  # its block went with its old vector
    n = len(_blocks(storage, uid))
    storage.put_vectors([edited.rowid or 0], np.ones((1, 64), dtype=np.float32) / 8, bank.encoder_name)
    assert len(_blocks(storage, uid)) == n  # no block held it: nothing else dropped
    first = bank.history("Ann")[0]
    storage.put_vectors([first.rowid or 0], np.ones((1, 64), dtype=np.float32) / 8, bank.encoder_name)
    assert len(_blocks(storage, uid)) == n - 1  # a re-embedded vector's block goes
    bank.delete_user("Ann")
    assert _blocks(storage, uid) == []


def test_a_version_5_store_migrates_to_blocks_without_loss(make_bank, stores) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    bank.archive("Ann", [bank.history("Ann")[4].memory_id], hidden=False)
    history = [(m.memory_id, m.text, m.archived, m.strength) for m, _ in bank.memories("Ann")]
    expected = _ranks(bank)
    storage = bank.storage
    assert isinstance(storage, SQLStorage)

    downgrade(storage, UNDO_SCHEMA_6, 5)  # the version 5 layout
    bank.close()
    reopened = make_bank()
    assert reopened.storage.meta()["schema_version"] == str(SCHEMA_VERSION)
    got = [(m.memory_id, m.text, m.archived, m.strength) for m, _ in reopened.memories("Ann")]
    assert got == history
    assert _ranks(reopened) == expected  # from rows; then sealed
    assert len(_blocks(reopened.storage, reopened.user("Ann").id)) == 7
    assert _ranks(make_bank()) == expected  # from the blocks


def test_a_damaged_block_is_read_from_its_rows_in_its_place(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A load streams the blocks one at a time into a matrix sized from their rowids; a block
    that does not read (here: its rowids cut short, so it also holds more memories than the
    sizes said) has its memories read from their rows, in rowid order, and the matrix grows."""
    bank = make_bank()
    _fill(bank)
    bank.archive("Ann", [bank.history("Ann")[26].memory_id])  # forgotten, in the damaged block
    _ranks(bank)  # seals
    uid = bank.user("Ann").id
    storage = bank.storage
    assert isinstance(storage, SQLStorage)
    enc = bank.encoder_name
    middle = _blocks(storage, uid)[3]
    storage._write(
        lambda c: c.execute(
            "UPDATE vector_blocks SET rowids = ? WHERE user_id = ? AND first_rowid = ?",
            (bytes(middle[2])[:8], uid, middle[0]),
        )
    )
    no_room = lambda n, dim: np.empty((n, dim), dtype=np.float32)  # noqa: E731
    monkeypatch.setattr(sql_module, "matrix_with_room", no_room)  # the fill must grow
    for archived in (False, True, None):
        for after, upto in ((0, None), (int(middle[0]), None), (0, int(middle[1]) - 1)):
            got = storage.vectors(
                uid, enc, RETRIEVABLE_KINDS, after, archived=archived, upto_rowid=upto, texts=False
            )
            _same(got, storage._row_vectors(uid, enc, RETRIEVABLE_KINDS, after, upto, archived, False))


def test_a_block_whose_rowids_repeat_or_leave_its_range_is_read_from_rows(make_bank) -> None:  # type: ignore[no-untyped-def]
    """Rowids that read but are out of order, repeated or outside the block's range gave one
    memory two positions: every search of the user after a restart failed (the snapshot and the
    vectors disagree), and the block was never rewritten. Such a block is read from its rows."""
    bank = make_bank()
    _fill(bank)
    expected = _ranks(bank)  # seals, and stores the snapshot
    uid = bank.user("Ann").id
    storage = bank.storage
    assert isinstance(storage, SQLStorage)
    first, _, raw, _ = _blocks(storage, uid)[1]
    ids = np.frombuffer(bytes(raw), dtype="<i8")
    for bad in (np.concatenate([ids[:1], ids[:-1]]), ids[::-1], ids - 1, ids + 1):
        storage._write(
            lambda c, bad=bad: c.execute(
                "UPDATE vector_blocks SET rowids = ? WHERE user_id = ? AND first_rowid = ?",
                (bad.astype("<i8").tobytes(), uid, first),
            )
        )
        assert _ranks(make_bank()) == expected


def test_a_streamed_load_keeps_no_block_bytes() -> None:
    """Each block's vectors are copied into the load's matrix and nothing keeps the block: at a
    million memories keeping them held 1.46 GB more, faulted in on the way (395k page faults)."""
    fill = sql_module.BatchFill(10)
    sources = [np.arange(4 * 3, dtype=np.float32).reshape(4, 3) + i for i in range(2)]
    for i, src in enumerate(sources):
        fill.put(VectorBatch(np.arange(4) + 4 * i, src, [], ["turn"] * 4, ["2023-05-01"] * 4, [0, 1, 2, 3]))
    batch = fill.batch()
    np.testing.assert_array_equal(batch.vectors, np.concatenate(sources))
    assert batch.rowids.tolist() == list(range(8)) and batch.spare
    assert not any(np.shares_memory(p.vectors, s) for p in fill.parts for s in sources)
