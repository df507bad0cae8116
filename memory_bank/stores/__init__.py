"""The store layer: where users, memories and their vectors live, chosen by URL.

>>> open_storage("./memories")                                  # doctest: +SKIP
>>> open_storage("sqlite:////srv/memorybank")                   # doctest: +SKIP
>>> open_storage("postgresql://app@db.internal/memorybank")     # doctest: +SKIP

A plain path (or ``sqlite:///relative/dir``, ``sqlite:////absolute/dir``, as in SQLAlchemy) is
the embedded SQLite store in that directory (:mod:`~memory_bank.stores.sqlite`);
``postgresql://`` (or ``postgres://``) is the shared PostgreSQL store
(:mod:`~memory_bank.stores.postgres`, needs the ``postgres`` extra). The contract a store
implements is :class:`~memory_bank.stores.base.Storage`; the SQL both backends share is
:mod:`~memory_bank.stores.sql`; copying one store into another is
:func:`memory_bank.stores.migrate.migrate`.

A new backend is one module defining ``BACKEND = Backend(open=..., describe=...)`` and one line
in ``_BACKENDS`` below (or a call to :func:`register_backend`). A backend's module is imported
only when a store of its scheme is opened, so psycopg loads only for PostgreSQL.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from memory_bank.errors import ConfigError
from memory_bank.stores.base import SCHEMA_VERSION, Backend, ForgetColumns, Storage, UserRecord, VectorBatch

__all__ = [
    "SCHEMA_VERSION",
    "Backend",
    "ForgetColumns",
    "Storage",
    "UserRecord",
    "VectorBatch",
    "describe_store",
    "open_storage",
    "register_backend",
]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

#: What a plain path (no ``scheme://``) opens.
DEFAULT_SCHEME = "sqlite"

#: URL scheme -> the backend, or the module whose ``BACKEND`` it is (imported on first use).
_BACKENDS: dict[str, Backend | str] = {
    "sqlite": "memory_bank.stores.sqlite",
    "postgresql": "memory_bank.stores.postgres",
    "postgres": "memory_bank.stores.postgres",
}


def register_backend(scheme: str, backend: Backend | str) -> None:
    """Make ``scheme://...`` store URLs open ``backend`` (a :class:`Backend`, or the name of a
    module defining ``BACKEND``, imported when such a store is first opened)."""
    _BACKENDS[scheme.lower()] = backend


def _backend(spec: str) -> Backend:
    m = _SCHEME.match(spec)
    scheme = m.group(1).lower() if m else DEFAULT_SCHEME
    entry = _BACKENDS.get(scheme)
    if entry is None:
        known = ", ".join(f"{s}://" for s in sorted(_BACKENDS))
        raise ConfigError(
            f"unknown store URL scheme {scheme!r} in {spec!r}; use a directory or one of {known}"
        )
    if isinstance(entry, str):
        entry = importlib.import_module(entry).BACKEND
        _BACKENDS[scheme] = entry
    assert isinstance(entry, Backend)
    return entry


def open_storage(url_or_dir: str | Path, *, create: bool = True) -> Storage:
    """The store named by ``url_or_dir``.

    * a directory path, or ``sqlite:///DIR`` (relative) / ``sqlite:////DIR`` (absolute): the
      SQLite store in that directory (a path to the ``memorybank.sqlite3`` file itself also works);
    * ``postgresql://user:password@host:port/dbname[?schema=NAME]``: the PostgreSQL store.

    With ``create=False`` a missing store is a :class:`StoreError` instead of a new empty one.
    """
    spec = str(url_or_dir)
    return _backend(spec).open(spec, create)


def describe_store(url_or_dir: str | Path) -> str:
    """A printable name of a store: its directory, or its URL without the password."""
    spec = str(url_or_dir)
    return _backend(spec).describe(spec)
