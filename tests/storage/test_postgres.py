"""What only the PostgreSQL store has: URLs and schemas, start-up checks, dropped connections,
vectors as float32 bytea, and errors that name the server but never the password."""

from __future__ import annotations

import numpy as np
import pytest

from memory_bank import InvalidInputError, Memory, MemoryBank, MemoryKind, StoreError, load_config
from memory_bank.embeddings import HashingEncoder
from memory_bank.stores import SCHEMA_VERSION, open_storage
from tests.conftest import UNDO_SCHEMA_6
from tests.storage.test_contract import ENC, turn, vec

pytestmark = pytest.mark.integration


@pytest.fixture
def pg(pg_url, pg_schema):  # type: ignore[no-untyped-def]
    from memory_bank.stores.postgres import PostgresStorage

    opened = []

    def make(**kw):  # type: ignore[no-untyped-def]
        s = PostgresStorage(pg_url, schema=pg_schema, **kw)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


def _sql(pg_url: str, schema: str, statement: str):  # type: ignore[no-untyped-def]
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else None


def test_store_url_selects_postgres_and_its_schema(pg_url, pg_schema) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.stores.postgres import PostgresStorage

    s = open_storage(f"{pg_url}?schema={pg_schema}")
    assert isinstance(s, PostgresStorage) and s.schema == pg_schema
    password = pg_url.split("@")[0].split(":")[-1]
    assert password not in repr(s) and password not in s.where
    s.ensure_user("Ann")
    assert _sql(pg_url, pg_schema, "SELECT name FROM users") == [("Ann",)]
    s.close()


def test_create_false_refuses_an_empty_database(pg_url, pg_schema) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StoreError, match="no memory store in"):
        open_storage(f"{pg_url}?schema={pg_schema}", create=False)


def test_tables_of_another_application_are_not_taken_over(pg, pg_url, pg_schema) -> None:  # type: ignore[no-untyped-def]
    _sql(pg_url, pg_schema, f'CREATE SCHEMA IF NOT EXISTS "{pg_schema}"')
    _sql(pg_url, pg_schema, "CREATE TABLE users (id serial primary key, email text)")
    with pytest.raises(StoreError, match="not a memory store's"):
        pg()


def test_unreachable_server_is_one_clear_error(pg_url) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.stores.postgres import PostgresStorage

    with pytest.raises(StoreError, match=r"cannot connect to the PostgreSQL store app@127\.0\.0\.1:1/mb") as e:
        PostgresStorage("postgresql://app:hunter2@127.0.0.1:1/mb?connect_timeout=2")
    assert "hunter2" not in str(e.value)
    with pytest.raises(InvalidInputError, match="not a valid PostgreSQL URL"):
        PostgresStorage("postgresql://app@db/mb?no_such_option=1")


def test_vectors_are_float32_bytea(pg, pg_url, pg_schema) -> None:  # type: ignore[no-untyped-def]
    s = pg()
    u = s.ensure_user("Ann").id
    m = s.add_turn(u, turn("Ann", "2023-05-01", "a"), vec(1, 2, 3, 4), ENC)
    ((dim, raw),) = _sql(pg_url, pg_schema, "SELECT dim, vector FROM embeddings")
    assert dim == 4 and len(raw) == 16
    np.testing.assert_array_equal(np.frombuffer(raw, dtype=np.float32), vec(1, 2, 3, 4))
    assert s.embeddings(u)[m.rowid or 0][0] == ENC


def test_a_connection_dropped_while_idle_is_reopened(pg, pg_url) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    s = pg()
    u = s.ensure_user("Ann").id

    def kill_pooled() -> None:  # e.g. the database restarted, or an idle timeout
        with s._db.connection() as c:
            pid = c.info.backend_pid
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    kill_pooled()
    assert s.user_state(u) == (0, 0)  # a read retries on a new connection
    kill_pooled()
    s.add_turn(u, turn("Ann", "2023-05-01", "a"), None, ENC)  # so does a write that sent nothing yet
    assert len(s.memories(u)) == 1


