"""Every method of the Storage interface, on SQLite and on PostgreSQL, with the same expectations."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading

import numpy as np
import pytest

from memory_bank import InvalidInputError, Memory, MemoryKind, StoreError, UserNotFoundError
from memory_bank.errors import MemoryNotFoundError
from memory_bank.stores import Storage

ENC = "enc-4"
TURN_KINDS = (MemoryKind.TURN, MemoryKind.DAILY_SUMMARY)


def vec(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def turn(user: str, date: str, text: str, **kw) -> Memory:  # type: ignore[no-untyped-def]
    return Memory(memory_id=f"{user}_{date}_{{turn}}", user=user, kind=MemoryKind.TURN, date=date, text=text,
                  query=text, response="", **kw)


def full_memory(i: int) -> Memory:
    """A memory with every field set to something other than its default."""
    return Memory(
        memory_id=f"Ann_2023-05-0{i}_0", user="Ann", kind=MemoryKind.TURN, date=f"2023-05-0{i}", turn=0,
        text=f"q{i} é 漢字\nr{i}", query=f"q{i} é 漢字", response=f"r{i}", timestamp=f"2023-05-0{i}T10:11:12",
        strength=3 + i, last_recall_date="2023-06-01", archived=i % 2 == 0, stale=True,
        extra={"shape": "dict", "other": {"mood": "happy", "zeta": [1, {"a": None}], "alpha": "\u0000ok"}},
        context=f"previous reply {i}",
    )


def test_users(storage: Storage) -> None:
    assert storage.get_user("Ann") is None
    ann = storage.ensure_user("Ann", {"file_key": " Ann ", "tags": ["x"]})
    assert storage.ensure_user("Ann").id == ann.id  # idempotent; keeps the first extra
    bob = storage.ensure_user("Bob")
    assert (ann.name, ann.extra, ann.last_forget_date) == ("Ann", {"file_key": " Ann ", "tags": ["x"]}, None)
    assert [u.name for u in storage.list_users()] == ["Ann", "Bob"]
    storage.set_user_extra(ann.id, {"name": "Ann Lee", "姓名": "安"})
    storage.set_forget_date(ann.id, "2023-05-04")
    got = storage.get_user("Ann")
    assert got is not None and got.extra == {"name": "Ann Lee", "姓名": "安"} and got.last_forget_date == "2023-05-04"
    assert storage.user_state(bob.id) == (0, 0)
    assert storage.delete_user(bob.id) == 0
    with pytest.raises(UserNotFoundError):
        storage.user_state(bob.id)
    assert storage.memories(bob.id) == []


def test_add_turn_numbers_turns_per_day_and_stores_the_vector(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    a = storage.add_turn(u, turn("Ann", "2023-05-01", "a"), vec(1, 0, 0, 0), ENC)
    b = storage.add_turn(u, turn("Ann", "2023-05-01", "b", context="ctx"), vec(0, 1, 0, 0), ENC)
    c = storage.add_turn(u, turn("Ann", "2023-05-02", "c"), None, ENC)
    assert (a.turn, b.turn, c.turn) == (0, 1, 0)
    assert (a.memory_id, b.memory_id, c.memory_id) == ("Ann_2023-05-01_0", "Ann_2023-05-01_1", "Ann_2023-05-02_0")
    assert a.rowid and b.rowid and c.rowid and a.rowid < b.rowid < c.rowid
    last = storage.last_turn(u, "2023-05-01")
    assert last is not None and last.memory_id == b.memory_id and last.context == "ctx"
    assert storage.last_turn(u, "2023-05-09") is None
    batch = storage.vectors(u, ENC, TURN_KINDS)
    assert batch.rowids.tolist() == [a.rowid, b.rowid]  # c has no vector
    np.testing.assert_array_equal(batch.vectors, np.stack([vec(1, 0, 0, 0), vec(0, 1, 0, 0)]))
    assert batch.texts == ["a", "ctx\nb"] and batch.kinds == ["turn", "turn"]
    assert batch.dates == ["2023-05-01"] * 2 and batch.turns == [0, 1]
    assert storage.vectors(u, ENC, TURN_KINDS, after_rowid=a.rowid).rowids.tolist() == [b.rowid]
    assert len(storage.vectors(u, "other-encoder", TURN_KINDS).rowids) == 0
    assert len(storage.vectors(u, ENC, [MemoryKind.DAILY_SUMMARY]).rowids) == 0
    assert storage.user_state(u) == (3, 0)  # three appends: version only


def test_add_turn_for_a_deleted_user_fails_and_writes_nothing(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    storage.delete_user(u)
    with pytest.raises((UserNotFoundError, sqlite3.IntegrityError)):
        storage.add_turn(u, turn("Ann", "2023-05-01", "a"), vec(1, 0, 0, 0), ENC)
    assert storage.counts()["memories"]["turn"] == 0


def test_add_memories_keeps_every_field(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    mems = [full_memory(i) for i in (1, 2, 3)]
    rowids = storage.add_memories(u, mems, np.stack([vec(1, i, 0, 0) for i in (1, 2, 3)]), ENC)
    assert rowids == [m.rowid for m in mems] and len(set(rowids)) == 3
    got = storage.memories(u)
    assert [g.rowid for g in got] == rowids
    for g, i in zip(got, (1, 2, 3), strict=True):
        want = full_memory(i)
        want.rowid = g.rowid
        assert g == want
    assert storage.vectors(u, ENC, TURN_KINDS).rowids.tolist() == [rowids[0], rowids[2]]  # 2 is archived
    assert storage.add_memories(u, [], None, ENC) == []


def test_memories_filters_and_order(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    other = storage.ensure_user("Bob").id
    day = Memory(memory_id="Ann_2023-05-01_summary", user="Ann", kind=MemoryKind.DAILY_SUMMARY,
                 date="2023-05-01", text="summary")
    glob = Memory(memory_id="Ann_overall_history", user="Ann", kind=MemoryKind.GLOBAL_SUMMARY,
                  date="2023-05-09", text="global")
    storage.add_memories(u, [day, glob], None, ENC)
    t1 = storage.add_turn(u, turn("Ann", "2023-05-01", "t0"), None, ENC)
    t2 = storage.add_turn(u, turn("Ann", "2023-05-01", "t1"), None, ENC)
    storage.add_turn(other, turn("Bob", "2023-05-01", "bob"), None, ENC)
    storage.set_archived(u, [t2.rowid or 0], True)
    ids = [m.memory_id for m in storage.memories(u)]
    assert ids == ["Ann_2023-05-01_0", "Ann_2023-05-01_1", "Ann_2023-05-01_summary", "Ann_overall_history"]
    assert [m.memory_id for m in storage.memories(u, kinds=[MemoryKind.TURN])] == ids[:2]
    assert [m.memory_id for m in storage.memories(u, include_archived=False)] == [ids[0], *ids[2:]]
    assert [m.memory_id for m in storage.memories(u, rowids=[t1.rowid or 0, t2.rowid or 0])] == ids[:2]
    assert storage.memories(u, rowids=[]) == []
    assert all(m.user == "Ann" for m in storage.memories(u))
    assert storage.memories(other, rowids=[t1.rowid or 0]) == []  # another user's rowid


def test_upsert_replaces_by_id_and_keeps_strength(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    layer = Memory(memory_id="Ann_2023-05-01_summary", user="Ann", kind=MemoryKind.DAILY_SUMMARY,
                   date="2023-05-01", text="v1")
    first = storage.upsert_memory(u, layer, vec(1, 0, 0, 0), ENC)
    assert storage.user_state(u) == (1, 0)  # an insert is an append
    storage.reinforce(u, [(first.rowid or 0, first.memory_id)], "2023-05-03")
    again = Memory(memory_id=layer.memory_id, user="Ann", kind=MemoryKind.DAILY_SUMMARY, date="2023-05-01",
                   text="v2", stale=False, extra={"k": 1})
    second = storage.upsert_memory(u, again, None, ENC)
    assert second.rowid == first.rowid and second.strength == 2 and second.last_recall_date == "2023-05-03"
    assert storage.user_state(u) == (2, 1)  # a rewrite changes the epoch
    (stored,) = storage.memories(u)
    assert (stored.text, stored.extra, stored.strength) == ("v2", {"k": 1}, 2)
    assert len(storage.vectors(u, ENC, TURN_KINDS).rowids) == 0  # the old text's vector is gone
    storage.upsert_memory(u, again, vec(0, 0, 1, 0), ENC)
    assert storage.vectors(u, ENC, TURN_KINDS).rowids.tolist() == [first.rowid]


def test_missing_and_put_vectors(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    a = storage.add_turn(u, turn("Ann", "2023-05-01", "a", context="c"), vec(1, 0, 0, 0), "old")
    b = storage.add_turn(u, turn("Ann", "2023-05-01", "b"), None, "old")
    assert storage.missing_vectors(ENC, TURN_KINDS) == [(a.rowid, "c\na"), (b.rowid, "b")]
    assert storage.missing_vectors("old", TURN_KINDS) == [(b.rowid, "b")]
    version, epoch = storage.user_state(u)
    storage.put_vectors([a.rowid or 0, b.rowid or 0], np.stack([vec(0, 1, 0, 0), vec(0, 0, 1, 0)]), ENC)
    assert storage.user_state(u) == (version + 1, epoch + 1)
    assert storage.missing_vectors(ENC, TURN_KINDS) == []
    np.testing.assert_array_equal(storage.vectors(u, ENC, TURN_KINDS).vectors[1], vec(0, 0, 1, 0))


def test_reinforce_set_archived_mark_stale(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    other = storage.ensure_user("Bob").id
    a = storage.add_turn(u, turn("Ann", "2023-05-01", "a"), vec(1, 0, 0, 0), ENC)
    b = storage.add_turn(other, turn("Bob", "2023-05-01", "b"), vec(1, 0, 0, 0), ENC)
    ka, kb = (a.rowid or 0, a.memory_id), (b.rowid or 0, b.memory_id)
    storage.reinforce(u, [ka], "2023-05-02")
    storage.reinforce(u, [ka, ka], "2023-05-03")  # listed twice: one recall
    storage.reinforce(u, [ka], "2023-05-03")  # again the same day: at most once a day
    storage.reinforce(u, [kb], "2023-05-03")  # not Ann's: ignored
    storage.reinforce(u, [(a.rowid or 0, "Ann_2023-05-01_9")], "2023-05-04")  # no longer that memory's row
    storage.reinforce(u, [], "2023-05-04")
    (m,) = storage.memories(u)
    assert (m.strength, m.last_recall_date) == (3, "2023-05-03")
    assert storage.memories(other)[0].strength == 1
    v, e, tiers = storage.user_counters(u)
    storage.set_archived(u, [a.rowid or 0], True)  # a tier move: the tier counter, not the epoch
    assert storage.memories(u)[0].archived and storage.user_counters(u) == (v + 1, e, tiers + 1)
    assert len(storage.vectors(u, ENC, TURN_KINDS).rowids) == 0
    assert storage.vectors(u, ENC, TURN_KINDS, archived=None).rowids.tolist() == [a.rowid]
    storage.set_archived(u, [a.rowid or 0], False)
    assert storage.vectors(u, ENC, TURN_KINDS).rowids.tolist() == [a.rowid]
    assert storage.user_counters(u) == (v + 2, e, tiers + 2)
    storage.set_archived(u, [a.rowid or 0], True, hidden=True)  # hiding changes what is indexed
    assert storage.user_counters(u) == (v + 3, e + 1, tiers + 2)
    assert len(storage.vectors(u, ENC, TURN_KINDS, archived=None).rowids) == 0
    storage.set_archived(u, [a.rowid or 0], False)  # and so does showing it again
    assert storage.user_counters(u) == (v + 4, e + 2, tiers + 2)
    storage.set_archived(u, [a.rowid or 0], True)
    storage.reinforce(u, [], "2023-05-04", revived=[(a.rowid or 0, "Ann_2023-05-01_9")])  # another memory's
    assert storage.memories(u)[0].archived
    storage.reinforce(u, [ka], "2023-05-04", revived=[ka])  # recalled from the cold tier: live again
    (m,) = storage.memories(u)
    assert (m.archived, m.strength) == (False, 4) and storage.user_counters(u) == (v + 7, e + 2, tiers + 5)
    storage.set_archived(u, [a.rowid or 0], True, hidden=True)
    storage.reinforce(u, [], "2023-05-05", revived=[ka])  # what the user hid stays hidden
    assert storage.memories(u)[0].hidden
    s1 = Memory(memory_id="s1", user="Ann", kind=MemoryKind.DAILY_SUMMARY, date="2023-05-01", text="x")
    s2 = Memory(memory_id="s2", user="Ann", kind=MemoryKind.DAILY_SUMMARY, date="2023-05-02", text="y")
    storage.add_memories(u, [s1, s2], None, ENC)
    assert storage.mark_stale(u, [MemoryKind.DAILY_SUMMARY], []) == 0
    assert storage.mark_stale(u, [MemoryKind.DAILY_SUMMARY], ["2023-05-02"]) == 1
    assert {m.memory_id: m.stale for m in storage.memories(u, kinds=[MemoryKind.DAILY_SUMMARY])} == {
        "s1": False, "s2": True}
    assert storage.mark_stale(u, [MemoryKind.DAILY_SUMMARY, MemoryKind.TURN], None) == 3


def test_delete_memories_scrubs_layers_in_the_same_transaction(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    other = storage.ensure_user("Bob").id
    t = storage.add_turn(u, turn("Ann", "2023-05-01", "PIN 4321"), vec(1, 0, 0, 0), ENC)
    keep = storage.add_turn(u, turn("Ann", "2023-05-02", "tea"), vec(0, 1, 0, 0), ENC)
    bob = storage.add_turn(other, turn("Bob", "2023-05-01", "bob"), vec(0, 1, 0, 0), ENC)
    layers = [
        Memory(memory_id="d1", user="Ann", kind=MemoryKind.DAILY_SUMMARY, date="2023-05-01", text="PIN 4321"),
        Memory(memory_id="p1", user="Ann", kind=MemoryKind.DAILY_PERSONALITY, date="2023-05-01", text="PIN"),
        Memory(memory_id="d2", user="Ann", kind=MemoryKind.DAILY_SUMMARY, date="2023-05-02", text="tea"),
        Memory(memory_id="g", user="Ann", kind=MemoryKind.GLOBAL_SUMMARY, date="2023-05-02", text="PIN, tea"),
    ]
    storage.add_memories(u, layers, np.stack([vec(0, 0, 1, i) for i in range(4)]), ENC)
    v, e = storage.user_state(u)
    assert storage.delete_memories(u, [t.rowid or 0, bob.rowid or 0], scrub_dates=["2023-05-01"]) == 1
    assert storage.user_state(u) == (v + 1, e + 1)
    by_id = {m.memory_id: m for m in storage.memories(u)}
    assert t.memory_id not in by_id and keep.memory_id in by_id
    assert [(by_id[k].text, by_id[k].stale) for k in ("d1", "p1", "g")] == [("", True)] * 3
    assert (by_id["d2"].text, by_id["d2"].stale) == ("tea", False)
    assert "4321" not in str(storage.vectors(u, ENC, list(MemoryKind)).texts)
    assert len(storage.memories(other)) == 1  # Bob's rowid was not Ann's to delete
    assert storage.delete_memories(u, []) == 0
    c = storage.counts()
    assert c["users"] == 2 and c["memories"]["turn"] == 2 and c["memories"]["daily_summary"] == 2


def test_upsert_memory_scrubs_layers_in_the_same_transaction(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    other = storage.ensure_user("Bob").id
    t = storage.add_turn(u, turn("Ann", "2023-05-01", "PIN 4321"), vec(1, 0, 0, 0), ENC)
    layers = [
        Memory(memory_id="d1", user="Ann", kind=MemoryKind.DAILY_SUMMARY, date="2023-05-01", text="PIN 4321"),
        Memory(memory_id="d2", user="Ann", kind=MemoryKind.DAILY_SUMMARY, date="2023-05-02", text="tea"),
        Memory(memory_id="g", user="Ann", kind=MemoryKind.GLOBAL_PORTRAIT, date="2023-05-02", text="PIN 4321"),
    ]
    storage.add_memories(u, layers, np.stack([vec(0, 0, 1, i) for i in range(3)]), ENC)
    storage.add_memories(other, [dataclasses.replace(layers[2], user="Bob")], None, ENC)
    v, e = storage.user_state(u)
    edited = dataclasses.replace(t, text="a new PIN", query="a new PIN", response="")
    storage.upsert_memory(u, edited, vec(0, 1, 0, 0), ENC, scrub_dates=["2023-05-01"])
    assert storage.user_state(u) == (v + 1, e + 1)  # one write
    by_id = {m.memory_id: m for m in storage.memories(u)}
    assert by_id[t.memory_id].text == "a new PIN"
    assert [(by_id[k].text, by_id[k].stale) for k in ("d1", "g")] == [("", True)] * 2
    assert (by_id["d2"].text, by_id["d2"].stale) == ("tea", False)
    assert "4321" not in str(storage.vectors(u, ENC, list(MemoryKind)).texts)
    assert storage.memories(other)[0].text == "PIN 4321"  # Bob's layers are his own


def test_delete_user_removes_memories_and_vectors(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    other = storage.ensure_user("Bob").id
    storage.add_turn(u, turn("Ann", "2023-05-01", "a"), vec(1, 0, 0, 0), ENC)
    storage.add_turn(u, turn("Ann", "2023-05-01", "b"), vec(1, 0, 0, 0), ENC)
    storage.add_turn(other, turn("Bob", "2023-05-01", "b"), vec(1, 0, 0, 0), ENC)
    assert storage.delete_user(u) == 2
    assert storage.get_user("Ann") is None and storage.missing_vectors("x", TURN_KINDS) == [
        (storage.memories(other)[0].rowid, "b")]
    assert storage.counts() == {"users": 1, "memories": {"turn": 1, "daily_summary": 0, "daily_personality": 0,
                                                         "global_summary": 0, "global_portrait": 0}, "archived": 0}


def test_a_failed_write_leaves_nothing_behind(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    storage.add_memories(u, [full_memory(1)], None, ENC)
    state = storage.user_state(u)
    clash = full_memory(1)
    clash.text = "different content under the same id"
    with pytest.raises((InvalidInputError, sqlite3.IntegrityError)):
        storage.add_memories(u, [full_memory(2), clash], np.stack([vec(1, 0, 0, 0), vec(0, 1, 0, 0)]), ENC)
    assert [m.memory_id for m in storage.memories(u)] == ["Ann_2023-05-01_0"]  # full_memory(2) rolled back
    assert storage.user_state(u) == state and storage.missing_vectors(ENC, TURN_KINDS) == [
        (storage.memories(u)[0].rowid, "previous reply 1\n" + full_memory(1).text)]


def test_snapshot_reads_one_state_while_another_server_writes(stores) -> None:  # type: ignore[no-untyped-def]
    reader, writer = stores(), stores()
    u = writer.ensure_user("Ann").id
    writer.add_turn(u, turn("Ann", "2023-05-01", "a"), None, ENC)
    with reader.snapshot():
        before = reader.counts()
        t = threading.Thread(target=writer.add_turn, args=(u, turn("Ann", "2023-05-01", "b"), None, ENC))
        t.start()
        t.join()
        assert reader.counts() == before and len(reader.memories(u)) == 1
        with reader.snapshot():  # nested: the same snapshot
            assert len(reader.memories(u)) == 1
    assert len(reader.memories(u)) == 2


def test_schema_version_is_recorded_and_a_newer_one_refused(stores) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.stores import SCHEMA_VERSION

    s = stores()
    s.close()
    if stores.backend == "sqlite":
        db = sqlite3.connect(f"{stores.spec}/memorybank.sqlite3")
        assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        db.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
        db.commit()
        db.close()
    else:
        import psycopg

        with psycopg.connect(stores.url, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{stores.schema}"')
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            assert row is not None and row[0] == str(SCHEMA_VERSION)
            conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="newer than this package supports"):
        stores()


def test_both_backends_have_the_same_migrations() -> None:
    """Bumping SCHEMA_VERSION needs a migration in each dialect (and a current _SCHEMA in each)."""
    from memory_bank.stores import SCHEMA_VERSION, postgres, sqlite

    assert set(postgres.PostgresStorage.MIGRATIONS) == set(sqlite.SQLiteStorage.MIGRATIONS)
    assert all(v < SCHEMA_VERSION for v in postgres.PostgresStorage.MIGRATIONS)


def test_lookups_by_memory_id_and_by_date(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    other = storage.ensure_user("Bob").id
    t0 = storage.add_turn(u, turn("Ann", "2023-05-01", "t0"), None, ENC)
    t1 = storage.add_turn(u, turn("Ann", "2023-05-01", "t1"), None, ENC)
    t2 = storage.add_turn(u, turn("Ann", "2023-05-02", "t2"), None, ENC)
    bob = storage.add_turn(other, turn("Bob", "2023-05-01", "bob"), None, ENC)
    day = Memory(memory_id="Ann_2023-05-01_summary", user="Ann", kind=MemoryKind.DAILY_SUMMARY,
                 date="2023-05-01", text="summary")
    storage.add_memories(u, [day], None, ENC)
    storage.set_archived(u, [t1.rowid or 0], True)
    got = storage.get_memory(u, t1.memory_id)
    assert got is not None and (got.rowid, got.text, got.archived, got.user) == (t1.rowid, "t1", True, "Ann")
    assert storage.get_memory(u, "no-such-id") is None
    assert storage.get_memory(u, bob.memory_id) is None  # another user's id
    found = storage.memories_by_ids(u, [t2.memory_id, t0.memory_id, "missing", t0.memory_id, bob.memory_id])
    assert [m.memory_id for m in found] == [t0.memory_id, t2.memory_id]  # memories() order, once each
    assert storage.memories_by_ids(u, []) == []
    by_day = storage.memories(u, date="2023-05-01")
    assert [m.memory_id for m in by_day] == [t0.memory_id, t1.memory_id, day.memory_id]
    turns = storage.memories(u, kinds=[MemoryKind.TURN], include_archived=False, date="2023-05-01")
    assert [m.memory_id for m in turns] == [t0.memory_id]
    assert storage.memories(u, date="2023-06-01") == []


def test_a_forgetting_pass_write_keeps_memories_recalled_or_stored_since_its_day(storage: Storage) -> None:
    """A pass decides from columns read before it writes; what was recalled (or stored under a
    reused rowid) on or after the pass's day since then has retention 1 and must stay."""
    u = storage.ensure_user("Ann").id
    old = storage.add_turn(u, turn("Ann", "2023-05-01", "old"), vec(1, 0, 0, 0), ENC)
    recalled = storage.add_turn(u, turn("Ann", "2023-05-01", "recalled"), vec(0, 1, 0, 0), ENC)
    new = storage.add_turn(u, turn("Ann", "2023-05-10", "new"), vec(0, 0, 1, 0), ENC)
    storage.reinforce(u, [(recalled.rowid or 0, recalled.memory_id)], "2023-05-10")
    everything = [m.rowid or 0 for m in (old, recalled, new)]
    storage.set_archived(u, everything, True, anchored_before="2023-05-10")
    assert {m.text: m.archived for m in storage.memories(u)} == {"old": True, "recalled": False, "new": False}
    storage.set_archived(u, everything, False)
    assert storage.delete_memories(u, everything, anchored_before="2023-05-10") == 1
    assert sorted(m.text for m in storage.memories(u)) == ["new", "recalled"]


