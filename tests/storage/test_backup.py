"""``memorybank backup`` / ``restore-backup``: a consistent one-file copy, taken while the app
writes, restored whole, on both stores (issue 15, item 2)."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from memory_bank import MemoryBank
from memory_bank.backup import backup, restore_backup
from memory_bank.cli import main
from memory_bank.embeddings import HashingEncoder
from memory_bank.original_format import export_data
from memory_bank.stores.sqlite import DB_FILENAME


def test_backup_while_the_app_writes_is_consistent_and_restores_whole(make_bank, stores, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    for u in ("a", "b"):
        bank.add_turn(u, "start", "ok", at="2023-05-01T09:00")
    stop = threading.Event()

    def writer() -> None:  # a and b grow in lockstep: a consistent copy has b == a or a - 1
        i = 0
        while not stop.is_set():
            bank.add_turn("a", f"a {i}", "ok", at="2023-05-01T10:00")
            bank.add_turn("b", f"b {i}", "ok", at="2023-05-01T10:00")
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        counts = backup(stores.spec, tmp_path / "b.mbk")
    finally:
        stop.set()
        t.join()
    assert not (tmp_path / "b.mbk-wal").exists()  # one self-contained file
    restored = tmp_path / "restored"
    assert restore_backup(tmp_path / "b.mbk", restored) == counts
    copy = MemoryBank.open(restored, encoder_instance=HashingEncoder(64))
    na, nb = len(copy.history("a")), len(copy.history("b"))
    assert nb in (na, na - 1) and counts["memories"]["turn"] == na + nb
    assert copy.search("a", "start", k=1)[0].memory.query == "start"  # vectors came along
    copy.close()


def test_restore_refuses_to_overwrite_a_store(make_bank, stores, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank()
    bank.add_turn("Ann", "keep me", "ok")
    assert main(["backup", "--store", stores.spec, "--out", str(tmp_path / "b.mbk")]) == 0
    assert main(["backup", "--store", stores.spec, "--out", str(tmp_path / "b.mbk")]) == 2  # never overwrites
    assert "already exists" in capsys.readouterr().err
    bank.add_turn("Ann", "newer than the backup", "ok")
    assert main(["restore-backup", str(tmp_path / "b.mbk"), "--store", stores.spec]) == 2
    assert "already holds a memory store" in capsys.readouterr().err
    assert len(bank.history("Ann")) == 2


def test_restore_into_postgres_and_back(pg_url, pg_schema, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64))
    bank.add_turn("Ann", "I grow tomatoes", "nice", at="2023-05-01T10:00")
    bank.set_layer("Ann", __import__("memory_bank").MemoryKind.GLOBAL_PORTRAIT, "A gardener.")
    expected = export_data(bank)
    bank.close()
    backup(tmp_path / "s", tmp_path / "b.mbk")
    url = f"{pg_url}?schema={pg_schema}"
    restore_backup(tmp_path / "b.mbk", url)
    backup(url, tmp_path / "pg.mbk")  # PostgreSQL's backup is the same one-file format
    restore_backup(tmp_path / "pg.mbk", tmp_path / "back")
    again = MemoryBank.open(tmp_path / "back", encoder_instance=HashingEncoder(64))
    assert export_data(again) == expected
    again.close()


def test_a_damaged_backup_is_refused(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64))
    bank.add_turn("Ann", "hello", "ok")
    bank.close()
    backup(tmp_path / "s", tmp_path / "b.mbk")
    with sqlite3.connect(tmp_path / "b.mbk") as conn:
        conn.execute("UPDATE memories SET kind = 'garbage'")
    conn.close()
    assert main(["restore-backup", str(tmp_path / "b.mbk"), "--store", str(tmp_path / "r")]) == 2
    assert "damaged" in capsys.readouterr().err
    assert not (tmp_path / "r" / DB_FILENAME).exists()
    (tmp_path / "empty.mbk").write_bytes(b"")
    with pytest.raises(Exception, match="0 bytes") as refused:
        restore_backup(tmp_path / "empty.mbk", tmp_path / "r2")
    assert "'memorybank backup' wrote" in str(refused.value) and "restore-backup" not in str(refused.value)


def test_a_file_that_is_no_backup_is_refused_in_words_about_that_file(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The refusal named the private copy it had just deleted ('/tmp/mb-restore-.../
    memorybank.sqlite3') and a store's advice (check --store, --data-dir; run 'memorybank
    check' on it); it now speaks of the file given, and of what to give instead."""
    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64))
    bank.add_turn("Ann", "hello", "ok")
    bank.close()
    backup(tmp_path / "s", tmp_path / "b.mbk")
    (tmp_path / "memories.json").write_text('{"Ann": {"history": {}}}')
    (tmp_path / "cut.mbk").write_bytes((tmp_path / "b.mbk").read_bytes()[:5000])
    for name, advice in (("memories.json", "'memorybank import'"), ("cut.mbk", "'memorybank backup' wrote")):
        given = str(tmp_path / name)
        assert main(["restore-backup", given, "--store", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert f"{given!r} is not a usable backup: it " in err and advice in err, err
        assert "mb-restore-" not in err and "--data-dir" not in err and "memorybank check" not in err, err
    assert not (tmp_path / "r" / DB_FILENAME).exists()


def test_a_backup_in_progress_is_private(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The copy being written beside ``--out`` was created under the umask (0644: readable by
    every local user, every memory in plain text), and a backup killed midway left it so."""
    import os

    import memory_bank.backup as backup_module

    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64))
    bank.add_turn("Ann", "my private diary", "safe with me", at="2023-05-01T09:00")
    bank.close()
    modes: list[int] = []
    copy = backup_module._sqlite_copy

    def watched(source, target):  # type: ignore[no-untyped-def]
        copy(source, target)
        modes.append(os.stat(target).st_mode & 0o777)  # as a kill right now would leave it

    monkeypatch.setattr(backup_module, "_sqlite_copy", watched)
    old = os.umask(0o022)
    try:
        backup(tmp_path / "s", tmp_path / "b.mbk")
    finally:
        os.umask(old)
    assert modes == [0o600]
    assert os.stat(tmp_path / "b.mbk").st_mode & 0o777 == 0o600


def test_a_live_store_file_is_not_taken_for_a_backup(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """restore-backup of a store's own database file restored it without the writes still in
    its write-ahead log beside it (5 of 6 turns, reported as a success)."""
    from memory_bank import InvalidInputError

    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64))
    for i in range(6):
        bank.add_turn("Ann", f"turn {i}", "ok", at="2023-05-01T09:00")
    with pytest.raises(InvalidInputError, match="not a backup"):
        restore_backup(tmp_path / "s" / DB_FILENAME, tmp_path / "restored")
    bank.close()
    assert not (tmp_path / "restored" / DB_FILENAME).exists()
    with pytest.raises(InvalidInputError, match="is not a file"):
        restore_backup(tmp_path / "s", tmp_path / "restored")
    backup(tmp_path / "s", tmp_path / "b.mbk")  # what it should be given instead
    (tmp_path / "a-file").write_text("mine", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="is a file, not a directory"):  # was FileExistsError
        restore_backup(tmp_path / "b.mbk", tmp_path / "a-file")
    assert (tmp_path / "a-file").read_text(encoding="utf-8") == "mine"
    assert restore_backup(tmp_path / "b.mbk", tmp_path / "restored")["memories"]["turn"] == 6


def test_copies_left_by_a_killed_backup_or_restore_are_removed_by_the_next(make_bank, stores, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess
    import sys
    import tempfile

    bank = make_bank()
    bank.add_turn("a", "my secret", "ok", at="2023-05-01T09:00")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone, alive = int(dead.stdout), os.getppid()  # a process that has ended, one that runs
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    left = [
        tmp_path / f".b.mbk.{gone}-abc",  # a backup's copy being written (named so before)
        tmp_path / f".b.mbk.{gone}-abc-journal",
        tmp_path / f".memorybank-partial.{gone}-abc.memories-2026-12-01.mbk",  # yesterday's dated backup
        tmp_path / f".memorybank-partial.{gone}-abc.memories-2026-12-01.mbk-journal",
        scratch / f"mb-restore-{gone}-xyz",  # a restore's private copy (a folder)
        tmp_path / "r" / f".{DB_FILENAME}.restore-{gone}-20260101T000000",
    ]
    kept = tmp_path / f".b.mbk.{alive}-def"  # another backup to the same name, still running
    running = tmp_path / f".memorybank-partial.{alive}-def.other.mbk"
    for path in [*left, kept, running]:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.name.startswith("mb-restore"):
            path.mkdir()
            (path / DB_FILENAME).write_text("every memory")
        else:
            path.write_text("every memory")
    backup(stores.spec, tmp_path / "b.mbk")
    restore_backup(tmp_path / "b.mbk", tmp_path / "r")
    assert [p.name for p in left if p.exists()] == []
    assert kept.exists() and running.exists()
    assert sorted(p.name for p in scratch.iterdir()) == []


def test_cli_messages_never_print_the_database_password(pg_url, pg_schema, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Every line the CLI prints about a PostgreSQL store names it without its password: the
    import and restore reports, the refusal to restore over a store, an encoder mismatch."""
    password = pg_url.split("@")[0].split(":")[-1]
    assert password
    url = f"{pg_url}?schema={pg_schema}"
    bank = MemoryBank.open(tmp_path / "s", encoder_instance=HashingEncoder(64))
    bank.add_turn("Ann", "I grow tomatoes", "nice", at="2023-05-01T10:00")
    bank.close()
    backup(tmp_path / "s", tmp_path / "b.mbk")
    memory_file = tmp_path / "m.json"
    memory_file.write_text('{"Bo": {"name": "Bo", "history": {"2023-05-02": [{"query": "hi", "response": "hey"}]}}}')

    assert main(["restore-backup", str(tmp_path / "b.mbk"), "--store", url]) == 0
    assert main(["restore-backup", str(tmp_path / "b.mbk"), "--store", url]) == 2  # refused: not empty
    assert main(["import", str(memory_file), "--store", url, "--encoder", "hashing-64"]) == 0
    assert main(["search", "--store", url, "--user", "Ann", "--encoder", "minilm", "tomatoes"]) == 2
    out = capsys.readouterr()
    printed = out.out + out.err
    assert "restored 1 users" in printed and "imported 1 memories" in printed
    assert "already holds a memory store" in printed and "reembed" in printed
    assert password not in printed


def test_a_restore_onto_a_full_disk_leaves_no_copy_and_names_the_target(make_bank, stores, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A restore that ran out of space left a readable copy of every memory beside the store
    (0644 in an existing folder) and blamed the backup file; it leaves nothing now and names
    the folder it could not write."""
    import errno
    import shutil

    from memory_bank.errors import StoreError

    make_bank().add_turn("a", "my secret", "ok", at="2023-05-01T09:00")
    backup(stores.spec, tmp_path / "b.mbk")
    target = tmp_path / "r"
    target.mkdir(mode=0o755)

    def full(src, dst, length=0):  # type: ignore[no-untyped-def]
        dst.write(src.read(4096))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfileobj", full)
    with pytest.raises(StoreError, match=r"could not restore into '.*/r': No space left on device"):
        restore_backup(tmp_path / "b.mbk", target)
    assert list(target.iterdir()) == []


def test_export_writes_through_a_link_and_refuses_devices_pipes_and_leftovers(make_bank, stores, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The rename that makes an export whole replaced a symlink (latest.json -> backups/x.json:
    the link became a file and x.json stayed stale) and a device or pipe (as root, --out
    /dev/null made /dev/null a file); a killed export's temporary copy of every memory stayed
    beside the target for good."""
    import json
    import os
    import subprocess
    import sys

    make_bank().add_turn("a", "my secret", "ok", at="2023-05-01T09:00")
    common = ["--store", str(stores.spec), "--encoder", "hashing-64"]
    (tmp_path / "backups").mkdir()
    real = tmp_path / "backups" / "x.json"
    real.write_text("{}")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = tmp_path / "backups" / f".x.json.export-{int(dead.stdout)}-abcdefgh"
    leftover.write_text("every memory")
    assert main(["export", *common, "--out", str(link), "--force"]) == 0
    assert link.is_symlink() and list(json.loads(real.read_text())) == ["a"]
    assert not leftover.exists()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["export", *common, "--out", str(fifo), "--force"]) == 2
    assert fifo.exists() and not fifo.is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
