"""Cold start and search core of one large user, before/after in the same run.

For each size: build a store once (synthetic dialog from ``memory_bank.bench.data``, vectors
near a random pool; reused from ``--workdir`` on later runs), then, alternating, build the
user's partition the way a restart does with the persisted lexical index and without it (the
old path: tokenise every memory), checking that both rank 30 queries identically; then time the
search core (the ranking with the query vector given) over many queries. Prints one JSON object
per size and writes them all to ``--json``, with the load average next to every figure: on a
shared machine compare the CPU seconds, and figures of the same run. Above the exact-search
limit it also reports the recall@5 of the final ranking against the same ranking with exact
dense search, for query vectors near the stored ones and for random ones.

    python scripts/bench_scale.py --sizes 10000,100000 --workdir /tmp/mb-scale --json docs/perf/scale.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from memory_bank import MemoryBank
from memory_bank.bench.data import DialogGenerator, synth_vectors
from memory_bank.bench.systems import turn_memories
from memory_bank.embeddings import HashingEncoder
from memory_bank.retrieval import rank

DIM = 384


def _pool() -> np.ndarray:
    """The 1,000 unit vectors the stored vectors are drawn near (see ``synth_vectors``)."""
    pool = np.random.default_rng(1).normal(size=(1000, DIM)).astype(np.float32)
    return pool / np.linalg.norm(pool, axis=1, keepdims=True)


def build(directory: Path, n: int) -> None:
    if (directory / "memorybank.sqlite3").exists():
        return
    turns = DialogGenerator(0).many(n)
    vecs = synth_vectors(_pool(), n)
    bank = MemoryBank.open(directory, encoder_instance=HashingEncoder(DIM))
    bank._writing_encoder()  # the store records its encoder, as every store written by a bank does
    rec = bank.user("big", create=True)
    mems = turn_memories("big", turns)
    for s in range(0, n, 20_000):
        bank.storage.add_memories(rec.id, mems[s : s + 20_000], vecs[s : s + 20_000], bank.encoder_name)
    bank.close()


def cold(directory: Path, snapshots: bool, queries: list[str], qv: np.ndarray) -> dict[str, Any]:
    """Open the store and build the user's partition; the ranking of every query."""
    bank = MemoryBank.open(directory, encoder_instance=HashingEncoder(DIM))
    if not snapshots:
        bank._cache.snapshots = None
    uid = bank.user("big").id
    wall, cpu = time.perf_counter(), time.process_time()
    part = bank._cache.get(uid)
    out: dict[str, Any] = {
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "load": os.getloadavg()[0],
    }
    today = dt.date(2030, 1, 1)
    out["ranks"] = [
        rank(part, q, v, 10, bank.config.retrieval, now=today).positions.tolist()
        for q, v in zip(queries, qv, strict=True)
    ]
    times, cpu_times = [], []
    for _ in range(5):
        for q, v in zip(queries, qv, strict=True):
            t, c = time.perf_counter(), time.thread_time()
            with part.lock:
                rank(part, q, v, 5, bank.config.retrieval, now=today)
            times.append(time.perf_counter() - t)
            cpu_times.append(time.thread_time() - c)
    out["search_core_ms_p50"] = 1000 * statistics.median(times)
    out["search_core_cpu_ms_p50"] = 1000 * statistics.median(cpu_times)
    dense = []
    for _ in range(5):
        for v in qv:
            c = time.thread_time()
            with part.lock:
                part.dense_top(v, 64)
            dense.append(time.thread_time() - c)
    out["dense_top_cpu_ms_p50"] = 1000 * statistics.median(dense)
    bank.close()
    return out


def recall(directory: Path, queries: list[str], qv: np.ndarray, k: int = 5) -> dict[str, Any]:
    """The approximate dense search's cost in results: the final top ``k`` against the same
    ranking with exact dense search (``recall@k`` and the share of identical lists)."""
    bank = MemoryBank.open(directory, encoder_instance=HashingEncoder(DIM))
    part = bank._cache.get(bank.user("big").id)
    today = dt.date(2030, 1, 1)

    def ranks() -> list[list[int]]:
        return [
            rank(part, q, v, k, bank.config.retrieval, now=today).positions.tolist()
            for q, v in zip(queries, qv, strict=True)
        ]

    approx, limit = ranks(), part.exact_limit
    part.set_exact_limit(len(part))
    exact = ranks()
    part.set_exact_limit(limit)
    bank.close()
    pairs = list(zip(approx, exact, strict=True))
    return {
        "approximate": len(part) > limit,
        "recall_at_5": sum(len(set(a) & set(e)) for a, e in pairs) / max(1, sum(len(e) for e in exact)),
        "identical_lists": sum(a == e for a, e in pairs) / len(pairs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--workdir", default="/tmp/mb-scale")
    ap.add_argument("--json")
    args = ap.parse_args()
    queries = DialogGenerator(7).queries(200)
    # Query vectors near the stored ones, as a real query's are near real memories: drawn the way
    # the memories are, from the same pool. Random unit vectors are near nothing (every cosine is
    # about 0), so an approximate index's recall on them says little; it is reported too.
    near = synth_vectors(_pool(), 1000 + len(queries), seed=99)[1000:]
    rng = np.random.default_rng(2)
    far = rng.normal(size=(len(queries), DIM)).astype(np.float32)
    far /= np.linalg.norm(far, axis=1, keepdims=True)
    qv = near[:30]
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        directory = Path(args.workdir) / f"store-{n}"
        build(directory, n)
        cold(directory, True, queries[:1], qv[:1])  # the first build stores the snapshot
        runs = {"snapshot": [], "tokenise": []}  # type: dict[str, list[dict[str, Any]]]
        for _ in range(2):  # interleaved
            runs["snapshot"].append(cold(directory, True, queries[:30], qv))
            runs["tokenise"].append(cold(directory, False, queries[:30], qv))
        identical = all(r["ranks"] == runs["tokenise"][0]["ranks"] for rs in runs.values() for r in rs)
        row = {
            "memories": n,
            "identical_rankings": identical,
            **{
                f"cold_{k}_{m}": statistics.median(r[m] for r in rs)
                for k, rs in runs.items()
                for m in ("wall_s", "cpu_s")
            },
            "search_core_ms_p50": statistics.median(
                r["search_core_ms_p50"] for rs in runs.values() for r in rs
            ),
            "search_core_cpu_ms_p50": statistics.median(
                r["search_core_cpu_ms_p50"] for rs in runs.values() for r in rs
            ),
            "dense_top_cpu_ms_p50": statistics.median(
                r["dense_top_cpu_ms_p50"] for rs in runs.values() for r in rs
            ),
            "load": [round(r["load"], 2) for rs in runs.values() for r in rs],
            "recall_near_queries": recall(directory, queries, near),
            "recall_random_queries": recall(directory, queries, far),
        }
        print(json.dumps(row), flush=True)
        results.append(row)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"results": results}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
