#!/usr/bin/env python3
"""Add, search and restart figures for the PostgreSQL store beside SQLite, and the memory the
per-user search cache costs.

For each backend and size, one user gets SIZE synthetic turns (bulk insert), then:

* ``add``: ``bank.add_turn`` (embed, number the turn under the user lock, store turn + vector,
  mark the day's summaries stale), one at a time;
* ``search``: ``bank.search(k=2)`` on a warm cache (counter check, rank, fetch the hits);
* ``restart``: a new store object and bank (connect, schema check) and the first search, which
  loads the user's partition from the stored vectors (no re-embedding).

The encoder is the hashing encoder at 384 dimensions (MiniLM's size) so the figures are the
store's and the index's, not the model's; ``--encoder minilm`` includes the model. PostgreSQL runs
twice: with ``synchronous_commit=on`` (every commit waits for the WAL flush: durable across a
power cut) and ``off`` (like SQLite's WAL with ``synchronous=NORMAL``: durable across a crash of
the process, the last fraction of a second may be lost on power loss).

    eval "$(bash scripts/ci_postgres.sh)"
    .venv/bin/python scripts/bench_postgres.py --sizes 1000 10000 --out runs/bench_postgres.json

Cache bytes per memory: the partition (FAISS vectors, BM25 postings, per-memory metadata) built
from SIZE memories, measured with tracemalloc (Python and numpy allocations) plus the FAISS
index's own buffers (C++, which tracemalloc does not see).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from memory_bank import Memory, MemoryBank, MemoryKind, load_config, runinfo  # noqa: E402
from memory_bank.bench.data import DialogGenerator  # noqa: E402
from memory_bank.embeddings import Encoder, HashingEncoder, get_encoder  # noqa: E402
from memory_bank.index import Partition  # noqa: E402
from memory_bank.stores import Storage, VectorBatch  # noqa: E402
from memory_bank.stores.sqlite import SQLiteStorage  # noqa: E402

USER = "bench-user"


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) * 1000.0  # ms


def _memories(turns: list[Any]) -> list[Memory]:
    out: list[Memory] = []
    per_day: dict[str, int] = {}
    for t in turns:
        day = t.at.date().isoformat()
        n = per_day.get(day, 0)
        per_day[day] = n + 1
        out.append(
            Memory(memory_id=f"{USER}_{day}_{n}", user=USER, kind=MemoryKind.TURN, date=day, text=t.text,
                   turn=n, query=t.query, response=t.response, timestamp=t.at.isoformat(timespec="seconds"))
        )
    return out


def bench_store(factory: Callable[[], Storage], size: int, encoder: Encoder, args: argparse.Namespace) -> dict[str, Any]:
    gen = DialogGenerator(seed=args.seed)
    fill = _memories(gen.turns(size))
    adds = gen.turns(args.adds, first_day=size // 12 + 2)
    queries = gen.queries(args.searches)
    cfg = load_config(None)

    bank = MemoryBank(cfg, storage=factory(), encoder=encoder)
    t0 = time.perf_counter()
    bank.add_memories(USER, fill, batch_size=1000)
    fill_s = time.perf_counter() - t0
    bank.search(USER, queries[0], k=2)  # load the partition

    add_t = []
    for t in adds:
        t0 = time.perf_counter()
        bank.add_turn(USER, t.query, t.response, at=t.at)
        add_t.append(time.perf_counter() - t0)
    bank.search(USER, queries[0], k=2)  # catch the cache up with the adds
    search_t = []
    for q in queries:
        t0 = time.perf_counter()
        bank.search(USER, q, k=2)
        search_t.append(time.perf_counter() - t0)
    bank.close()

    restarts = []
    for _ in range(args.restarts):
        gc.collect()
        t0 = time.perf_counter()
        again = MemoryBank(cfg, storage=factory(), encoder=encoder)
        opened = time.perf_counter()
        again.search(USER, queries[1], k=2)
        done = time.perf_counter()
        restarts.append((done - t0, opened - t0, done - opened))
        again.close()
    total, open_s, first = (statistics.median(x) for x in zip(*restarts, strict=True))
    return {
        "memories": size + args.adds,
        "fill_s": round(fill_s, 3),
        "add_p50_ms": round(_pct(add_t, 50), 3),
        "add_p95_ms": round(_pct(add_t, 95), 3),
        "search_p50_ms": round(_pct(search_t, 50), 3),
        "search_p95_ms": round(_pct(search_t, 95), 3),
        "restart_s": round(total, 4),
        "restart_open_s": round(open_s, 4),
        "restart_first_search_s": round(first, 4),
    }


def cache_cost(size: int, dim: int, seed: int) -> dict[str, Any]:
    """Bytes per memory of one user's partition holding ``size`` memories."""
    turns = DialogGenerator(seed=seed).turns(size)
    mems = _memories(turns)
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((size, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    texts, kinds, dates = [m.text for m in mems], [m.kind.value for m in mems], [m.date for m in mems]
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    # Fresh string objects, as a database driver returns them; what the partition keeps of them
    # (dates, kinds) is counted, the rest (texts) is freed below.
    batch = VectorBatch(
        np.arange(1, size + 1, dtype=np.int64),
        vecs.copy(),
        [t.encode().decode() for t in texts],
        [k.encode().decode() for k in kinds],
        [d.encode().decode() for d in dates],
        [m.turn for m in mems],
    )
    part = Partition(dim)
    part.add(batch)
    part.lexical.scores(["the", "museum"])  # any lazily built search structures
    del batch
    gc.collect()
    python_bytes = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    faiss_bytes = 0  # the vectors are a numpy buffer (traced above); the packed codes are FAISS's own
    codes = part.dense_codes
    if codes is not None:
        faiss_bytes += len(codes) * codes.codes.shape[1]
    tokens = sum(len(set(t.lower().split())) for t in texts) / size
    return {
        "memories": size,
        "dim": dim,
        "faiss_bytes_per_memory": round(faiss_bytes / size, 1),
        "python_bytes_per_memory": round(python_bytes / size, 1),
        "total_bytes_per_memory": round((faiss_bytes + python_bytes) / size, 1),
        "total_mib": round((faiss_bytes + python_bytes) / 2**20, 2),
        "distinct_words_per_memory": round(tokens, 1),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pg", default=os.environ.get("MEMORYBANK_TEST_PG_URL"), help="PostgreSQL URL (default: $MEMORYBANK_TEST_PG_URL)")
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--adds", type=int, default=200)
    p.add_argument("--searches", type=int, default=200)
    p.add_argument("--restarts", type=int, default=3)
    p.add_argument("--encoder", default="hashing-384", help="hashing-384 (default) or minilm")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write the figures as JSON here")
    args = p.parse_args()

    encoder = HashingEncoder(384) if args.encoder == "hashing-384" else get_encoder(args.encoder)
    tmp = tempfile.TemporaryDirectory(prefix="mb-bench-")
    cleanups: list[Callable[[], None]] = [tmp.cleanup]
    pg_info: dict[str, Any] = {}

    def sqlite_backend(size: int) -> Callable[[], Storage]:
        d = Path(tmp.name) / f"sqlite-{size}"
        return lambda: SQLiteStorage(d)

    if args.pg:
        import psycopg

        from memory_bank.stores.postgres import PostgresStorage

        with psycopg.connect(args.pg, autocommit=True) as conn:
            for key in ("server_version", "fsync", "synchronous_commit", "shared_buffers", "wal_sync_method"):
                row = conn.execute(f"SHOW {key}").fetchone()
                pg_info[key] = row[0] if row else None
        schemas: list[str] = []

        def pg_backend(sync: bool) -> Callable[[int], Callable[[], Storage]]:
            def make(size: int) -> Callable[[], Storage]:
                schema = f"bench_{uuid.uuid4().hex[:10]}"
                schemas.append(schema)
                sep = "&" if "?" in args.pg else "?"
                url = args.pg if sync else f"{args.pg}{sep}options=-c%20synchronous_commit%3Doff"
                return lambda: PostgresStorage(url, schema=schema)

            return make

        def drop() -> None:
            with psycopg.connect(args.pg, autocommit=True) as conn:
                for s in schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{s}" CASCADE')

        cleanups.append(drop)
    results: list[dict[str, Any]] = []
    try:
        makers: dict[str, Callable[[int], Callable[[], Storage]]] = {"sqlite": sqlite_backend}
        if args.pg:
            makers["postgres"] = pg_backend(True)
            makers["postgres (synchronous_commit=off)"] = pg_backend(False)
        for size in args.sizes:
            for name, make in makers.items():
                r = {"backend": name, **bench_store(make(size), size, encoder, args)}
                results.append(r)
                print(json.dumps(r), file=sys.stderr)
        caches = [cache_cost(size, 384, args.seed) for size in args.sizes]
    finally:
        for cleanup in cleanups:
            cleanup()

    print(f"\n{'backend':34} {'memories':>8} {'fill s':>7} {'add p50':>8} {'add p95':>8} "
          f"{'search p50':>10} {'search p95':>10} {'restart s':>9}")
    for r in results:
        print(f"{r['backend']:34} {r['memories']:>8} {r['fill_s']:>7.2f} {r['add_p50_ms']:>6.2f}ms "
              f"{r['add_p95_ms']:>6.2f}ms {r['search_p50_ms']:>8.2f}ms {r['search_p95_ms']:>8.2f}ms "
              f"{r['restart_s']:>9.3f}")
    print(f"\n{'cache':34} {'memories':>8} {'FAISS B/mem':>11} {'BM25+meta B/mem':>15} {'total B/mem':>11} {'MiB':>6}")
    for c in caches:
        print(f"{'partition, 384-d':34} {c['memories']:>8} {c['faiss_bytes_per_memory']:>11.0f} "
              f"{c['python_bytes_per_memory']:>15.0f} {c['total_bytes_per_memory']:>11.0f} {c['total_mib']:>6.1f}")
    if args.out:
        import faiss

        meta = {
            "date": dt.datetime.now().isoformat(timespec="seconds"),
            "commit": runinfo.git_commit(),
            "config": {k: v for k, v in vars(args).items() if k != "pg"},
            "machine": runinfo.machine_info(),
            "versions": {
                "python": platform.python_version(),
                "numpy": np.__version__,
                "faiss": faiss.__version__,
                "sqlite": sqlite3.sqlite_version,
                "psycopg": __import__("psycopg").__version__ if args.pg else None,
                "postgresql": pg_info,
            },
        }
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({**meta, "results": results, "cache": caches}, indent=2), encoding="utf-8")
        print(f"\nwrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
