"""A store file that is not ours, not whole, or beside a foreign -wal is refused and left
untouched; deleting a user leaves no copy in the store's files (issue 15, items 1, 2, 7, 13)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from memory_bank import MemoryBank
from memory_bank.cli import main
from memory_bank.embeddings import HashingEncoder
from memory_bank.errors import StoreError
from memory_bank.stores.sqlite import DB_FILENAME, SQLiteStorage
from tests.conftest import REPO


def _files(store: Path) -> dict[str, bytes]:
    """The store's files, byte for byte (an empty -wal or the -shm index that a reading SQLite
    connection creates beside a WAL database are not changes of content)."""
    return {
        p.name: p.read_bytes()
        for p in sorted(store.iterdir())
        if p.is_file() and not p.name.endswith("-shm") and not (p.name.endswith("-wal") and not p.stat().st_size)
    }


def _cli_refuses(store: Path, capsys, *match: str) -> None:  # type: ignore[no-untyped-def]
    before = _files(store)
    for command in (["stats"], ["add", "--user", "Ann", "--query", "hello"]):
        code = main([*command, "--store", str(store), "--encoder", "hashing-64"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert len(err.strip().splitlines()) == 1 and all(m in err for m in match), err
    assert _files(store) == before  # byte for byte, nothing added


def test_a_zero_byte_store_file_is_refused_not_initialised(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    store.mkdir()
    (store / DB_FILENAME).write_bytes(b"")
    _cli_refuses(store, capsys, "is empty (0 bytes)")


def test_a_foreign_database_is_refused_and_left_alone(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    store.mkdir()
    conn = sqlite3.connect(store / DB_FILENAME)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices(total) VALUES (9.5)")
    conn.commit()
    conn.close()
    _cli_refuses(store, capsys, "not a MemoryBank store")
    empty = tmp_path / "e"  # an SQLite file with no tables at all is not a store either
    empty.mkdir()
    sqlite3.connect(empty / DB_FILENAME).execute("PRAGMA user_version = 1").connection.close()
    _cli_refuses(empty, capsys, "not a MemoryBank store")


def test_a_garbage_schema_version_is_one_line(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    SQLiteStorage(store).close()
    with sqlite3.connect(store / DB_FILENAME) as conn:
        conn.execute("UPDATE meta SET value = 'banana' WHERE key = 'schema_version'")
    conn.close()
    _cli_refuses(store, capsys, "damaged schema version 'banana'")


def test_only_a_directory_without_a_store_file_is_initialised(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    s = SQLiteStorage(store)
    assert s.store_id and (store / f"{DB_FILENAME}-id").read_text().strip() == s.store_id
    s.close()
    assert [p.name for p in store.iterdir() if p.name.startswith(".")] == []  # no temporary left
    lone = tmp_path / "lone"  # a -wal without its database: the database was lost
    lone.mkdir()
    shutil.copy(_wal_of_open_store(tmp_path / "w"), lone / f"{DB_FILENAME}-wal")
    with pytest.raises(StoreError, match="without its database"):
        SQLiteStorage(lone)
    assert not (lone / DB_FILENAME).exists()


def _wal_of_open_store(store: Path) -> Path:
    """A store with turns still in its -wal (a writer that has not checkpointed); a copy of it."""
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(16))
    conn = bank.storage._conn()  # type: ignore[attr-defined]
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    for i in range(20):
        bank.add_turn("Wal", f"turn {i} kept only in the wal", "ok", at="2023-05-01T10:00")
    copy = store.parent / f"{store.name}-wal-copy"
    shutil.copy(store / f"{DB_FILENAME}-wal", copy)
    bank.close()
    return copy


def test_a_wal_of_another_store_beside_the_database_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    foreign_wal = _wal_of_open_store(tmp_path / "other")
    store = tmp_path / "s"
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(16))
    bank.add_turn("Ann", "my own memory", "ok")
    bank.close()
    shutil.copy(foreign_wal, store / f"{DB_FILENAME}-wal")  # a backup restored without care
    before = _files(store)
    with pytest.raises(StoreError, match="does not belong to this database"):
        SQLiteStorage(store)
    assert _files(store) == before  # the refused files are untouched: nothing checkpointed


def test_damage_inside_the_file_is_detected_before_any_write(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(16))
    for i in range(400):
        bank.add_turn("Ann", f"memory number {i} " + "padding " * 40, "ok", at="2023-05-01T10:00")
    bank.close()
    db = store / DB_FILENAME
    raw = bytearray(db.read_bytes())
    page = int.from_bytes(raw[16:18], "big")
    for p in range(3, len(raw) // page):  # scribble over the b-tree page headers of the data
        raw[p * page : p * page + 12] = b"\xff" * 12
    db.write_bytes(bytes(raw))
    _cli_refuses(store, capsys, "is damaged")


def test_check_reports_a_healthy_store_and_damage(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(16))
    bank.add_turn("Ann", "hello", "ok")
    bank.close()
    assert main(["check", "--store", str(store)]) == 0
    assert "ok" in capsys.readouterr().out
    with sqlite3.connect(store / DB_FILENAME) as conn:
        conn.execute("UPDATE memories SET extra = '{not json', kind = 'nonsense'")
    conn.close()
    assert main(["check", "--store", str(store)]) == 2
    out = capsys.readouterr()
    assert "memory row" in out.out and "kind 'nonsense'" in out.out
    assert out.err.count("\n") == 1
    # and reading the damaged row is one line too, not a traceback
    assert main(["export", "--store", str(store)]) == 2
    assert "damaged" in capsys.readouterr().err


def test_deleting_a_user_leaves_no_copy_in_any_store_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(16))
    secret = "my secret diary entry zq7x"
    for i in range(30):
        bank.add_turn("Ann", f"{secret} {i}", "ok", at="2023-05-01T10:00")
        bank.add_turn("Bob", f"bob's turn {i}", "ok", at="2023-05-01T10:00")
    other = MemoryBank.open(store, encoder_instance=HashingEncoder(16))  # the server keeps running
    assert other.search("Ann", "diary", k=1)
    bank.delete_user("Ann")
    for p in store.iterdir():
        assert b"zq7x" not in p.read_bytes(), p.name
        assert b"Ann" not in p.read_bytes() or p.name.endswith("-shm"), p.name
    assert len(other.history("Bob")) == 30
    other.close()
    bank.close()


@pytest.mark.parametrize("how", ["delete", "purge", "import", "edit"])
def test_deleting_one_memory_leaves_no_copy_in_any_store_file(tmp_path, monkeypatch, how: str) -> None:  # type: ignore[no-untyped-def]
    """Only a user's deletion emptied the WAL: a deleted memory's words stayed in it (its row, and
    the lexical snapshot and vector blocks that held them) until SQLite's next checkpoint."""
    import memory_bank.index as index_module
    from memory_bank import vector_blocks

    monkeypatch.setattr(vector_blocks, "BLOCK", 8)
    monkeypatch.setattr(index_module, "SEAL_MIN", 8)
    monkeypatch.setattr(index_module, "SNAPSHOT_MIN", 1)
    store = tmp_path / "s"
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(16))
    for i in range(30):
        bank.add_turn("Ann", f"an ordinary turn {i}", "ok", at="2023-05-01T10:00")
    secret = bank.add_turn("Ann", "my secret diary entry zq7x", "ok", at="2023-05-01T11:00")
    other = MemoryBank.open(store, encoder_instance=HashingEncoder(16))  # the server keeps running
    assert other.search("Ann", "diary zq7x", k=1)[0].memory.memory_id == secret.memory_id
    if how == "delete":
        bank.delete_memory("Ann", secret.memory_id)
    elif how == "purge":
        bank.archive("Ann", [secret.memory_id], hidden=False)
        assert bank.purge_archived("Ann") == 1
    elif how == "edit":  # the user corrects it: the old words must go too
        bank.update_memory("Ann", secret.memory_id, text="my diary entry, rewritten")
    else:
        bank.import_user("Ann", [m for m in bank.history("Ann") if m.memory_id != secret.memory_id], {})
    if how != "edit":
        assert all(h.memory.memory_id != secret.memory_id for h in other.search("Ann", "diary zq7x", k=3))
    for p in store.iterdir():
        assert b"zq7x" not in p.read_bytes(), p.name
    assert len(other.history("Ann")) == (31 if how == "edit" else 30)
    other.close()
    bank.close()


