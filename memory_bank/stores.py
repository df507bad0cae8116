"""Choosing a store by URL, and copying one store into another.

>>> open_storage("./memories")                                  # doctest: +SKIP
>>> open_storage("sqlite:////srv/memorybank")                   # doctest: +SKIP
>>> open_storage("postgresql://app@db.internal/memorybank")     # doctest: +SKIP

A plain path (or ``sqlite:///relative/dir``, ``sqlite:////absolute/dir``, as in SQLAlchemy) is the
embedded SQLite store in that directory; ``postgresql://`` (or ``postgres://``) is the shared
PostgreSQL store (:mod:`memory_bank.storage_postgres`, needs the ``postgres`` extra).
:func:`migrate` copies every user, memory (every field) and stored embedding from one store to
another, in either direction, and verifies the copy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memory_bank.errors import ConfigError, InvalidInputError, StoreError
from memory_bank.records import Memory, MemoryKind
from memory_bank.storage import DB_FILENAME, SQLiteStorage, Storage

logger = logging.getLogger(__name__)

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
POSTGRES_SCHEMES = ("postgresql", "postgres")


def _sqlite_dir(spec: str) -> Path:
    path = Path(spec).expanduser()
    return path.parent if path.name == DB_FILENAME else path


def describe_store(url_or_dir: str | Path) -> str:
    """A printable name of a store: its directory, or its URL without the password."""
    s = str(url_or_dir)
    m = _SCHEME.match(s)
    if m and m.group(1).lower() in POSTGRES_SCHEMES:
        from memory_bank.postgres_db import describe_url, split_schema

        url, schema = split_schema(s)
        return f"postgresql://{describe_url(url)}" + (f"?schema={schema}" if schema else "")
    if m and m.group(1).lower() == "sqlite":
        return str(_sqlite_dir(s[len("sqlite:///") :]).resolve())
    return str(_sqlite_dir(s).resolve())


def open_storage(url_or_dir: str | Path, *, create: bool = True) -> Storage:
    """The store named by ``url_or_dir``.

    * a directory path, or ``sqlite:///DIR`` (relative) / ``sqlite:////DIR`` (absolute):
      :class:`~memory_bank.storage.SQLiteStorage` in that directory (a path to the
      ``memorybank.sqlite3`` file itself also works);
    * ``postgresql://user:password@host:port/dbname[?schema=NAME]``:
      :class:`~memory_bank.storage_postgres.PostgresStorage`.

    With ``create=False`` a missing store is a :class:`StoreError` instead of a new empty one.
    """
    s = str(url_or_dir)
    m = _SCHEME.match(s)
    if m is None:
        return SQLiteStorage(_sqlite_dir(s), create=create)
    scheme = m.group(1).lower()
    if scheme in POSTGRES_SCHEMES:
        from memory_bank.storage_postgres import PostgresStorage

        return PostgresStorage(s, create=create)
    if scheme == "sqlite":
        if not s.startswith("sqlite:///") or len(s) == len("sqlite:///"):
            raise ConfigError(
                f"store URL {s!r} has no path; write sqlite:///relative/dir or sqlite:////absolute/dir"
            )
        return SQLiteStorage(_sqlite_dir(s[len("sqlite:///") :]), create=create)
    raise ConfigError(
        f"unknown store URL scheme {scheme!r} in {s!r}; use a directory, sqlite:///DIR or postgresql://..."
    )


# -- migration ---------------------------------------------------------------------------------
def stored_embeddings(storage: Storage, user_id: int) -> dict[int, tuple[str, np.ndarray]]:
    """Every stored vector of a user's memories, archived ones included: ``rowid -> (encoder,
    vector)``. Uses ``storage.embeddings()`` where the store has it (PostgreSQL); for SQLite it
    reads the table through the thread's connection, so it shares an open ``snapshot()``.
    """
    method = getattr(storage, "embeddings", None)
    if callable(method):
        out: dict[int, tuple[str, np.ndarray]] = method(user_id)
        return out
    if isinstance(storage, SQLiteStorage):
        rows = (
            storage._conn()
            .execute(
                "SELECT e.memory_rowid, e.encoder, e.vector FROM embeddings e "
                "JOIN memories m ON m.id = e.memory_rowid WHERE m.user_id = ? ORDER BY e.memory_rowid",
                (user_id,),
            )
            .fetchall()
        )
        return {int(r[0]): (r[1], np.frombuffer(r[2], dtype=np.float32)) for r in rows}
    raise StoreError(f"{type(storage).__name__} cannot list stored embeddings; it cannot be migrated")


def _fingerprint(memories: list[Memory], vectors: list[tuple[str, np.ndarray] | None]) -> str:
    """A digest of every field of every memory (rowids aside) and of its stored vector."""
    h = hashlib.sha256()
    for m, v in sorted(zip(memories, vectors, strict=True), key=lambda p: p[0].memory_id):
        fields = dataclasses.asdict(m)
        fields.pop("rowid")
        fields["kind"] = m.kind.value
        h.update(repr(sorted(fields.items())).encode())
        if v is not None:
            h.update(v[0].encode() + b"\0" + np.ascontiguousarray(v[1], dtype=np.float32).tobytes())
        h.update(b"\x1e")
    return h.hexdigest()


def _tally(memories: list[Memory], vectors: dict[int, tuple[str, np.ndarray]]) -> dict[str, Any]:
    kinds = {k.value: 0 for k in MemoryKind}
    for m in memories:
        kinds[m.kind.value] += 1
    return {
        "memories": kinds,
        "archived": sum(m.archived for m in memories),
        "embeddings": sum(1 for m in memories if m.rowid in vectors),
        "fingerprint": _fingerprint(memories, [vectors.get(m.rowid or 0) for m in memories]),
    }


@contextmanager
def _opened(store: Storage | str | Path, *, create: bool) -> Iterator[Storage]:
    if isinstance(store, Storage):
        yield store
        return
    opened = open_storage(store, create=create)
    try:
        yield opened
    finally:
        opened.close()


def _progress_bar(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total, desc="migrating", unit="memory", disable=None if enabled else True, file=sys.stderr
    )


def migrate(
    src: Storage | str | Path,
    dst: Storage | str | Path,
    progress: bool = True,
    *,
    replace: bool = False,
    batch_size: int = 1000,
    on_user: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Copy every user, memory (context, extra, strength, recall date, archived and stale flags
    included) and stored embedding from ``src`` to ``dst`` (stores or their URLs/directories).

    Each user is read in one snapshot and written in batches; vectors are copied as stored, never
    re-embedded. A user that already exists in ``dst`` is an error unless ``replace=True`` (then
    it is deleted there first), so rerunning an interrupted migration needs ``replace=True``.
    At the end every user is read back from ``dst`` and compared with what was read from
    ``src``: counts per kind, archived, embeddings, and a digest of every field and vector.
    A mismatch raises :class:`StoreError`. Stop writers to ``src`` while it runs (or accept that
    their writes are not copied; the final total check reports it).

    Returns ``{"users": n, "memories": {kind: n}, "archived": n, "embeddings": n}``.
    """
    if batch_size < 1:
        raise InvalidInputError(f"batch_size must be at least 1, got {batch_size}")
    with _opened(src, create=False) as source, _opened(dst, create=True) as target:
        return _migrate(source, target, progress, replace, batch_size, on_user)


