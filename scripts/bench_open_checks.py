#!/usr/bin/env python3
"""What the checks made on opening a store cost: open with and without ``PRAGMA quick_check``,
and a full ``memorybank check``, on a store of N memories (default 100k), as JSON.

    python scripts/bench_open_checks.py --memories 100000 --json results/open_checks.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def build(store: Path, n: int, dim: int) -> None:
    from memory_bank.records import Memory, MemoryKind
    from memory_bank.stores.sqlite import SQLiteStorage

    s = SQLiteStorage(store)
    rng = np.random.default_rng(0)
    per_user = 10_000
    for u in range(max(1, n // per_user)):
        uid = s.ensure_user(f"user{u}").id
        mems = [
            Memory(memory_id=f"user{u}_{i}", user=f"user{u}", kind=MemoryKind.TURN,
                   date=f"2023-{1 + i % 12:02d}-{1 + i % 28:02d}", turn=i,
                   query=f"message {i} of user {u} about things", response="a reply of some length",
                   text=f"message {i} of user {u} about things\na reply of some length")
            for i in range(min(per_user, n - u * per_user))
        ]
        vecs = rng.standard_normal((len(mems), dim)).astype(np.float32)
        s.add_memories(uid, mems, vecs, f"hashing-{dim}")
    s.close()


def timed(fn, repeats: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memories", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384, help="vector size stored per memory (384 = MiniLM)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json")
    args = p.parse_args(argv)
    from memory_bank.backup import check_store
    from memory_bank.stores.sqlite import DB_FILENAME, SQLiteStorage

    store = Path(tempfile.mkdtemp(prefix="mb-open-")) / "store"
    build(store, args.memories, args.dim)
    size = (store / DB_FILENAME).stat().st_size
    with_qc = timed(lambda: SQLiteStorage(store).close(), args.repeats)
    without = timed(lambda: SQLiteStorage(store, quick_check=False).close(), args.repeats)

    def full() -> None:
        s = SQLiteStorage(store)
        assert check_store(s) == []
        s.close()

    result = {
        "memories": args.memories,
        "dim": args.dim,
        "file_mb": round(size / 2**20, 1),
        "open_with_quick_check_s": round(statistics.median(with_qc), 4),
        "open_without_quick_check_s": round(statistics.median(without), 4),
        "full_check_s": round(statistics.median(timed(full, 1)), 3),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
