#!/usr/bin/env python3
"""Cold start of one large user on PostgreSQL: the first partition build after a restart.

For each size, one user gets SIZE synthetic turns (``memory_bank.bench.data``, vectors near a
random pool, 384 dimensions, as ``scripts/bench_scale.py`` makes them) in the schema
``PREFIX<SIZE>`` (built once, reused by later runs), then a first load seals its vector
blocks and stores its lexical snapshot, and each round runs a fresh process that opens a new
bank on the store (new connections) and times ``PartitionCache.get``: wall and CPU seconds
(``time.process_time``: this process's threads) and, for a server on this machine, the CPU
seconds of its processes during the build (``/proc``), with the load average beside them: on
a shared machine compare CPU, client plus server. A digest of 30 queries' rankings lets two checkouts be
compared: run it once per checkout (``--code``), each with its own ``--prefix`` (a store
built by the code it measures), and compare the digests.

    eval "$(bash scripts/ci_postgres.sh)"
    nice -n 10 python scripts/bench_pg_cold.py --sizes 10000,100000 --rounds 5 --json runs/pg_cold.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DIM = 384


def _bank(url: str, schema: str) -> Any:
    from memory_bank import MemoryBank, load_config
    from memory_bank.embeddings import HashingEncoder
    from memory_bank.stores.postgres import PostgresStorage

    return MemoryBank(
        load_config(None), storage=PostgresStorage(url, schema=schema), encoder=HashingEncoder(DIM)
    )


def _pool() -> Any:
    """The unit vectors the stored vectors are drawn near (the pool of ``bench_scale.py``)."""
    import numpy as np

    pool = np.random.default_rng(1).normal(size=(1000, DIM)).astype(np.float32)
    return pool / np.linalg.norm(pool, axis=1, keepdims=True)


def build(url: str, schema: str, n: int) -> None:
    """The store of ``n`` memories, unless it is there."""

    from memory_bank.bench.data import DialogGenerator, synth_vectors
    from memory_bank.bench.systems import turn_memories

    bank = _bank(url, schema)
    rec = bank.storage.get_user("big")
    if rec is None or not bank.storage.has_memories(rec.id):
        vecs = synth_vectors(_pool(), n)
        bank._writing_encoder()
        uid = bank.user("big", create=True).id
        mems = turn_memories("big", DialogGenerator(0).many(n))
        for s in range(0, n, 20_000):
            bank.storage.add_memories(uid, mems[s : s + 20_000], vecs[s : s + 20_000], bank.encoder_name)
    bank.close()


def _server_cpu(postmaster: int | None) -> float | None:
    """CPU seconds of the server's processes so far (a server on this machine whose processes
    this user can read: then the figure counts this benchmark's backends and the server's
    background processes, which are idle here), else ``None``."""
    if postmaster is None:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:  # ppid
            total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / tick


def _postmaster(bank: Any) -> int | None:
    """The local server's postmaster process id, from its ``postmaster.pid``, if readable."""
    try:
        (directory,) = bank.storage._rows("SELECT current_setting('data_directory')")[0]
        return int((Path(directory) / "postmaster.pid").read_text().split()[0])
    except Exception:  # a remote server, no privilege to read the setting or the file
        return None


def cold(url: str, schema: str) -> dict[str, Any]:
    """One restart: a new bank, its first partition build timed, then the rankings' digest."""

    from memory_bank.bench.data import DialogGenerator, synth_vectors
    from memory_bank.retrieval import rank

    bank = _bank(url, schema)
    uid = bank.user("big").id
    postmaster = _postmaster(bank)
    server = _server_cpu(postmaster)
    wall, cpu = time.perf_counter(), time.process_time()
    part = bank._cache.get(uid)
    out: dict[str, Any] = {
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "load": os.getloadavg()[0],
        "memories": len(part),
    }
    after = _server_cpu(postmaster)
    out["server_cpu_s"] = None if server is None or after is None else after - server
    qv = synth_vectors(_pool(), 1030, seed=99)[1000:]  # near the stored vectors, as a query's are
    ranks = [
        rank(part, q, v, 10, bank.config.retrieval, now=dt.date(2030, 1, 1)).positions.tolist()
        for q, v in zip(DialogGenerator(7).queries(30), qv, strict=True)
    ]
    out["rankings_sha256"] = hashlib.sha256(json.dumps(ranks).encode()).hexdigest()
    bank.close()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--pg", default=os.environ.get("MEMORYBANK_TEST_PG_URL"), help="default: $MEMORYBANK_TEST_PG_URL"
    )
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--prefix", default="coldbench", help="schema name prefix (the size is appended)")
    p.add_argument(
        "--code", default=str(REPO), help="the checkout whose memory_bank is measured (default: this one)"
    )
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--one", help=argparse.SUPPRESS)  # a schema: one cold start, JSON on stdout
    args = p.parse_args()
    if not args.pg:
        p.error(
            "no PostgreSQL URL: pass --pg or set MEMORYBANK_TEST_PG_URL (scripts/ci_postgres.sh starts one)"
        )
    sys.path.insert(0, args.code)
    if args.one:
        print(json.dumps(cold(args.pg, args.one)))
        return 0
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        schema = f"{args.prefix}{n}"
        build(args.pg, schema, n)
        cold(args.pg, schema)  # seals the blocks and stores the lexical snapshot (once)
        runs = []
        for _ in range(args.rounds):
            done = subprocess.run(
                [sys.executable, __file__, "--pg", args.pg, "--code", args.code, "--one", schema],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        row = {
            "memories": n,
            "cold_wall_s": round(statistics.median(r["wall_s"] for r in runs), 3),
            "cold_cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 3),
            "cold_client_and_server_cpu_s": round(
                statistics.median(r["cpu_s"] + (r["server_cpu_s"] or 0.0) for r in runs), 3
            ),
            "wall_s": [round(r["wall_s"], 3) for r in runs],
            "cpu_s": [round(r["cpu_s"], 3) for r in runs],
            "server_cpu_s": [
                None if r["server_cpu_s"] is None else round(r["server_cpu_s"], 3) for r in runs
            ],
            "load": [round(r["load"], 2) for r in runs],
            "rankings_sha256": sorted({r["rankings_sha256"] for r in runs}),
            "code": args.code,
        }
        print(json.dumps(row), flush=True)
        results.append(row)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"results": results}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
