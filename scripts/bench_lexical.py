"""The lexical work of one search, the full-scan way and through a BM25 query, in one run.

A ranking asks BM25 for its best score, its ``candidates`` best memories and the scores of the
memories it ranks (about 560 at the default settings). Done the old way that is the full scan
(a score per memory), its maximum, ``stable_top`` over all scores and a gather; done the new way
it is one :class:`memory_bank.bm25.Bm25Query`. Both are timed on the same lexical index,
interleaved, in CPU time of the calling thread (the machine is shared), with the answers
checked identical. The index is the one ``scripts/bench_scale.py`` builds for a user of ``n``
synthetic memories (the same generator and texts), built in memory, so a million memories
need no store. The queries are the bench's 30 plus a few of rare words (English and Chinese),
reported apart: a rare word leaves most scores at zero, which is where the old selection
degraded.

    python scripts/bench_lexical.py --sizes 10000,100000 --json /tmp/lexical.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memory_bank.bench.data import DialogGenerator
from memory_bank.bench.systems import turn_memories
from memory_bank.index import LexicalIndex, stable_top
from memory_bank.text import tokenize

RARE = [
    "Do you remember the strategy we talked about?",
    "What did I say about the death of my hamster near the door?",
    "Which room did I book last week?",
    "你还记得我们在Vienna谈过的strategy吗？",
    "我上次说的那个room在哪里？",
]
SCORED = 560  # memories a default ranking scores (candidates and their neighbours)
CANDIDATES = 64


def full_scan(index: LexicalIndex, tokens: list[str], at: np.ndarray) -> tuple[Any, ...]:
    """What the ranking computed before: every score, the maximum, the top, the scored ones."""
    bm25 = index.score_array(tokens)
    best = float(bm25.max()) if len(bm25) else 0.0
    top = stable_top(bm25, CANDIDATES) if best > 0 else np.zeros(0, dtype=np.int64)
    top = top[bm25[top] > 0]
    return best, top, bm25[top], bm25[at]


def through_query(index: LexicalIndex, tokens: list[str], at: np.ndarray) -> tuple[Any, ...]:
    q = index.query(tokens)
    top, scores = q.top(CANDIDATES)
    return q.best(), top, scores, q.at(at)


def timed(fn: Callable[..., tuple[Any, ...]], *args: Any) -> tuple[float, tuple[Any, ...]]:
    start = time.thread_time()
    out = fn(*args)
    return time.thread_time() - start, out


def same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return a[0] == b[0] and all(
        np.asarray(x).tobytes() == np.asarray(y).tobytes() for x, y in zip(a[1:], b[1:], strict=True)
    )


def measure(index: LexicalIndex, queries: list[str], reps: int) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    toks = [tokenize(q) for q in queries]
    ats = [np.sort(rng.choice(len(index), SCORED, replace=False)) for _ in queries]
    old: list[list[float]] = [[] for _ in queries]
    new: list[list[float]] = [[] for _ in queries]
    identical = True
    for _ in range(reps):
        for i, (t, at) in enumerate(zip(toks, ats, strict=True)):
            t_old, a = timed(full_scan, index, t, at)
            t_new, b = timed(through_query, index, t, at)
            identical &= same(a, b)
            old[i].append(t_old)
            new[i].append(t_new)

    def figures(times: list[list[float]]) -> dict[str, float]:
        per_query = [statistics.median(ts) for ts in times]  # each query's median over the reps
        return {"p50": round(1000 * statistics.median(per_query), 3), "max": round(1000 * max(per_query), 3)}

    return {"full_scan_cpu_ms": figures(old), "query_cpu_ms": figures(new), "identical": identical}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        start = time.perf_counter()
        index = LexicalIndex()
        texts = [m.text for m in turn_memories("big", DialogGenerator(0).many(n))]
        for s in range(0, n, 20_000):
            index.add(texts[s : s + 20_000])
        del texts
        row = {
            "memories": n,
            "build_s": round(time.perf_counter() - start, 1),
            "bench_queries": measure(index, DialogGenerator(7).queries(30), args.reps),
            "rare_queries": measure(index, RARE, args.reps),
            "load": round(os.getloadavg()[0], 2),
        }
        print(json.dumps(row), flush=True)
        results.append(row)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"results": results}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