def _migrate(
    src: Storage,
    dst: Storage,
    progress: bool,
    replace: bool,
    batch_size: int,
    on_user: Callable[[str], None] | None,
) -> dict[str, Any]:
    users = src.list_users()
    clashes = [u.name for u in users if dst.get_user(u.name) is not None]
    if clashes and not replace:
        raise InvalidInputError(
            f"the destination already has {len(clashes)} of these users ({', '.join(map(repr, clashes[:5]))}"
            f"{', ...' if len(clashes) > 5 else ''}); pass replace=True (--replace) to overwrite them"
        )
    dst_was_empty = not dst.list_users()
    before = src.counts()
    totals: dict[str, Any] = {
        "users": 0,
        "memories": {k.value: 0 for k in MemoryKind},
        "archived": 0,
        "embeddings": 0,
    }
    with _progress_bar(sum(before["memories"].values()), progress) as bar:
        for user in users:
            with src.snapshot():
                rec = next((u for u in src.list_users() if u.id == user.id), None)
                if rec is None:  # deleted meanwhile
                    continue
                mems = sorted(src.memories(rec.id), key=lambda m: m.rowid or 0)
                vecs = stored_embeddings(src, rec.id)
            expected = _tally(mems, vecs)
            if rec.name in clashes:
                old = dst.get_user(rec.name)
                if old is not None:
                    dst.delete_user(old.id)
            new = dst.ensure_user(rec.name, rec.extra)
            dst.set_user_extra(new.id, rec.extra)
            if rec.last_forget_date:
                dst.set_forget_date(new.id, rec.last_forget_date)
            rowid_map: dict[int, int] = {}
            for start in range(0, len(mems), batch_size):
                chunk = [dataclasses.replace(m, rowid=None) for m in mems[start : start + batch_size]]
                new_ids = dst.add_memories(new.id, chunk, None, "")
                rowid_map.update(
                    zip((m.rowid or 0 for m in mems[start : start + batch_size]), new_ids, strict=True)
                )
                bar.update(len(chunk))
            by_encoder: dict[tuple[str, int], list[tuple[int, np.ndarray]]] = {}
            for old_id, (encoder, vec) in vecs.items():
                if old_id in rowid_map:
                    by_encoder.setdefault((encoder, len(vec)), []).append((rowid_map[old_id], vec))
            for (encoder, _dim), items in by_encoder.items():
                for start in range(0, len(items), batch_size):
                    part = items[start : start + batch_size]
                    dst.put_vectors([r for r, _ in part], np.stack([v for _, v in part]), encoder)
            got_mems = sorted(dst.memories(new.id), key=lambda m: m.rowid or 0)
            got = _tally(got_mems, stored_embeddings(dst, new.id))
            if got != expected:
                problems = [k for k in expected if expected[k] != got[k]]
                raise StoreError(
                    f"verification failed for user {rec.name!r}: {', '.join(problems)} differ "
                    f"(source {[expected[k] for k in problems]}, destination {[got[k] for k in problems]})"
                )
            totals["users"] += 1
            for kind, n in expected["memories"].items():
                totals["memories"][kind] += n
            totals["archived"] += expected["archived"]
            totals["embeddings"] += expected["embeddings"]
            if on_user:
                on_user(rec.name)
    after = src.counts()
    if after != before:
        logger.warning("the source changed during the migration; writes made meanwhile may be missing")
    if dst_was_empty:
        final = dst.counts()
        if (final["users"], final["memories"], final["archived"]) != (
            totals["users"],
            totals["memories"],
            totals["archived"],
        ):
            raise StoreError(
                f"verification failed: the destination holds {final} but {totals} were copied; "
                "was it written to during the migration?"
            )
    logger.info("migrated %d users, %d memories", totals["users"], sum(totals["memories"].values()))
    return totals
