"""The PostgreSQL store reads a partition's vector blocks with a binary COPY streamed into one
matrix: the same batch, bit for bit, as the shared block path and as the rows (forgotten and
hidden memories, daily summaries without a turn number, Chinese texts, every rowid range), and
a block it cannot read leaves the load to the shared path on the same connection."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import memory_bank.index as index_module
from memory_bank import Memory, MemoryBank, MemoryKind, load_config, vector_blocks
from memory_bank.embeddings import HashingEncoder
from memory_bank.records import RETRIEVABLE_KINDS
from memory_bank.stores.sql import SQLStorage

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_blocks, "BLOCK", 8)  # a test store fills several blocks
    monkeypatch.setattr(index_module, "SEAL_MIN", 8)
    monkeypatch.setattr(index_module, "SNAPSHOT_MIN", 1)


@pytest.fixture
def bank(pg_url: str, pg_schema: str) -> Iterator[MemoryBank]:
    from memory_bank.stores.postgres import PostgresStorage

    b = MemoryBank(load_config(None), storage=PostgresStorage(pg_url, schema=pg_schema), encoder=HashingEncoder(64))
    yield b
    b.close()


def _fill(bank: MemoryBank) -> int:
    """60 turns (English and Chinese) and a daily summary every ten; some forgotten, one
    hidden; the first load seals the blocks. Returns the user's id."""
    texts = [("My sister Anna went hiking near the lake.", "How lovely!"), ("我的猫叫米索。", "好可爱的名字！")]
    for i in range(60):
        q, r = texts[i % 2]
        bank.add_turn("Ann", f"{q} ({i})", r, at=f"2023-05-{1 + i // 6:02d}T10:{i % 60:02d}")
        if i % 10 == 9:
            day = f"2023-05-{1 + i // 6:02d}"
            bank.add_memories(
                "Ann",
                [Memory(f"Ann_{day}_summary", "Ann", MemoryKind.DAILY_SUMMARY, day, f"那天安娜去远足了 ({i})")],
            )
    rows = bank.history("Ann")
    bank.archive("Ann", [m.memory_id for m in rows[3:9]], hidden=False)  # forgotten
    bank.archive("Ann", [rows[20].memory_id], hidden=True)
    uid = bank.user("Ann").id
    bank._cache.get(uid)  # read from rows: seals the blocks
    return uid


