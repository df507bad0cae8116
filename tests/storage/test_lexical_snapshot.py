"""The persisted lexical index (schema version 4): a restart reads it instead of re-tokenising,
ranks exactly as a partition built from the texts, and never outlives the words it holds."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import numpy as np
import pytest

import memory_bank.index as index_module
from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
from memory_bank.index import READER_THREADS
from memory_bank.lexical_snapshot import LexicalSnapshot
from memory_bank.retrieval import rank
from memory_bank.text import TOKENIZER_VERSION
from tests.conftest import UNDO_SCHEMA_6

QUERIES = ["Where did my sister go hiking?", "What did Tom bake on May 3rd?", "我的猫叫什么名字？", "How was the concert?"]
#: A non-default ranking: other weights, no neighbour lift, more candidates.
OTHER = {"lexical_weight": 0.6, "date_weight": 0.0, "prev_turn_weight": 0.0, "next_turn_weight": 0.0, "candidates": 96}


@pytest.fixture(autouse=True)
def _snapshot_every_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "SNAPSHOT_MIN", 1)  # small test stores persist too


def _fill(bank: MemoryBank) -> None:
    texts = [
        ("My sister Anna went hiking near the lake.", "How lovely!"),
        ("Tom baked a cherry pie on May 3rd.", "Yum, was it good?"),
        ("我的猫叫米索。", "好可爱的名字！"),
        ("Do you remember my cat?", "Is it Miso?"),
        ("The concert was loud but amazing.", "Whose concert was it?"),
        ("Jay Chou's!", "Wow, lucky you."),
    ]
    for i in range(60):
        q, r = texts[i % len(texts)]
        bank.add_turn("Ann", f"{q} ({i})", r, at=f"2023-05-{1 + i // 6:02d}T10:{i % 60:02d}")


def _ranks(bank: MemoryBank, **retrieval: Any) -> list[tuple[list[int], list[float]]]:
    cfg = bank.config.retrieval.model_copy(update=retrieval)
    part = bank._cache.get(bank.user("Ann").id)
    enc = bank.encoder
    out = []
    for q in QUERIES:
        r = rank(part, q, enc.encode([q])[0], 8, cfg, now=dt.date(2023, 6, 1))
        out.append((part.rowids[r.positions].tolist(), r.scores.tolist()))
    return out


def _stored(bank: MemoryBank) -> bytes | None:
    return bank.storage.lexical_snapshot(bank.user("Ann").id, bank.encoder_name, TOKENIZER_VERSION)


def test_a_restart_reads_the_snapshot_and_ranks_exactly_as_from_the_texts(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _fill(make_bank())
    first = make_bank()
    expected = _ranks(first), _ranks(first, **OTHER)  # built from the texts, then persisted
    assert _stored(first) is not None
    restarted = make_bank()

    def no_tokenising(*_: Any) -> None:
        raise AssertionError("a partition with a snapshot tokenised its memories again")

    monkeypatch.setattr(index_module.LexicalIndex, "add", no_tokenising)
    assert (_ranks(restarted), _ranks(restarted, **OTHER)) == expected


def test_turns_added_after_the_snapshot_and_forgotten_ones_are_reconciled(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    _ranks(bank)  # persists the snapshot
    bank.add_turn("Ann", "Anna and I went hiking again!", "Great.", at="2023-05-20T10:00")
    victims = [m.memory_id for m in bank.history("Ann")[:5]]
    bank.archive("Ann", victims, hidden=False)  # forgotten: the snapshot stays (the texts are still stored)
    assert _stored(bank) is not None
    from_snapshot = make_bank()
    scratch = make_bank()
    scratch._cache.snapshots = None
    assert _ranks(from_snapshot) == _ranks(scratch)
    assert _ranks(from_snapshot, **OTHER) == _ranks(scratch, **OTHER)


def test_deleting_or_editing_a_memory_deletes_the_snapshot_in_the_same_write(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    _ranks(bank)
    assert _stored(bank) is not None
    bank.delete_memory("Ann", bank.history("Ann")[2].memory_id)
    assert _stored(bank) is None  # no copy of the deleted words is left in the store
    _ranks(make_bank())
    assert _stored(bank) is not None
    bank.update_memory("Ann", bank.history("Ann")[0].memory_id, text="Something else entirely.")
    assert _stored(bank) is None
    bank.delete_user("Ann")
    assert not bank.has_user("Ann")


def test_the_store_says_whether_a_snapshot_is_there_without_reading_it(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    uid = bank.user("Ann").id
    assert not bank.storage.has_lexical_snapshot(uid, bank.encoder_name, TOKENIZER_VERSION)
    _ranks(bank)
    assert bank.storage.has_lexical_snapshot(uid, bank.encoder_name, TOKENIZER_VERSION)
    assert not bank.storage.has_lexical_snapshot(uid, bank.encoder_name, TOKENIZER_VERSION + "-next")
    assert not bank.storage.has_lexical_snapshot(uid, "other-encoder", TOKENIZER_VERSION)


def test_a_damaged_snapshot_is_rebuilt_from_the_texts(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    expected = _ranks(bank), _ranks(bank, **OTHER)
    uid = bank.user("Ann").id
    epoch = bank._cache.get(uid).epoch
    assert bank.storage.put_lexical_snapshot(uid, bank.encoder_name, TOKENIZER_VERSION, epoch, b"not a snapshot")
    restarted = make_bank()  # the store says there is one; reading it fails
    assert (_ranks(restarted), _ranks(restarted, **OTHER)) == expected
    assert LexicalSnapshot.from_bytes(_stored(restarted) or b"")  # and a good one replaced it


def test_evicted_partitions_rebuilt_from_snapshots_open_no_connection_each(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    for name in ("Ann", "Bo", "Cy"):
        bank.add_turn(name, f"{name} went hiking near the lake.", "How lovely!", at="2023-05-01T10:00")
        bank.add_turn(name, f"{name} baked a cherry pie.", "Yum!", at="2023-05-02T10:00")
        bank.search(name, "hiking", k=2)  # builds the partition and stores its snapshot
    restarted = make_bank()
    restarted._cache.max_users = 1  # every search below evicts the previous user's partition
    expected = {name: [h.memory.memory_id for h in bank.search(name, "pie", k=2)] for name in ("Ann", "Bo", "Cy")}
    for _ in range(10):
        for name in ("Ann", "Bo", "Cy"):
            assert [h.memory.memory_id for h in restarted.search(name, "pie", k=2)] == expected[name]
    conns = getattr(restarted.storage, "_all_conns", None)
    if conns is not None:  # SQLite keeps one connection per thread that read: this one, the readers
        assert len(conns) <= 1 + READER_THREADS
    restarted.close()
    assert restarted._cache._snapshot_reader is None


def test_a_snapshot_that_parses_but_does_not_fit_together_is_rebuilt(make_bank) -> None:  # type: ignore[no-untyped-def]
    """Arrays that disagree (a writer's bug, a row edited by hand) made every search of the user
    fail on an index out of range, or rank with another memory's postings, and the failing build
    never replaced them: they are refused like garbage."""
    bank = make_bank()
    _fill(bank)
    expected = _ranks(bank)
    uid = bank.user("Ann").id
    epoch = bank._cache.get(uid).epoch
    good = LexicalSnapshot.from_bytes(_stored(bank) or b"")
    damaged = {
        "lengths": good.lengths[:-3],
        "unanswered": good.unanswered[:-1],
        "pos": good.pos + 1000,
        "starts": good.starts[::-1].copy(),
        "rowids": np.concatenate([good.rowids[:1], good.rowids[:-1]]),
        "user_starts": good.user_starts + 1,
    }
    for field, value in damaged.items():
        data = dataclasses.replace(good, **{field: value}).to_bytes()
        with pytest.raises(ValueError, match="not a lexical snapshot"):
            LexicalSnapshot.from_bytes(data)
        assert bank.storage.put_lexical_snapshot(uid, bank.encoder_name, TOKENIZER_VERSION, epoch, data)
        assert _ranks(make_bank()) == expected, field


def test_a_snapshot_of_another_tokenizer_is_not_used(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    expected = _ranks(bank)
    import memory_bank.bank as bank_module

    monkeypatch.setattr(bank_module, "TOKENIZER_VERSION", TOKENIZER_VERSION + "-next")
    later = make_bank()
    assert later._load_snapshot(later.user("Ann").id) is None
    assert _ranks(later) == expected  # rebuilt from the texts, then stored under the new version
    assert later.storage.lexical_snapshot(later.user("Ann").id, later.encoder_name, TOKENIZER_VERSION + "-next")


def test_a_stale_snapshot_is_refused_when_the_epoch_moved(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    _fill(bank)
    part = bank._cache.get(bank.user("Ann").id)
    snap = part.lexical_snapshot()
    uid = bank.user("Ann").id
    bank.storage.delete_memories(uid, [int(part.rowids[0])])  # another server deletes meanwhile
    assert not bank.storage.put_lexical_snapshot(uid, bank.encoder_name, TOKENIZER_VERSION, part.epoch, snap.to_bytes())
    assert _stored(bank) is None


def test_snapshot_bytes_round_trip_and_garbage_is_refused() -> None:
    from memory_bank.index import Partition
    from memory_bank.stores import VectorBatch

    part = Partition(4)
    texts = ["Anna went hiking?", "Tom baked a pie", "我的猫叫米索吗", "hiking hiking again"]
    vecs = np.eye(4, dtype=np.float32)
    part.add(VectorBatch(np.arange(1, 5), vecs, texts, ["turn"] * 4, ["2023-05-01"] * 4, [0, 1, 2, 3],
                         texts, ["ok?", "ok", "嗯", "yes"]))  # fmt: skip
    snap = LexicalSnapshot.from_bytes(part.lexical_snapshot().to_bytes())
    assert snap.vocab == list(part.lexical._vocab) and snap.rowids.tolist() == [1, 2, 3, 4]
    kept = snap.restricted(np.array([1, 3, 4]))
    assert kept is not None and kept.lengths.tolist() == [snap.lengths[0], snap.lengths[2], snap.lengths[3]]
    assert snap.restricted(np.array([1, 9])) is None  # a memory the snapshot does not know
    with pytest.raises(ValueError, match="not a lexical snapshot"):
        LexicalSnapshot.from_bytes(b"\x80\x04not an npz")


def test_a_version_3_store_gains_the_snapshot_table(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sqlite3

    from memory_bank.stores import SCHEMA_VERSION
    from memory_bank.stores.sqlite import DB_FILENAME

    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64))
    _fill(bank)
    bank.close()
    db = sqlite3.connect(tmp_path / "s" / DB_FILENAME)  # the version 3 layout
    db.executescript(
        UNDO_SCHEMA_6 + "DROP TABLE lexical_snapshots; ALTER TABLE memories DROP COLUMN hidden; "
        "UPDATE meta SET value = '3' WHERE key = 'schema_version';"
    )
    db.close()
    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64))
    assert [h.memory.text.split(" (")[0] for h in bank.search("Ann", "Jay Chou", k=1)] == ["Jay Chou's!"]
    assert _stored(bank) is not None and len(bank.history("Ann")) == 60
    bank.close()
    db = sqlite3.connect(tmp_path / "s" / DB_FILENAME)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    db.close()


def test_damaged_or_foreign_archives_are_refused_and_a_good_one_is_read_in_place() -> None:
    """The snapshot is read as views of the stored bytes (no copy): a flipped bit anywhere in an
    array (the CRC), a truncated or compressed archive, and an object array (a pickle) are
    refused; a good one gives arrays that share the stored bytes and cannot be written."""
    import io
    import zipfile

    from memory_bank.index import Partition
    from memory_bank.stores import VectorBatch

    part = Partition(4)
    texts = ["Anna went hiking?", "Tom baked a pie", "我的猫叫米索吗", "hiking hiking again"]
    part.add(VectorBatch(np.arange(1, 5), np.eye(4, dtype=np.float32), texts, ["turn"] * 4,
                         ["2023-05-01"] * 4, [0, 1, 2, 3], texts, ["ok?", "ok", "嗯", "yes"]))  # fmt: skip
    data = part.lexical_snapshot().to_bytes()
    snap = LexicalSnapshot.from_bytes(data)
    assert np.shares_memory(snap.pos, np.frombuffer(data, dtype=np.uint8)) and not snap.pos.flags.writeable
    at = data.index(snap.tf.tobytes())  # a term frequency, inside its member
    flipped = data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]
    for bad in (flipped, data[: len(data) // 2], data[:-30]):
        with pytest.raises(ValueError, match="not a lexical snapshot"):
            LexicalSnapshot.from_bytes(bad)
    with np.load(io.BytesIO(data)) as z:
        arrays = {k: z[k] for k in z.files}
    squeezed = io.BytesIO()
    np.savez_compressed(squeezed, **arrays)  # type: ignore[arg-type]
    pickled = io.BytesIO()
    with zipfile.ZipFile(pickled, "w") as archive:
        for name, value in {**arrays, "vocab": np.array(["a"], dtype=object)}.items():
            with archive.open(name + ".npy", "w") as member:
                np.lib.format.write_array(member, value, allow_pickle=True)
    for bad in (squeezed.getvalue(), pickled.getvalue()):
        with pytest.raises(ValueError, match="not a lexical snapshot"):
            LexicalSnapshot.from_bytes(bad)


def _stored_rowids(bank: MemoryBank) -> list[int]:
    data = _stored(bank)
    return [] if data is None else LexicalSnapshot.from_bytes(data).rowids.tolist()


def test_a_restart_stores_a_new_snapshot_once_the_gap_reaches_its_cap(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A tenth of a large user is many memories to tokenise at every restart: the gap since the
    stored snapshot is also capped (SNAPSHOT_GAP), whatever the user's size."""
    monkeypatch.setattr(index_module, "SNAPSHOT_GAP", 3)
    bank = make_bank()
    _fill(bank)  # 60 turns
    _ranks(bank)  # the first build stores a snapshot of all 60
    first = _stored_rowids(bank)
    assert len(first) == 60
    for i in range(2):
        bank.add_turn("Ann", f"A walk by the river ({i})", "Nice.", at="2023-05-21T10:00")
    _ranks(make_bank())  # 2 to tokenise: under the cap, nothing stored
    assert _stored_rowids(bank) == first
    bank.add_turn("Ann", "Another walk", "Nice.", at="2023-05-21T11:00")
    restarted = make_bank()
    _ranks(restarted)  # 3 (the cap; a tenth of 63 would be 6): a new snapshot of all 63
    assert len(_stored_rowids(bank)) == 63


def test_a_large_partitions_snapshot_is_stored_beside_the_search(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """From SAVE_BESIDE_FROM memories the new snapshot is stored on the cache's writer thread; a
    close waits for it, and a restart then reads it without tokenising."""
    monkeypatch.setattr(index_module, "SAVE_BESIDE_FROM", 1)
    _fill(make_bank())
    first = make_bank()
    expected = _ranks(first)
    assert first._cache._snapshot_writer is not None  # stored on the writer thread
    first.close()
    assert len(_stored_rowids(first)) == 60
    restarted = make_bank()

    def no_tokenising(*_: Any) -> None:
        raise AssertionError("a partition with a snapshot tokenised its memories again")

    monkeypatch.setattr(index_module.LexicalIndex, "add", no_tokenising)
    assert _ranks(restarted) == expected


def test_a_snapshot_queued_before_a_delete_is_never_stored(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The snapshot is taken when the partition is built and stored later: a memory deleted in
    between must not come back in the store through it (its words are personal data)."""
    import threading

    monkeypatch.setattr(index_module, "SAVE_BESIDE_FROM", 1)
    _fill(make_bank())
    bank = make_bank()
    bank.add_turn("Ann", "the alarm code is zebra4471", "noted", at="2023-05-30T10:00")
    gate = threading.Event()
    held = bank._cache.writer().submit(gate.wait, 30)  # the writer is busy: the snapshot waits
    try:
        hits = bank.search("Ann", "alarm code zebra4471", k=1)  # builds, takes the snapshot, queues it
        assert hits and "zebra4471" in hits[0].memory.text
        bank.delete_memory("Ann", hits[0].memory.memory_id)
    finally:
        gate.set()
        held.result()
    bank.close()  # the queued snapshot has been offered to the store by now
    data = _stored(make_bank())
    assert data is None or not {"zebra", "4471"} & set(LexicalSnapshot.from_bytes(data).vocab)
    assert all("zebra4471" not in r.memory.text for r in make_bank().search("Ann", "alarm code zebra4471", k=3))


def test_queued_snapshots_stay_few_however_often_large_users_are_rebuilt(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With a cache of one user, two users searched in turn are rebuilt on every search, each
    taking a new snapshot (the first is not stored yet): a newer one replaces its user's waiting
    one, and no more than MAX_PENDING_SAVES wait (each holds a whole partition's arrays)."""
    import threading

    monkeypatch.setattr(index_module, "SAVE_BESIDE_FROM", 1)
    seed = make_bank()
    _fill(seed)
    seed.add_turn("Bob", "Bob plays chess on Sundays", "ok", at="2023-05-02T10:00")
    seed.close()
    stored: list[int] = []
    real = index_module._save

    def counted(snapshots, user_id, epoch, snap):  # type: ignore[no-untyped-def]
        stored.append(user_id)
        real(snapshots, user_id, epoch, snap)

    monkeypatch.setattr(index_module, "_save", counted)
    bank = make_bank(max_cached_users=1)
    gate = threading.Event()
    held = bank._cache.writer().submit(gate.wait, 30)
    try:
        for _ in range(6):
            bank.search("Ann", "hiking", k=1)
            bank.search("Bob", "chess", k=1)
            assert len(bank._cache._pending_saves) <= index_module.MAX_PENDING_SAVES
    finally:
        gate.set()
        held.result()
    bank.close()
    assert sorted(stored) == sorted({bank.user("Ann").id, bank.user("Bob").id})  # one each, the newest
    assert len(_stored_rowids(make_bank())) == 60


def test_a_build_after_close_stores_its_snapshot_itself(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """No write lands after close() returned: a build racing the close (or after it) stores its
    snapshot on its own thread."""
    monkeypatch.setattr(index_module, "SAVE_BESIDE_FROM", 1)
    _fill(make_bank())
    bank = make_bank()
    bank.close()
    _ranks(bank)  # the bank still answers after close: it rebuilds, and stores in line
    assert bank._cache._snapshot_writer is None
    assert len(_stored_rowids(make_bank())) == 60
    with pytest.raises(RuntimeError, match="closed"):
        bank._cache.writer()


def test_a_snapshot_write_racing_an_edit_never_stores_the_old_words(make_bank, stores, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """PostgreSQL: the writer checks the user's epoch, then inserts. An edit committing between
    the two would not see the insert to delete it; the user's row is locked by the check, so the
    edit waits for the write and then deletes it (or the write sees the new epoch)."""
    import threading

    if stores.backend != "postgres":
        pytest.skip("SQLite serialises all writers with one database lock")
    import memory_bank.stores.postgres as pg

    monkeypatch.setattr(index_module, "SAVE_BESIDE_FROM", 1)
    seed = make_bank()
    _fill(seed)
    seed.add_turn("Ann", "the alarm code is zebra4471", "noted", at="2023-05-30T10:00")
    seed.close()
    bank = make_bank()
    checked, go = threading.Event(), threading.Event()
    real = pg._Cursor.execute

    def execute(self, sql, parameters=(), /):  # type: ignore[no-untyped-def]
        out = real(self, sql, parameters)
        if "SELECT epoch FROM users" in str(sql) and threading.current_thread().name.startswith(
            "memorybank-snapshot-writer"
        ):
            checked.set()
            go.wait(20)  # widen the window between the check and the insert
        return out

    monkeypatch.setattr(pg._Cursor, "execute", execute)
    hit = bank.search("Ann", "alarm code zebra4471", k=1)[0]
    assert "zebra4471" in hit.memory.text and checked.wait(20)
    edit = threading.Thread(target=bank.update_memory, args=("Ann", hit.memory.memory_id), kwargs={"text": "I like blue tulips"})
    edit.start()
    edit.join(1)
    go.set()
    edit.join(30)
    bank.close()
    monkeypatch.setattr(pg._Cursor, "execute", real)
    data = _stored(make_bank())
    assert data is None or not {"zebra", "4471"} & set(LexicalSnapshot.from_bytes(data).vocab)
