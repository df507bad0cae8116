"""Fixtures running the storage suite on both backends: SQLite in a temporary directory, and
PostgreSQL in a fresh schema of the server named by ``MEMORYBANK_TEST_PG_URL`` (start a
throwaway one with ``eval "$(bash scripts/ci_postgres.sh)"``). PostgreSQL cases skip, saying
why, when that variable is unset."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memory_bank import MemoryBank, load_config
from memory_bank.embeddings import HashingEncoder
from memory_bank.stores import Storage
from memory_bank.stores.sqlite import SQLiteStorage

PG_ENV = "MEMORYBANK_TEST_PG_URL"
NO_PG = f'{PG_ENV} is not set; start a throwaway PostgreSQL with: eval "$(bash scripts/ci_postgres.sh)"'

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.integration)]


def pg_url_or_skip() -> str:
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(NO_PG)
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install 'memorybank-siliconfriend[postgres]'")
    return url


@pytest.fixture
def pg_url() -> str:
    return pg_url_or_skip()


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    """A schema of its own for one test, dropped afterwards."""
    import psycopg

    name = f"mbtest_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


class Stores:
    """Opens storages on one store: each call is a new connection set, like another server."""

    def __init__(self, backend: str, request: pytest.FixtureRequest, tmp_path: Any) -> None:
        self.backend = backend
        self.opened: list[Storage] = []
        if backend == "postgres":
            self.url = request.getfixturevalue("pg_url")
            self.schema = request.getfixturevalue("pg_schema")
            self.spec = f"{self.url}?schema={self.schema}"
        else:
            self.spec = str(tmp_path / "store")

    def __call__(self) -> Storage:
        storage: Storage
        if self.backend == "postgres":
            from memory_bank.stores.postgres import PostgresStorage

            storage = PostgresStorage(self.url, schema=self.schema)
        else:
            storage = SQLiteStorage(self.spec)
        self.opened.append(storage)
        return storage

    def close(self) -> None:
        for s in self.opened:
            s.close()


@pytest.fixture(params=BACKENDS)
def stores(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Stores]:
    s = Stores(request.param, request, tmp_path)
    yield s
    s.close()


@pytest.fixture
def storage(stores: Stores) -> Storage:
    return stores()


@pytest.fixture
def make_bank(stores: Stores, clock: Any) -> Iterator[Callable[..., MemoryBank]]:
    """Banks on the parametrized store; each call is another app server on the same data."""
    banks: list[MemoryBank] = []

    def make(encoder: Any = None, **overrides: Any) -> MemoryBank:
        cfg = load_config(None, store=stores.spec, **overrides)
        bank = MemoryBank(cfg, storage=stores(), encoder=encoder or HashingEncoder(64), clock=clock)
        banks.append(bank)
        return bank

    yield make
    for b in banks:
        b.close()


@pytest.fixture
def bank(make_bank: Callable[..., MemoryBank]) -> MemoryBank:
    return make_bank()