def _same(a: Any, b: Any) -> None:
    assert a.rowids.tolist() == b.rowids.tolist()
    assert a.vectors.dtype == b.vectors.dtype == np.float32
    assert np.ascontiguousarray(a.vectors).tobytes() == np.ascontiguousarray(b.vectors).tobytes()
    assert (a.kinds, a.dates, a.turns, a.from_rows) == (b.kinds, b.dates, b.turns, b.from_rows)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each load was served by the COPY path."""
    from memory_bank.stores import _pg_vectors

    served: list[bool] = []
    original = _pg_vectors.read

    def spy(*args: Any) -> Any:
        batch = original(*args)
        served.append(batch is not None)
        return batch

    monkeypatch.setattr(_pg_vectors, "read", spy)
    return served


def _block_count(bank: MemoryBank, uid: int) -> int:
    assert isinstance(bank.storage, SQLStorage)
    return int(bank.storage._rows("SELECT COUNT(*) FROM vector_blocks WHERE user_id = ?", (uid,))[0][0])


@pytest.mark.parametrize("connections", [1, 2, "refused"])
def test_the_copy_path_equals_the_shared_block_path_and_the_rows(bank, monkeypatch, connections) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.stores import _pg_vectors
    from memory_bank.stores._pg_pool import PostgresDatabase

    uid = _fill(bank)
    storage = bank.storage
    assert isinstance(storage, SQLStorage)
    assert _block_count(bank, uid) >= 7
    # 1: every load on one connection; 2: four blocks or more on two; "refused": no second
    # connection on the same snapshot (a standby, no free connection), so one after all
    monkeypatch.setattr(_pg_vectors, "PARALLEL_MIN", 10**6 if connections == 1 else 4)
    twins: list[bool] = []
    original_twin = PostgresDatabase.twin

    @contextlib.contextmanager
    def twin(self: PostgresDatabase) -> Iterator[Any]:
        if connections == "refused":
            twins.append(False)
            yield None
            return
        with original_twin(self) as conn:
            twins.append(conn is not None)
            yield conn

    monkeypatch.setattr(PostgresDatabase, "twin", twin)
    served = _spy(monkeypatch)
    top = max(m.rowid or 0 for m in bank.history("Ann"))
    enc = bank.encoder_name
    checked = 0
    for kinds in (RETRIEVABLE_KINDS, (MemoryKind.TURN,), (MemoryKind.DAILY_SUMMARY,)):
        for archived in (False, True, None):
            for after, upto in ((0, None), (5, None), (0, 30), (9, 17), (top - 2, None), (top, None)):
                got = storage.vectors(uid, enc, kinds, after, archived=archived, upto_rowid=upto, texts=False)
                shared = SQLStorage.vectors(
                    storage, uid, enc, kinds, after, archived=archived, upto_rowid=upto, texts=False
                )
                rows = storage._row_vectors(uid, enc, kinds, after, upto, archived, False)
                _same(got, shared)
                assert (got.rowids.tolist(), got.kinds, got.dates, got.turns) == (
                    rows.rowids.tolist(), rows.kinds, rows.dates, rows.turns
                )  # fmt: skip
                if len(rows.rowids):
                    assert got.vectors.tobytes() == rows.vectors.tobytes()
                checked += len(got.rowids)
    assert checked > 500 and sum(served) >= 40  # the COPY path served the loads that had blocks
    if connections == 1:
        assert twins == []
    else:
        assert len(twins) >= 20 and all(twins) == (connections == 2)
    whole = storage.vectors(uid, enc, RETRIEVABLE_KINDS, archived=None, texts=False)
    assert None in whole.turns and "daily_summary" in whole.kinds  # summaries have no turn number
    assert whole.from_rows < len(whole.rowids) // 4  # from the blocks, not the rows


@pytest.mark.parametrize(
    "damage",
    [
        "labels = 'not json'",  # fits every size: found while the COPY runs, which is read to its end
        "vectors = substring(vectors from 1 for 40)",  # sizes that do not fit
        "dim = dim * 2",  # another dimension
        "kind_at = '\\x0900000009000000090000000900000009000000090000000900000009000000'::bytea",
    ],
)
def test_a_block_the_copy_path_cannot_read_leaves_the_load_to_the_shared_path(  # type: ignore[no-untyped-def]
    bank, monkeypatch, damage
) -> None:
    uid = _fill(bank)
    storage = bank.storage
    assert isinstance(storage, SQLStorage)
    enc = bank.encoder_name
    want = storage._row_vectors(uid, enc, RETRIEVABLE_KINDS, 0, None, None, False)
    storage._write(
        lambda c: c.execute(
            f"UPDATE vector_blocks SET {damage} WHERE user_id = ? AND first_rowid = "
            "(SELECT MIN(first_rowid) FROM vector_blocks WHERE user_id = ?)",
            (uid, uid),
        )
    )
    served = _spy(monkeypatch)
    got = storage.vectors(uid, enc, RETRIEVABLE_KINDS, archived=None, texts=False)
    assert served == [False]
    assert got.rowids.tolist() == want.rowids.tolist()
    assert got.vectors.tobytes() == want.vectors.tobytes()
    assert (got.kinds, got.dates, got.turns) == (want.kinds, want.dates, want.turns)
    assert storage.user_counters(uid)  # the connection still serves reads
    restarted = MemoryBank(load_config(None), storage=type(storage)(storage.url, schema=storage.schema), encoder=HashingEncoder(64))  # type: ignore[attr-defined]
    try:
        part = restarted._cache.get(uid)
        assert part.rowids.tolist() == want.rowids.tolist()  # the same partition, read from rows
    finally:
        restarted.close()
