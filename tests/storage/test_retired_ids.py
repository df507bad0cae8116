"""A memory id a caller chose (a LangChain message's ``lc:<id>``, a tool call's ``tool:<id>``,
an application's own idempotency key) is retired when its memory is deleted: a client's retry or a
checkpoint's replay of that turn stores nothing, instead of bringing back what the user deleted.
A deleted user's ids are kept a few days, as digests without the name, so a run that was in
flight does not create the user again. On SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import Any

import pytest

from memory_bank import MemoryBank, MemoryDeletedError
from memory_bank.stores import sql as sql_module
from memory_bank.stores.base import RETIRED_USER_DAYS, SCHEMA_VERSION
from memory_bank.stores.sql import SQLStorage
from tests.conftest import UNDO_SCHEMA_7, downgrade


def _rows(bank: MemoryBank, sql: str) -> list[tuple[Any, ...]]:
    storage = bank.storage
    assert isinstance(storage, SQLStorage)
    return storage._rows(sql)


def _ids(bank: MemoryBank, user: str) -> list[str]:
    return [m.memory_id for m in bank.history(user)]


def test_a_retry_of_a_deleted_turn_stores_nothing(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    bank.add_turn("Ann", "My sister's name is Mia.", "Nice!", memory_id="lc:msg-1")
    bank.add_turn("Ann", "I like tea.", "Noted.", memory_id="lc:msg-2")
    assert bank.add_turn("Ann", "My sister's name is Mia.", "Nice!", memory_id="lc:msg-1").memory_id == "lc:msg-1"
    bank.delete_memory("Ann", "lc:msg-1")
    version = bank.storage.user_state(bank.user("Ann").id)[0]
    with pytest.raises(MemoryDeletedError, match=r"lc:msg-1.*deleted on") as e:
        bank.add_turn("Ann", "My sister's name is Mia.", "Nice!", memory_id="lc:msg-1")  # the client's retry
    assert e.value.memory_id == "lc:msg-1" and e.value.deleted_on
    assert _ids(bank, "Ann") == ["lc:msg-2"]
    assert bank.storage.user_state(bank.user("Ann").id)[0] == version  # nothing written
    assert all("Mia" not in h.memory.text for h in bank.search("Ann", "sister Mia", k=3))
    # Another id is another memory; a caller that means to store it again says so.
    bank.add_turn("Ann", "My sister is called Mia.", "Nice!", memory_id="lc:msg-3")
    again = bank.add_turn("Ann", "My sister's name is Mia.", "Nice!", memory_id="lc:msg-1", revive_deleted=True)
    assert again.memory_id == "lc:msg-1" and "lc:msg-1" in _ids(bank, "Ann")
    assert bank.add_turn("Ann", "x", "", memory_id="lc:msg-1").query == "My sister's name is Mia."  # idempotent
    bank.delete_memory("Ann", "lc:msg-1")
    with pytest.raises(MemoryDeletedError):  # retired again by the second delete
        bank.add_turn("Ann", "My sister's name is Mia.", "Nice!", memory_id="lc:msg-1")


def test_retirement_is_per_user_and_only_for_ids_a_caller_chose(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    bank.add_turn("Ann", "a shared message id", "ok", memory_id="lc:1")
    own = bank.add_turn("Ann", "a turn the bank numbered", "ok")
    bank.add_turn("Bob", "Bob's message with the same id", "ok", memory_id="lc:1")
    bank.delete_memory("Ann", "lc:1")
    bank.delete_memory("Ann", own.memory_id)
    assert bank.add_turn("Bob", "Bob's message with the same id", "ok", memory_id="lc:1").memory_id == "lc:1"
    bank.delete_memory("Bob", "lc:1", retire=False)  # a key that is meant to be written again
    assert bank.add_turn("Bob", "written again", "ok", memory_id="lc:1").query == "written again"
    assert len(_rows(bank, "SELECT digest FROM deleted_ids")) == 2  # Ann's lc:1 (and lc:1#*: no replay key)


def test_an_undo_brings_a_deleted_id_back(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    m = bank.add_turn("Ann", "I adopted a cat named Miso.", "Lovely!", memory_id="tool:call_7")
    gone = bank.delete_memory("Ann", "tool:call_7")
    bank.put_back("Ann", [gone])  # the memory view's undo
    assert bank.add_turn("Ann", "I adopted a cat named Miso.", "Lovely!", memory_id="tool:call_7").rowid is not None
    assert _ids(bank, "Ann") == [m.memory_id]
    assert _rows(bank, "SELECT digest FROM deleted_ids") == []


def test_purged_forgotten_turns_are_retired(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting={"mode": "paper", "policy": "threshold", "threshold": 0.5, "daily_pass": False})
    bank.add_turn("Ann", "small talk from long ago", "ok", memory_id="lc:old", at="2023-05-01T10:00")
    bank.forget("Ann", now="2024-05-01")
    assert bank.purge_archived("Ann") == 1
    with pytest.raises(MemoryDeletedError):
        bank.add_turn("Ann", "small talk from long ago", "ok", memory_id="lc:old", at="2023-05-01T10:00")


def test_a_retry_after_the_user_was_deleted_does_not_create_them_again(make_bank, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    bank.add_turn("Ann", "Please remember my address, 12 Elm Street.", "Sure.", memory_id="lc:run-9")
    bank.add_turn("Ann", "Something else.", "Ok.", memory_id="lc:run-8")
    bank.delete_memory("Ann", "lc:run-8")  # retired while the user lived: kept with theirs
    bank.delete_user("Ann")
    for mid in ("lc:run-9", "lc:run-8"):
        with pytest.raises(MemoryDeletedError, match="with the user"):
            bank.add_turn("Ann", "Please remember my address, 12 Elm Street.", "Sure.", memory_id=mid)
    assert not bank.has_user("Ann") and bank.storage.get_user("Ann") is None  # no empty user either
    # What the store keeps is digests: neither the name nor the ids.
    rows = _rows(bank, "SELECT digest, user_id, deleted_on, expires_on FROM deleted_ids")
    assert len(rows) == 4 and all(r[1] is None and r[3] for r in rows)  # two ids, each with its replay key (none: #*)
    assert "Ann" not in repr(rows) and "run-" not in repr(rows)
    # A new message of the same name is a new start; the deleted ones stay retired for a while.
    bank.add_turn("Ann", "Hi, I'm new here.", "Welcome!", memory_id="lc:run-10")
    with pytest.raises(MemoryDeletedError):
        bank.add_turn("Ann", "Please remember my address, 12 Elm Street.", "Sure.", memory_id="lc:run-9")
    later = dt.datetime.now(dt.timezone.utc).date() + dt.timedelta(days=RETIRED_USER_DAYS + 1)
    monkeypatch.setattr(sql_module, "_today", lambda: later)
    bank.add_turn("Ann", "an old run's retry, weeks later", "ok", memory_id="lc:run-9")
    assert "lc:run-9" in _ids(bank, "Ann")
    bank.delete_user("Ann")  # the next deletion sweeps what expired
    assert [r[0] for r in _rows(bank, "SELECT expires_on FROM deleted_ids")] == [
        (later + dt.timedelta(days=RETIRED_USER_DAYS)).isoformat()
    ] * 4


def test_an_import_that_replaces_a_user_keeps_their_retired_ids(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    bank.add_turn("Ann", "to be deleted", "ok", memory_id="lc:a")
    bank.add_turn("Ann", "replaced by the import", "ok", memory_id="lc:b")
    bank.add_turn("Ann", "in the file too", "ok", memory_id="lc:c")
    bank.delete_memory("Ann", "lc:a")
    memories = [m for m, _ in bank.memories("Ann") if m.memory_id == "lc:c"]
    bank.import_user("Ann", memories, bank.user("Ann").extra, replace=True)
    for mid in ("lc:a", "lc:b"):  # deleted before, and removed by the replace
        with pytest.raises(MemoryDeletedError):
            bank.add_turn("Ann", "a retry", "ok", memory_id=mid)
    assert bank.add_turn("Ann", "in the file too", "ok", memory_id="lc:c").query == "in the file too"
    bank.delete_user("Ann")  # still the user's: it expires with them, not kept for good
    assert all(r[0] is None for r in _rows(bank, "SELECT user_id FROM deleted_ids"))


def test_a_version_6_store_gains_the_retired_ids(stores, clock) -> None:  # type: ignore[no-untyped-def]
    from memory_bank import load_config
    from memory_bank.embeddings import HashingEncoder

    def bank() -> MemoryBank:
        return MemoryBank(load_config(None, store=stores.spec), storage=stores(), encoder=HashingEncoder(64), clock=clock)

    first = bank()
    first.add_turn("Ann", "kept", "ok", memory_id="lc:k")
    storage = first.storage
    assert isinstance(storage, SQLStorage)

    downgrade(storage, UNDO_SCHEMA_7, 6)
    first.close()
    second = bank()
    assert second.storage.meta()["schema_version"] == str(SCHEMA_VERSION)
    second.delete_memory("Ann", "lc:k")
    with pytest.raises(MemoryDeletedError):
        second.add_turn("Ann", "kept", "ok", memory_id="lc:k")
    second.close()


def test_the_sqlite_file_keeps_no_deleted_id_in_clear(tmp_path, clock) -> None:  # type: ignore[no-untyped-def]
    from memory_bank import load_config
    from memory_bank.embeddings import HashingEncoder
    from memory_bank.stores.sqlite import DB_FILENAME

    bank = MemoryBank(load_config(None, store=str(tmp_path / "s")), encoder=HashingEncoder(64), clock=clock)
    bank.add_turn("Zelda", "a secret", "ok", memory_id="lc:zz-secret-id")
    bank.delete_user("Zelda")
    bank.close()
    for f in (tmp_path / "s").iterdir():
        data = f.read_bytes()
        assert b"zz-secret-id" not in data and b"Zelda" not in data, f.name
    db = sqlite3.connect(tmp_path / "s" / DB_FILENAME)
    assert db.execute("SELECT COUNT(*) FROM deleted_ids").fetchone()[0] == 2  # the id and its replay key (none: #*)
    db.close()


def test_a_copy_of_the_store_keeps_its_retired_ids(make_bank, tmp_path, clock) -> None:  # type: ignore[no-untyped-def]
    """memorybank migrate (and so a PostgreSQL backup) carries the retired ids: a retry after the
    copy would otherwise bring the deleted turn back."""
    from memory_bank import load_config
    from memory_bank.embeddings import HashingEncoder
    from memory_bank.stores.migrate import migrate

    bank = make_bank()
    bank.add_turn("Ann", "deleted later", "ok", memory_id="lc:gone")
    bank.add_turn("Ann", "kept", "ok", memory_id="lc:kept")
    bank.add_turn("Bob", "Bob leaves", "ok", memory_id="lc:bob")
    bank.delete_memory("Ann", "lc:gone")
    bank.delete_user("Bob")
    migrate(bank.storage, tmp_path / "copy", progress=False)
    copy = MemoryBank(load_config(None, store=str(tmp_path / "copy")), encoder=HashingEncoder(64), clock=clock)
    for user, mid in (("Ann", "lc:gone"), ("Bob", "lc:bob")):
        with pytest.raises(MemoryDeletedError):
            copy.add_turn(user, "a retry", "ok", memory_id=mid)
    assert copy.add_turn("Ann", "kept", "ok", memory_id="lc:kept").query == "kept"
    assert sorted(copy.storage.retired_ids()) == sorted(bank.storage.retired_ids())
    copy.close()


def test_a_user_stored_before_the_name_rule_keeps_their_ids_retired_once_deleted(make_bank) -> None:  # type: ignore[no-untyped-def]
    """The id was retired under the stored name (' Jason ') and asked for under the rule's ('Jason')."""
    bank = make_bank()
    legacy = bank.storage.ensure_user(" Jason ")
    assert legacy.name == " Jason "
    bank.add_turn(" Jason ", "My PIN is 4321.", "Noted.", memory_id="lc:m1")
    bank.delete_user(" Jason ")
    with pytest.raises(MemoryDeletedError):
        bank.add_turn("Jason", "My PIN is 4321.", "Noted.", memory_id="lc:m1")
    assert bank.users() == []
