"""Shared test fixtures: offline settings, paths to the shared data, a fixed clock."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

#: SQL (either backend's) that takes a store of the current schema back to version 6 (before the
#: retired memory ids).
UNDO_SCHEMA_7 = "DROP TABLE deleted_ids; "
#: SQL (either backend's) that takes a store of the current schema back to version 5 (before the
#: vector blocks and the tier counter): the first step of every test that builds an older layout.
UNDO_SCHEMA_6 = UNDO_SCHEMA_7 + (
    "DROP INDEX memories_hidden; DROP INDEX memories_archived; DROP INDEX embeddings_by_encoder; "
    "DROP TABLE vector_blocks; "
    "ALTER TABLE users DROP COLUMN tiers; "
)



def downgrade(storage: Any, undo: str, version: int) -> None:
    """Take an SQL store (either backend) back to schema ``version`` with the SQL ``undo`` (e.g.
    :data:`UNDO_SCHEMA_6`), in one write: how a test builds a store an older version made."""
    from memory_bank.stores.sql import statements

    def run(c: Any) -> None:
        for s in statements(undo + f"UPDATE meta SET value = '{version}' WHERE key = 'schema_version'"):
            c.execute(s)

    storage._write(run)


REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MEMORYBANK_SHARED_DATA", REPO.parent / "shared" / "data"))
PAPER_DATA = SHARED_DATA / "memorybank_eval"
LOCOMO_DEV = SHARED_DATA / "locomo" / "locomo_dev.json"


def paper_file(lang: str, kind: str) -> Path:
    """``kind``: 'memory' or 'questions'; ``lang``: 'en' or 'zh'. Skips if the data is absent."""
    folder = "en" if lang == "en" else "cn"
    suffix = "en" if lang == "en" else "cn"
    name = f"memory_bank_{suffix}.json" if kind == "memory" else f"probing_questions_{suffix}.jsonl"
    path = PAPER_DATA / folder / name
    if not path.is_file():
        pytest.skip(f"paper evaluation data not found at {path} (set MEMORYBANK_SHARED_DATA)")
    return path


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server() -> Iterator[str]:
    """llama_cpp.server with the packaged SmolLM2 on a free loopback port; yields its /v1 URL.
    Skips when the server's extra is not installed."""
    try:
        import llama_cpp.server.app  # noqa: F401
    except ImportError as e:
        pytest.skip(
            f"llama_cpp.server needs its extra: pip install sse-starlette 'starlette-context<0.4' ({e})"
        )
    from memory_bank.llm import default_gguf_path

    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                    json.load(r)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"llama_cpp.server did not start (exit code {proc.poll()})")
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


class FixedClock:
    """A clock tests can set and advance."""

    def __init__(self, start: str = "2023-05-01T12:00:00") -> None:
        self.now = dt.datetime.fromisoformat(start)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, days: float = 0, **kw: float) -> None:
        self.now += dt.timedelta(days=days, **kw)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def make_bank(tmp_path: Path, clock: FixedClock) -> Iterator[Any]:
    """Banks on the hashing encoder and the fixed clock, closed after the test (packages that need
    another encoder or store override this)."""
    from memory_bank import MemoryBank
    from memory_bank.embeddings import HashingEncoder

    banks: list[MemoryBank] = []

    def make(name: str = "store", **overrides: Any) -> MemoryBank:
        bank = MemoryBank.open(
            tmp_path / name, clock=clock, encoder_instance=HashingEncoder(256), **overrides
        )
        banks.append(bank)
        return bank

    yield make
    for b in banks:
        b.close()


@pytest.fixture
def bank(make_bank: Any) -> Any:
    return make_bank()