def test_delete_archived_removes_only_archived_rows_and_vectors(storage: Storage) -> None:
    u = storage.ensure_user("Ann").id
    other = storage.ensure_user("Bob").id
    keep = storage.add_turn(u, turn("Ann", "2023-05-01", "keep"), vec(1, 0, 0, 0), ENC)
    gone = storage.add_turn(u, turn("Ann", "2023-05-01", "gone"), vec(0, 1, 0, 0), ENC)
    bob = storage.add_turn(other, turn("Bob", "2023-05-01", "bob"), vec(0, 1, 0, 0), ENC)
    storage.set_archived(other, [bob.rowid or 0], True)
    v, e = storage.user_state(u)
    assert storage.delete_archived(u) == 0 and storage.user_state(u) == (v, e)  # nothing archived: no change
    storage.set_archived(u, [gone.rowid or 0], True)
    v, e = storage.user_state(u)
    assert storage.delete_archived(u) == 1
    assert storage.user_state(u) == (v + 1, e + 1)
    assert [m.memory_id for m in storage.memories(u)] == [keep.memory_id]
    assert set(storage.embeddings(u)) == {keep.rowid}
    assert len(storage.memories(other)) == 1  # Bob's archived turn is his own
    storage.delete_user(other)
    assert storage.delete_archived(other) == 0


