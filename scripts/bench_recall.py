"""Recall of the approximate dense search on real queries: the final top 5 against the same
ranking with exact dense search, and the dense top 64 against an exact scan, at several sizes,
scanning every code (``ivf: false``) and through the inverted lists (``ivf: true``, for each
number of lists probed in ``--nprobe``; where the partition has lists).

The store is one ``memorybank bench`` builds and keeps with ``--workdir`` (its user ``u0``: the
bench's dialog, vectors near a pool of real MiniLM embeddings); the queries are the bench's
question generator's, embedded with the store's encoder. Each size is the user's first memories
up to that rowid, in a partition built in memory (the store is only read).

    memorybank bench --sizes 1000000 --users 0 --forget-size 0 --no-chat --baselines none --workdir /tmp/mb
    python scripts/bench_recall.py --store /tmp/mb/memorybank-1000000 --sizes 100000,300000,1000000
    python scripts/bench_recall.py --store /tmp/mb/memorybank-1000000 --sizes 1100000 --nprobe 32,64,128 \
        --rescore-sqrt 2,3,4.5 --ivf on
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import memory_bank.dense_lists as lists_module
import memory_bank.index as index_module
from memory_bank import MemoryBank
from memory_bank.bench.data import DialogGenerator
from memory_bank.index import Partition, rescore_size, stable_top
from memory_bank.records import RETRIEVABLE_KINDS
from memory_bank.retrieval import rank


def measure(
    bank: MemoryBank,
    uid: int,
    upto: int,
    queries: list[str],
    qv: np.ndarray,
    factors: list[float],
    modes: list[int | None],
    list_limit: int | None = None,
) -> list[dict[str, Any]]:
    """The recall and dense search time at the user's first memories up to rowid ``upto``, for
    each ``RESCORE_SQRT`` in ``factors`` (the rescoring rule's growth with the partition) and
    each mode: ``None`` scans every code, a number probes that many inverted lists (0: as many
    as :func:`memory_bank.dense_lists.probe_count` says)."""
    part = Partition(bank.encoder.dim)
    if list_limit is not None:
        part.list_limit = list_limit
    t = time.process_time()
    part.add(bank.storage.vectors(uid, bank.encoder_name, RETRIEVABLE_KINDS, 0, upto_rowid=upto))
    build_s = time.process_time() - t
    xb = part.vectors_at(np.arange(len(part)))
    exact_dense = [set(stable_top(xb @ v, 64).tolist()) for v in qv]
    cfg = bank.config.retrieval

    def ranks() -> list[list[int]]:
        return [rank(part, q, v, 5, cfg).positions.tolist() for q, v in zip(queries, qv, strict=True)]

    limit, list_limit = part.exact_limit, part.list_limit
    part.set_exact_limit(len(part) + 1)
    exact = ranks()
    part.set_exact_limit(limit)
    rows = []
    default_probes = lists_module.probe_count
    has_lists = part.dense_codes is not None and part.dense_codes.lists is not None
    for mode in modes:
        if mode is not None and not has_lists:
            continue
        part.set_list_limit(list_limit if mode is not None else len(part) + 1)
        lists_module.probe_count = default_probes if not mode else (lambda nlist, p=mode: min(nlist, p))  # type: ignore[misc]
        lists = part.dense_codes.lists if part.dense_codes is not None else None
        for factor in factors:
            index_module.RESCORE_SQRT = factor
            approx = ranks()
            dense = [set(part.dense_top(v, 64)[0].tolist()) for v in qv]
            times = []
            for v in qv:
                t = time.thread_time()
                part.dense_top(v, 64)
                times.append(time.thread_time() - t)
            pairs = list(zip(approx, exact, strict=True))
            rows.append({
                "memories": len(part),
                "approximate": part.approximate,
                "ivf": lists is not None,
                "nlist": None if lists is None else lists.nlist,
                "nprobe": None if lists is None else lists_module.probe_count(lists.nlist),
                "rescore_sqrt": factor,
                "rescored": rescore_size(len(part)),
                "recall_at_5": sum(len(set(a) & set(e)) for a, e in pairs) / max(1, sum(len(e) for e in exact)),
                "identical_lists": sum(a == e for a, e in pairs) / len(pairs),
                "dense_recall_at_64": float(
                    np.mean([len(a & e) / 64 for a, e in zip(dense, exact_dense, strict=True)])
                ),
                "dense_top_cpu_ms_p50": 1000 * statistics.median(times),
                "partition_build_cpu_s": build_s,
                "load": os.getloadavg()[0],
            })  # fmt: skip
    lists_module.probe_count = default_probes
    part.set_list_limit(list_limit)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, type=Path)
    ap.add_argument("--user", default="u0")
    ap.add_argument("--sizes", default="100000,300000,1000000", help="rowid bounds")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument(
        "--rescore-sqrt", default=str(index_module.RESCORE_SQRT), help="factors to compare, e.g. 3,4.5,6"
    )
    ap.add_argument(
        "--nprobe", default="0", help="inverted lists probed, e.g. 32,64,128 (0: the library's rule)"
    )
    ap.add_argument(
        "--ivf",
        choices=["on", "off", "both"],
        default="both",
        help="scan through the lists, every code, or both",
    )
    ap.add_argument("--list-limit", type=int, help="lists from this many memories (default: the library's)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    bank = MemoryBank.open(args.store)  # the default encoder; a store of another says which to pass
    uid = bank.user(args.user).id
    queries = DialogGenerator(11).queries(args.queries)
    qv = np.asarray(bank.encoder.encode(queries), dtype=np.float32)
    modes: list[int | None] = [] if args.ivf == "on" else [None]
    if args.ivf != "off":
        modes += [int(p) for p in args.nprobe.split(",")]
    factors = [float(f) for f in args.rescore_sqrt.split(",")]
    rows = []
    for upto in (int(x) for x in args.sizes.split(",")):
        for row in measure(bank, uid, upto, queries, qv, factors, modes, args.list_limit):
            print(json.dumps(row), flush=True)
            rows.append(row)
    bank.close()
    if args.json:
        args.json.write_text(json.dumps({"results": rows}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