_READ_ONLY = """
import json, os, sys, tempfile
from memory_bank.cli import main
COMMANDS = (("stats", []), ("search", ["--user", "Ann", "kites"]), ("export", ["--user", "Ann"]),
            ("add", ["--user", "Ann", "--query", "x"]))
def run(store):
    return [main([c, "--store", store, "--encoder", "hashing-64", *a]) for c, a in COMMANDS]
warm = tempfile.mkdtemp()
main(["add", "--store", warm, "--encoder", "hashing-64", "--user", "Ann", "--query", "kites"])
run(warm)  # loads every module the commands use while the files are readable
if os.geteuid() == 0:
    os.setuid(65534)  # root may write anywhere: become nobody
print(json.dumps(run(sys.argv[1])))
"""


def test_a_read_only_store_serves_stats_search_and_export(tmp_path) -> None:  # type: ignore[no-untyped-def]
    tmp_path = Path(tempfile.mkdtemp())  # under /tmp, reachable by an unprivileged user
    os.chmod(tmp_path, 0o755)
    store = tmp_path / "s"
    bank = MemoryBank.open(store, encoder="hashing-64")
    bank.add_turn("Ann", "I fly kites on Sundays", "fun")
    bank.close()
    for p in [tmp_path, store, *store.iterdir()]:
        os.chmod(p, 0o555 if p.is_dir() else 0o444)
    try:
        out = subprocess.run([sys.executable, "-c", _READ_ONLY, str(store)], capture_output=True, text=True,
                             cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    finally:
        for p in [tmp_path, store, *store.iterdir()]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
    shutil.rmtree(tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[0, 0, 0, 2]"
    assert "kites" in out.stdout and "read-only" in out.stderr


def test_a_full_disk_during_add_is_one_line_and_loses_nothing(tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(16))
    bank.add_turn("Ann", "stored before the disk filled up", "ok")
    bank.close()
    real_connect = sqlite3.connect

    def small_disk(*args, **kwargs):  # type: ignore[no-untyped-def]
        conn = real_connect(*args, **kwargs)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")  # the file may not grow: SQLITE_FULL
        return conn

    monkeypatch.setattr(sqlite3, "connect", small_disk)
    code = main(["add", "--store", str(store), "--encoder", "hashing-16", "--user", "Ann",
                 "--query", "x" * 200_000])
    err = capsys.readouterr().err
    assert code == 2 and "is full; nothing of this change was written" in err and len(err.strip().splitlines()) == 1
    monkeypatch.undo()
    again = MemoryBank.open(store, encoder_instance=HashingEncoder(16))
    assert [m.query for m in again.history("Ann")] == ["stored before the disk filled up"]
    again.close()


def test_opening_a_store_never_makes_a_protected_file_writable(tmp_path) -> None:
    """Opening a store made its file 0600 whatever it was: a store the owner had made read-only
    (chmod 444) came back writable from a read-only command, and a later delete went through.
    Opening only takes permissions away (group and others)."""
    import stat

    SQLiteStorage(tmp_path).close()
    db = tmp_path / DB_FILENAME
    os.chmod(db, 0o444)
    SQLiteStorage(tmp_path).close()
    assert stat.S_IMODE(db.stat().st_mode) == 0o400


def test_a_wal_that_needs_a_folder_it_cannot_write_is_not_called_damage(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A store left with its -wal after an unclean stop, in a folder this user may not write,
    cannot be read (SQLite must create its -shm index there): it was called damaged, and the
    advice for damage (restore the latest backup) throws away what the -wal holds."""
    from memory_bank import integrity

    SQLiteStorage(tmp_path).close()
    db = tmp_path / DB_FILENAME
    integrity.wal_path(db).write_bytes(b"")  # as an unclean stop leaves it
    (tmp_path / (DB_FILENAME + "-shm")).unlink(missing_ok=True)

    class NoIndex:  # what SQLite answers when it cannot create the -shm file (root never sees it)
        def execute(self, *args):  # type: ignore[no-untyped-def]
            raise sqlite3.OperationalError("unable to open database file")

        def close(self) -> None:
            pass

    real_access = os.access
    monkeypatch.setattr(integrity, "read_only_connection", lambda db: NoIndex())
    monkeypatch.setattr(
        integrity.os, "access", lambda p, mode: False if Path(p) == tmp_path else real_access(p, mode)
    )
    with pytest.raises(StoreError, match="Nothing is damaged: open it once with write permission") as refused:
        integrity.inspect(db)
    assert "damaged or not a memory store" not in str(refused.value)


def test_a_damaged_store_s_memories_that_still_read_can_be_exported(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The README's advice for a store refused as damaged: restore the latest backup, and save
    newer memories by exporting what still reads. Export and check refused such a store, so
    nothing could be saved; ``export --salvage`` copies every row that reads, leaves out those
    on the damaged page, and never writes the damaged file."""
    import json

    store = tmp_path / "s"
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(64))
    for i in range(400):
        bank.add_turn("Ann", f"marker-{i:03d} " + "words " * 20, "ok", at=f"2023-05-{1 + i // 40:02d}T{i % 24:02d}:00")
    bank.close()
    db = store / DB_FILENAME
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536  # the header's page size
    hit = data.find(b"marker-200")
    start = hit - hit % page
    data[start : start + 12] = b"\xff" * 12  # the page's b-tree header
    db.write_bytes(bytes(data))
    damaged = db.read_bytes()
    common = ["--store", str(store), "--encoder", "hashing-64"]
    assert main(["export", *common, "--out", str(tmp_path / "plain.json")]) == 2
    assert "damaged" in capsys.readouterr().err
    assert main(["check", "--store", str(store)]) == 2  # lists what is wrong, and how to recover
    listed = capsys.readouterr()
    assert listed.out.strip() and "memorybank export --salvage --store" in listed.err
    assert main(["export", *common, "--salvage", "--out", str(tmp_path / "saved.json")]) == 0
    err = capsys.readouterr().err
    assert "memories:" in err and "could not be read and are left out" in err
    turns = [t for day in json.loads((tmp_path / "saved.json").read_text())["Ann"]["history"].values() for t in day]
    saved = {t["query"][:10] for t in turns}
    assert "marker-200" not in saved and {"marker-000", "marker-100", "marker-399"} <= saved
    assert len(turns) >= 400 - 60  # one page of rows left out
    assert db.read_bytes() == damaged


def test_salvage_keeps_the_wal_s_newest_memories_and_memories_whose_user_row_is_damaged(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Salvage read the damaged file as immutable, which ignores its -wal: the newest memories,
    those an unclean stop leaves only there (the ones newer than the last backup), were left
    out without a word. And a damaged users page dropped every memory of those users, though
    their rows read fine."""
    import json

    store = tmp_path / "s"
    writer = """import os, sys
from memory_bank import MemoryBank
from memory_bank.embeddings import HashingEncoder
b = MemoryBank.open(sys.argv[1], encoder_instance=HashingEncoder(64))
for i in range(3):
    b.add_turn("Ann", f"newest-{i} my sister moved to Lisbon", "ok", at="2023-06-01T10:00")
os._exit(0)  # killed: the newest turns are in the -wal only
"""
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(64))
    bank.add_turn("Ann", "I adopted a cat named Miso", "lovely", at="2023-05-01T10:00")
    bank.close()
    subprocess.run([sys.executable, "-c", writer, str(store)], check=True, cwd=str(REPO))
    assert (store / (DB_FILENAME + "-wal")).stat().st_size > 0
    common = ["--store", str(store), "--encoder", "hashing-64"]
    assert main(["export", *common, "--salvage", "--out", str(tmp_path / "a.json")]) == 0
    history = json.loads((tmp_path / "a.json").read_text())["Ann"]["history"]
    assert sum(q["query"].startswith("newest-") for day in history.values() for q in day) == 3
    # the users table's page damaged: Ann's memories are kept under the name their ids carry
    db = store / DB_FILENAME
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    root = sqlite3.connect(db).execute("SELECT rootpage FROM sqlite_schema WHERE name = 'users'").fetchone()[0]
    start = (root - 1) * page
    data[start : start + 12] = b"\xff" * 12
    db.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["export", *common, "--salvage", "--out", str(tmp_path / "b.json")]) == 0
    assert "could not be read; their memories are exported under the name their memory ids carry" in capsys.readouterr().err
    saved = json.loads((tmp_path / "b.json").read_text())
    assert sum(len(day) for day in saved["Ann"]["history"].values()) == 4


def test_salvage_reads_a_store_of_an_older_schema(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A damaged store of the previous schema was refused ("use the version that wrote it", which
    has no salvage). Migrations only add columns with defaults and tables, so its rows copy."""
    import json

    store = tmp_path / "s"
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(64))
    bank.add_turn("Ann", "I adopted a cat named Miso", "lovely", at="2023-05-01T10:00")
    bank.close()
    conn = sqlite3.connect(store / DB_FILENAME)
    conn.execute("DROP TABLE deleted_ids")  # as schema 6 was
    conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    out = tmp_path / "o.json"
    assert main(["export", "--salvage", "--store", str(store), "--encoder", "hashing-64", "--out", str(out)]) == 0
    turns = [t["query"] for day in json.loads(out.read_text())["Ann"]["history"].values() for t in day]
    assert turns == ["I adopted a cat named Miso"]