def test_memory_ids_are_never_reused_after_a_delete(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    bank.add_turn("Ann", "first", "ok", at="2023-05-01T10:00")
    last = bank.add_turn("Ann", "second", "ok", at="2023-05-01T11:00")
    bank.delete_memory("Ann", last.memory_id)
    newer = bank.add_turn("Ann", "third, added after the delete", "ok", at="2023-05-01T12:00")
    assert newer.memory_id != last.memory_id and newer.turn == 2
    with pytest.raises(MemoryNotFoundError):
        bank.delete_memory("Ann", last.memory_id)  # a client's retry of the delete
    assert [m.query for m in bank.history("Ann")] == ["first", "third, added after the delete"]


def test_every_delete_of_the_store_keeps_later_turns_above_the_deleted_ones(storage: Storage) -> None:
    """Issue 15, item 5, at the root: the store raises the turn floor in the transaction that
    deletes (a memory, the archived ones, a replaced or deleted user), so no caller has a step
    to forget and a crash between two steps cannot lose the floor."""
    u = storage.ensure_user("Ann").id
    t = [storage.add_turn(u, turn("Ann", "2023-05-01", f"t{i}"), None, ENC) for i in range(3)]
    storage.delete_memories(u, [t[2].rowid or 0])
    assert storage.add_turn(u, turn("Ann", "2023-05-01", "after a delete"), None, ENC).turn == 3
    last = storage.memories(u)[-1]
    storage.set_archived(u, [last.rowid or 0], True)
    storage.delete_archived(u)
    assert storage.add_turn(u, turn("Ann", "2023-05-01", "after a purge"), None, ENC).turn == 4
    imported = turn("Ann", "2023-05-01", "imported", turn=0)
    imported.memory_id = "Ann_2023-05-01_imported"
    storage.replace_user("Ann", {}, [imported], [], None, ENC)
    u = storage.get_user("Ann").id  # type: ignore[union-attr]
    assert storage.add_turn(u, turn("Ann", "2023-05-01", "after a replace"), None, ENC).turn == 5
    storage.delete_user(u)
    again = storage.ensure_user("Ann").id
    first = storage.add_turn(again, turn("Ann", "2023-05-01", "a new Ann"), None, ENC)
    assert first.turn == 6 and first.memory_id == "Ann_2023-05-01_6"
    other = storage.ensure_user("Bob").id  # created after the delete: starts above it too
    assert storage.add_turn(other, turn("Bob", "2023-06-01", "bob"), None, ENC).turn == 6


def test_memory_ids_are_never_reused_after_a_purge(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    bank.add_turn("Ann", "first", "ok", at="2023-05-01T10:00")
    last = bank.add_turn("Ann", "second", "ok", at="2023-05-01T11:00")
    bank.archive("Ann", [last.memory_id])
    assert bank.purge_archived("Ann") == 1
    newer = bank.add_turn("Ann", "third, added after the purge", "ok", at="2023-05-01T12:00")
    assert newer.memory_id != last.memory_id and newer.turn == 2
def test_content_weights_and_the_cold_tiers_vectors(stores) -> None:  # type: ignore[no-untyped-def]
    storage = stores()
    u = storage.ensure_user("Ann").id
    a = storage.add_turn(u, turn("Ann", "2023-05-01", "Hi!", weight=0.25), vec(1, 0, 0, 0), ENC)
    b = storage.add_turn(u, turn("Ann", "2023-05-01", "My cat is Miso.", weight=2.0), vec(0, 1, 0, 0), ENC)
    (c,) = storage.add_memories(u, [turn("Ann", "2023-05-02", "What now?")], vec(0, 0, 1, 0)[None], ENC)
    assert [m.weight for m in storage.memories(u)] == [0.25, 2.0, 1.0]
    cols = storage.forget_columns(u, TURN_KINDS, weights=True)
    assert cols.weights is not None and cols.weights.tolist() == [0.25, 2.0, 1.0]
    assert storage.forget_columns(u, TURN_KINDS).weights is None
    storage.set_archived(u, [b.rowid or 0], True)
    assert storage.vectors(u, ENC, TURN_KINDS).rowids.tolist() == [a.rowid, c]
    cold = storage.vectors(u, ENC, TURN_KINDS, archived=True)
    assert cold.rowids.tolist() == [b.rowid] and cold.texts == ["My cat is Miso."]


def test_has_memories_and_turn_days_answer_from_the_index(storage: Storage) -> None:
    """What a chat turn and the summary scheduler ask without listing the history."""
    u = storage.ensure_user("Ann").id
    assert not storage.has_memories(u) and storage.turn_days(u) == []
    a = storage.add_turn(u, turn("Ann", "2023-05-02", "a"), None, ENC)
    storage.add_turn(u, turn("Ann", "2023-05-01", "b"), None, ENC)
    storage.add_memories(u, [Memory(memory_id="Ann_2023-05-03_summary", user="Ann", kind=MemoryKind.DAILY_SUMMARY,
                                    date="2023-05-03", text="s")], None, ENC)  # fmt: skip
    assert storage.has_memories(u)
    assert storage.turn_days(u) == ["2023-05-01", "2023-05-02"]  # days of turns only, ascending
    storage.set_archived(u, [m.rowid or 0 for m in storage.memories(u)], True)
    assert not storage.has_memories(u) and storage.has_memories(u, include_archived=True)
    assert storage.turn_days(u) == ["2023-05-01", "2023-05-02"]  # forgotten turns are summarised
    storage.set_archived(u, [m.rowid or 0 for m in storage.memories(u)], True, hidden=True)
    assert storage.turn_days(u) == []  # hidden ones are not
    storage.set_archived(u, [a.rowid or 0], False)
    assert storage.turn_days(u) == ["2023-05-02"]
    # The generic fallbacks (a backend of another kind) give the same answers.
    assert Storage.has_memories(storage, u) and Storage.turn_days(storage, u) == ["2023-05-02"]
