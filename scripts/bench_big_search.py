"""One big user's search, timed in a fresh process: the restart (open the store and answer the
first search, the query embeddings computed before the clock), then the search p50 with the
query embedding (wall), the search core (the ranking with the query vector given, CPU) and the
dense stage alone (``Partition.dense_top``, CPU), with the load average.

Run it once per checkout, alternating, on a copy of the store (a restart may store a new
lexical snapshot): ``--code DIR`` is put first on ``sys.path``.

    for code in /tmp/old $PWD /tmp/old $PWD; do
        python scripts/bench_big_search.py --code $code --store /tmp/copy-1m --json big.jsonl
    done
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def run(store: Path, user: str, queries: int) -> dict[str, Any]:
    import numpy as np

    import memory_bank
    from memory_bank import MemoryBank
    from memory_bank.bench.data import DialogGenerator
    from memory_bank.retrieval import rank

    texts = DialogGenerator(11).queries(queries)
    bank = MemoryBank.open(store)
    enc = bank.encoder
    vectors = {q: np.asarray(enc.encode([q])[0]) for q in texts}
    bank.close()
    wall, cpu = time.perf_counter(), time.process_time()
    bank = MemoryBank.open(store, encoder_instance=enc)
    bank.search(user, texts[0], k=5)
    out: dict[str, Any] = {
        "code": str(Path(memory_bank.__file__).parent.parent),
        "restart_wall_s": time.perf_counter() - wall,
        "restart_cpu_s": time.process_time() - cpu,
        "load": os.getloadavg()[0],
    }
    walls = []
    for q in texts[1:]:
        t = time.perf_counter()
        bank.search(user, q, k=5)
        walls.append(time.perf_counter() - t)
    out["search_ms_p50"] = 1000 * statistics.median(walls)
    part = bank._cache.get(bank.user(user).id)
    core, dense = [], []
    for q in texts[1:]:
        t = time.thread_time()
        with part.lock:
            rank(part, q, vectors[q], 5, bank.config.retrieval)
        core.append(time.thread_time() - t)
        t = time.thread_time()
        with part.lock:
            part.dense_top(vectors[q], 64)
        dense.append(time.thread_time() - t)
    out["search_core_cpu_ms_p50"] = 1000 * statistics.median(core)
    out["dense_top_cpu_ms_p50"] = 1000 * statistics.median(dense)
    t = time.thread_time()
    for q in texts[:20]:
        enc.encode([q])
    out["embed_cpu_ms"] = 1000 * (time.thread_time() - t) / 20
    codes = part.dense_codes
    lists = None if codes is None else getattr(codes, "lists", None)
    out["memories"] = len(part)
    out["lists"] = None if lists is None else lists.nlist
    out["codes_trained"] = part.codes_trained
    out["load_after"] = os.getloadavg()[0]
    bank.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", type=Path, default=Path.cwd(), help="a directory holding memory_bank")
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--user", default="u0")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--json", type=Path, help="a JSON-lines file to append the result to")
    args = ap.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    row = run(args.store, args.user, args.queries)
    print(json.dumps(row), flush=True)
    if args.json:
        with args.json.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
