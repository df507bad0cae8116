"""Choosing a store by URL, and `memorybank migrate` between SQLite and PostgreSQL."""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path

import pytest

from memory_bank import ConfigError, InvalidInputError, MemoryBank, MemoryKind, StoreError, load_config
from memory_bank.config import ForgettingConfig
from memory_bank.embeddings import HashingEncoder
from memory_bank.original_format import export_data, import_data
from memory_bank.stores import Storage, describe_store, open_storage
from memory_bank.stores.migrate import migrate, stored_embeddings
from memory_bank.stores.sqlite import DB_FILENAME, SQLiteStorage
from tests.core.conftest import CountingEncoder
from tests.core.test_original_format import LEGACY


def test_open_storage_picks_sqlite_for_paths_and_sqlite_urls(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    for spec, where in [
        (tmp_path / "a", tmp_path / "a"),
        (str(tmp_path / "b"), tmp_path / "b"),
        ("sqlite:///rel/c", tmp_path / "rel" / "c"),  # SQLAlchemy style: three slashes, relative
        (f"sqlite:///{tmp_path}/d", tmp_path / "d"),  # four slashes: absolute
    ]:
        s = open_storage(spec)
        assert isinstance(s, SQLiteStorage) and (where / DB_FILENAME).is_file()
        s.close()
    s = open_storage(tmp_path / "a" / DB_FILENAME)  # the database file names its directory
    assert isinstance(s, SQLiteStorage) and s.directory == tmp_path / "a"
    s.close()
    with pytest.raises(StoreError, match="no memory store"):
        open_storage(tmp_path / "missing", create=False)
    with pytest.raises(ConfigError, match="unknown store URL scheme 'mysql'"):
        open_storage("mysql://x@y/z")
    with pytest.raises(ConfigError, match="no path"):
        open_storage("sqlite:///")


def test_describe_store_hides_the_password() -> None:
    pytest.importorskip("psycopg")
    text = describe_store("postgresql://app:s3cret@db.internal:6432/mb?schema=tenant1")
    assert text == "postgresql://app@db.internal:6432/mb?schema=tenant1"


def _seed(bank: MemoryBank) -> None:
    """Every kind of record and state: imported history, a reinforced turn, an archived turn with
    a vector, a stale layer, a memory without a vector, and a second encoder's vector."""
    bank.config.forgetting = ForgettingConfig(mode="off")  # states made by hand, not by a pass
    import_data(bank, copy.deepcopy(LEGACY))
    bank.add_turn("Ann", "I adopted a cat named Miso.", "Lovely!", at="2023-05-01T10:00")
    bank.add_turn("Ann", "She is grey.", "Cute.", at="2023-05-01T10:05")  # has a context
    bank.search("Ann", "cat Miso", k=1, now="2023-05-03", reinforce=True)
    bank.archive("Jason", ["Jason_2023-04-29_0"])
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann adopted Miso.", date="2023-05-01", extra={"by": "llm"})
    bank.add_turn("Ann", "One more.", "ok", at="2023-05-01T11:00")  # marks the summary stale
    rec = bank.user("Ann")
    bank.storage.set_forget_date(rec.id, "2023-05-02")


def _contents(storage: Storage) -> dict[str, object]:
    out: dict[str, object] = {}
    for u in storage.list_users():
        vecs = stored_embeddings(storage, u.id)
        out[u.name] = {
            "extra": u.extra,
            "forget": u.last_forget_date,
            "memories": {
                m.memory_id: (
                    {k: v for k, v in vars(m).items() if k != "rowid"},
                    (vecs[m.rowid][0], vecs[m.rowid][1].tolist()) if m.rowid in vecs else None,
                )
                for m in storage.memories(u.id)
            },
        }
    return out


def test_sqlite_to_sqlite_copies_everything(tmp_path) -> None:  # type: ignore[no-untyped-def]
    enc = CountingEncoder(64)
    src = MemoryBank(load_config(None, store=str(tmp_path / "src")), encoder=enc)
    _seed(src)
    extra_vec = HashingEncoder(16)
    rowid = src.memories("Ann")[0][0].rowid or 0
    src.storage.put_vectors([rowid], extra_vec.encode(["x"]), extra_vec.name)  # another encoder's vector
    before = _contents(src.storage)
    counts = migrate(src.storage, tmp_path / "dst", progress=False)
    assert counts["users"] == 3 and counts["archived"] == 1
    assert counts["memories"]["turn"] == 7 and counts["embeddings"] > 0
    dst = open_storage(tmp_path / "dst", create=False)
    assert _contents(dst) == before
    dst.close()
    embedded = enc.texts
    moved = MemoryBank(load_config(None, store=str(tmp_path / "dst"), forgetting={"mode": "off"}), encoder=enc)
    moved.restore("Jason", ["Jason_2023-04-29_0"])  # the archived turn's vector came along
    assert "lost a game" in moved.search("Jason", "I lost a game", k=1)[0].memory.text
    assert enc.texts == embedded + 1  # only the query: nothing re-embedded
    assert export_data(moved)[" Jason "]["history"]["2023-04-27"] == LEGACY[" Jason "]["history"]["2023-04-27"]
    moved.close()
    src.close()


def test_existing_users_are_refused_unless_replace(tmp_path) -> None:  # type: ignore[no-untyped-def]
    src = MemoryBank(load_config(None, store=str(tmp_path / "src")), encoder=HashingEncoder(64))
    _seed(src)
    migrate(tmp_path / "src", tmp_path / "dst", progress=False)
    with pytest.raises(InvalidInputError, match="already has 3 of these users"):
        migrate(tmp_path / "src", tmp_path / "dst", progress=False)
    src.add_turn("Ann", "A later note.", "ok", at="2023-05-02T10:00")
    counts = migrate(tmp_path / "src", tmp_path / "dst", progress=False, replace=True)
    assert counts["memories"]["turn"] == 8
    db = sqlite3.connect(tmp_path / "dst" / DB_FILENAME)
    assert db.execute("SELECT COUNT(*) FROM memories WHERE kind = 'turn'").fetchone()[0] == 8
    db.close()
    src.close()


def test_a_migration_that_fails_midway_leaves_no_user_half_copied(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    src = MemoryBank(load_config(None, store=str(tmp_path / "src")), encoder=HashingEncoder(64))
    _seed(src)
    dst = SQLiteStorage(tmp_path / "dst")
    real = SQLiteStorage._put_vectors

    def killed(self, *args, **kwargs):  # type: ignore[no-untyped-def]  # the process dies mid-user
        raise KeyboardInterrupt

    monkeypatch.setattr(SQLiteStorage, "_put_vectors", killed)
    with pytest.raises(KeyboardInterrupt):
        migrate(src.storage, dst, progress=False)
    assert dst.list_users() == []  # not a user with memories and no vectors
    monkeypatch.setattr(SQLiteStorage, "_put_vectors", real)
    migrate(src.storage, dst, progress=False)  # the rerun needs no --replace
    assert _contents(dst) == _contents(src.storage)
    dst.close()
    src.close()


@pytest.mark.integration
def test_sqlite_to_postgres_and_back(tmp_path, pg_url, pg_schema) -> None:  # type: ignore[no-untyped-def]
    src = MemoryBank(load_config(None, store=str(tmp_path / "src")), encoder=HashingEncoder(64))
    _seed(src)
    before = _contents(src.storage)
    export_before = export_data(src)
    pg = f"{pg_url}?schema={pg_schema}"
    migrate(tmp_path / "src", pg, progress=False, batch_size=3)  # small batches: several writes per user
    middle = open_storage(pg, create=False)
    assert _contents(middle) == before
    moved = MemoryBank(load_config(None, store=pg), storage=middle, encoder=HashingEncoder(64))
    assert export_data(moved) == export_before
    assert "Miso" in moved.search("Ann", "cat named Miso", k=1)[0].memory.text
    moved.close()
    counts = migrate(pg, f"sqlite:///{tmp_path}/back", progress=False)
    back = open_storage(tmp_path / "back", create=False)
    assert _contents(back) == before
    assert counts["users"] == 3
    back.close()
    src.close()


@pytest.mark.integration
def test_migrate_cli(tmp_path, capsys, pg_url, pg_schema) -> None:  # type: ignore[no-untyped-def]
    import memory_bank.migrate_cli  # noqa: F401  (until cli._load_extensions imports it)
    from memory_bank.cli import main

    src = MemoryBank(load_config(None, store=str(tmp_path / "src")), encoder=HashingEncoder(64))
    _seed(src)
    src.close()
    pg = f"{pg_url}?schema={pg_schema}"
    code = main(["migrate", "--from", f"sqlite:///{tmp_path}/src", "--to", pg, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    counts = json.loads(out)
    assert counts["users"] == 3 and counts["memories"]["turn"] == 7
    assert "verified" in err and pg_url.split("@")[0].split(":")[-1] not in err  # no password printed
    assert main(["migrate", "--from", f"sqlite:///{tmp_path}/src", "--to", pg]) == 2
    assert "--replace" in capsys.readouterr().err
    assert main(["migrate", "--from", str(tmp_path / "src"), "--to", f"sqlite:///{tmp_path}/src"]) == 2
    assert "same store" in capsys.readouterr().err
    assert main(["migrate", "--from", str(tmp_path / "nowhere"), "--to", str(tmp_path / "x")]) == 2
    assert "no memory store" in capsys.readouterr().err
    assert not Path(tmp_path / "nowhere").exists()


def test_migrate_cli_sqlite_only(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import memory_bank.migrate_cli  # noqa: F401
    from memory_bank.cli import main

    src = MemoryBank(load_config(None, store=str(tmp_path / "src")), encoder=HashingEncoder(64))
    _seed(src)
    before = _contents(src.storage)
    src.close()
    assert main(["migrate", "--from", str(tmp_path / "src"), "--to", f"sqlite:///{tmp_path}/dst"]) == 0
    assert "migrated 3 users, 13 memories (1 forgotten)" in capsys.readouterr().err
    dst = SQLiteStorage(tmp_path / "dst", create=False)
    assert _contents(dst) == before
    dst.close()


def test_a_store_of_another_encoder_is_refused_and_an_empty_one_takes_the_sources(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Vectors of another encoder copied into a store are never found (a search embeds with the
    store's): the migration reported 'verified' and 'check' said ok."""
    with MemoryBank.open(tmp_path / "src", encoder="hashing-64") as src:
        src.add_turn("Ann", "I adopted a cat named Miso.", "Lovely!", at="2023-05-01T10:00")
    with MemoryBank.open(tmp_path / "other", encoder="hashing-32") as other:
        other.add_turn("Bob", "I like tea.", "Nice.", at="2023-05-01T10:00")
    with pytest.raises(InvalidInputError, match="re-embed one of the two first"):
        migrate(tmp_path / "src", tmp_path / "other", progress=False)
    with MemoryBank.open(tmp_path / "other") as other:
        assert other.users() == ["Bob"]
    empty = MemoryBank.open(tmp_path / "empty", encoder="hashing-32")
    empty.check_encoder(load_new=True)
    empty.storage.set_meta({"encoder": "hashing-32", "encoder_dim": "32"})  # a store made with another encoder, still empty
    empty.close()
    migrate(tmp_path / "src", tmp_path / "empty", progress=False)
    with MemoryBank.open(tmp_path / "empty") as moved:
        assert moved.encoder_name == "hashing-64"
        assert "Miso" in moved.search("Ann", "Miso", k=1)[0].memory.text