def test_connections_are_pooled_not_per_thread(pg) -> None:  # type: ignore[no-untyped-def]
    import threading

    s = pg(pool_size=2)
    u = s.ensure_user("Ann").id
    threads = [threading.Thread(target=lambda: [s.user_state(u) for _ in range(20)]) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(s._db._idle) <= 2 and not s._db._busy  # finished threads leave no connections behind
    s.close()
    assert s._db._idle == [] and s.user_state(u) == (0, 0)  # usable again after close, like SQLite


def test_nul_in_text_is_an_input_error(pg) -> None:  # type: ignore[no-untyped-def]
    s = pg()
    u = s.ensure_user("Ann").id
    bad = Memory(memory_id="x", user="Ann", kind=MemoryKind.GLOBAL_SUMMARY, date="2023-05-01", text="a\x00b")
    with pytest.raises(InvalidInputError, match="NUL"):
        s.add_memories(u, [bad], None, ENC)
    assert s.memories(u) == []


def test_a_sequence_that_hands_out_ids_out_of_order_is_refused(pg, pg_url, pg_schema) -> None:  # type: ignore[no-untyped-def]
    pg().close()
    _sql(pg_url, pg_schema, "ALTER SEQUENCE memories_id_seq CACHE 20")
    with pytest.raises(StoreError, match="CACHE 1"):
        pg()


def test_turn_positions_are_unique_in_the_database(pg, pg_url, pg_schema) -> None:  # type: ignore[no-untyped-def]
    """Even a writer that bypassed the user lock could not number two turns alike."""
    s = pg()
    u = s.ensure_user("Ann").id
    s.add_turn(u, turn("Ann", "2023-05-01", "a"), None, ENC)
    import psycopg

    with pytest.raises(psycopg.errors.UniqueViolation):
        _sql(pg_url, pg_schema, f"INSERT INTO memories(user_id, memory_id, kind, date, turn, text) "
                                f"VALUES ({u}, 'other', 'turn', '2023-05-01', 0, 'dup')")


def test_bank_from_config_url(pg_url, pg_schema) -> None:  # type: ignore[no-untyped-def]
    """What `store: postgresql://...` in the config does once bank.py uses stores.open_storage."""
    cfg = load_config(None, store=f"{pg_url}?schema={pg_schema}")
    bank = MemoryBank(cfg, storage=open_storage(cfg.store), encoder=HashingEncoder(64))
    bank.add_turn("Ann", "I adopted a cat named Miso.", "Lovely!")
    assert "Miso" in bank.search("Ann", "cat Miso", k=1)[0].memory.text
    bank.close()


def test_a_deadlock_is_retried(pg) -> None:  # type: ignore[no-untyped-def]
    """Two servers' transactions that lock two rows in opposite orders: PostgreSQL aborts one,
    and the store runs it again instead of failing the request."""
    import collections
    import threading

    a, b = pg(), pg()
    ua, ub = a.ensure_user("A").id, a.ensure_user("B").id
    first_locks_held = threading.Barrier(2)
    calls: collections.Counter[str] = collections.Counter()
    errors: list[BaseException] = []

    def txn(storage, first: int, second: int, name: str) -> None:  # type: ignore[no-untyped-def]
        def body(c):  # type: ignore[no-untyped-def]
            calls[name] += 1
            c.execute("UPDATE users SET extra = '{}' WHERE id = ?", (first,))
            if calls[name] == 1:
                first_locks_held.wait(30)
            c.execute("UPDATE users SET extra = '{}' WHERE id = ?", (second,))

        try:
            storage._write(body)
        except BaseException as e:  # re-raised in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=txn, args=(a, ua, ub, "x")), threading.Thread(target=txn, args=(b, ub, ua, "y"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    assert sorted(calls.values()) == [1, 2]  # one victim, run twice; both committed


def test_a_role_without_create_privilege_can_use_an_existing_store(pg, pg_url, pg_schema) -> None:  # type: ignore[no-untyped-def]
    """Servers can run as a role that may only read and write rows (no DDL at start-up)."""
    import uuid

    import psycopg

    pg().close()
    role, password = f"mb_app_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    try:
        _sql(pg_url, pg_schema, f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    except psycopg.errors.InsufficientPrivilege:
        pytest.skip("the test server's user may not create roles")
    try:
        for grant in (
            f'GRANT USAGE ON SCHEMA "{pg_schema}" TO {role}',
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{pg_schema}" TO {role}',
            f'GRANT USAGE ON ALL SEQUENCES IN SCHEMA "{pg_schema}" TO {role}',
        ):
            _sql(pg_url, pg_schema, grant)
        # as a store made before snapshots were stored uncompressed: the role may not change it
        _sql(pg_url, pg_schema, "ALTER TABLE lexical_snapshots ALTER COLUMN data SET STORAGE EXTENDED")
        from memory_bank.stores.postgres import PostgresStorage

        s = PostgresStorage(psycopg.conninfo.make_conninfo(pg_url, user=role, password=password), schema=pg_schema)
        u = s.ensure_user("Ann").id
        assert s.add_turn(u, turn("Ann", "2023-05-01", "a"), vec(1, 0, 0, 0), ENC).turn == 0
        s.close()
    finally:
        _sql(pg_url, pg_schema, f"DROP OWNED BY {role}")
        _sql(pg_url, pg_schema, f"DROP ROLE {role}")


def test_lexical_snapshots_are_stored_uncompressed(pg, pg_url, pg_schema) -> None:  # type: ignore[no-untyped-def]
    """pglz made a 100k-memory user's snapshot slower to read back than its 24 MB uncompressed;
    a store made before gets the setting at its next start by its owner."""
    storage = "SELECT attstorage FROM pg_attribute WHERE attrelid = 'lexical_snapshots'::regclass AND attname = 'data'"
    s = pg()
    assert _sql(pg_url, pg_schema, storage) == [("e",)]
    u = s.ensure_user("Ann").id
    data = b"the the the " * 20_000  # compressible: pglz would shrink it
    assert s.put_lexical_snapshot(u, ENC, "t1", s.user_counters(u)[1], data)
    assert s.lexical_snapshot(u, ENC, "t1") == data
    (size,) = _sql(pg_url, pg_schema, "SELECT pg_column_size(data) FROM lexical_snapshots")[0]
    assert size >= len(data)
    s.close()
    _sql(pg_url, pg_schema, "ALTER TABLE lexical_snapshots ALTER COLUMN data SET STORAGE EXTENDED")
    pg().close()
    assert _sql(pg_url, pg_schema, storage) == [("e",)]


def test_a_version_2_store_gains_the_weight_column(pg, pg_url, pg_schema) -> None:  # type: ignore[no-untyped-def]
    s = pg()
    u = s.ensure_user("Ann").id
    s.add_turn(u, turn("Ann", "2023-05-01", "My cat is Miso.", weight=2.0), vec(1, 0, 0, 0), ENC)
    s.close()
    for statement in UNDO_SCHEMA_6.split(";"):  # schema 6 is not rerun on its own columns
        if statement.strip():
            _sql(pg_url, pg_schema, statement)
    _sql(pg_url, pg_schema, "ALTER TABLE memories DROP COLUMN weight")
    _sql(pg_url, pg_schema, "UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    s = pg()
    assert _sql(pg_url, pg_schema, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    (m,) = s.memories(u)
    assert m.text == "My cat is Miso." and m.weight == 1.0  # stored before: neutral weight
    s.add_turn(u, turn("Ann", "2023-05-01", "Thanks!", weight=0.25), vec(0, 1, 0, 0), ENC)
    assert [x.weight for x in s.memories(u)] == [1.0, 0.25]
