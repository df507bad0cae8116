"""A restart of a big store, timed in fresh processes: open the store and answer one user's first
search (its query embedding given, the model loaded before the clock starts), wall and CPU
seconds with the load average beside each figure.

Runs alternate between checkouts (``--code NAME=DIR``: a directory holding ``memory_bank``, put
first on ``sys.path``) and stores (``--store DIR``, each opened read-write: use copies), so a
busy machine tilts no pair. Whether the store's file was in the page cache is recorded as
``warm``: ``--cold`` drops this file's pages (``posix_fadvise``, this file only) before each run.

    python scripts/bench_restart.py --code old=/tmp/rs-old --code new=. \\
        --store /tmp/rs-1m --rounds 3 --json restart.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

QUERY = "What did we talk about when I mentioned my trip to the mountains?"

_CHILD = r"""
import json, os, resource, sys, time
code, store, user, query, cold = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1"
sys.path.insert(0, code)
import memory_bank
from memory_bank import MemoryBank
from memory_bank.bench.systems import CachingEncoder
from memory_bank.embeddings import get_encoder

enc = CachingEncoder(get_encoder("minilm"))
enc.cache[query] = enc.inner.encode([query])[0]
enc.use_cache = True
if cold:
    fd = os.open(os.path.join(store, "memorybank.sqlite3"), os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
load = os.getloadavg()[0]
w, c = time.perf_counter(), time.process_time()
bank = MemoryBank.open(store, encoder_instance=enc)
hits = bank.search(user, query, k=5)
wall, cpu = time.perf_counter() - w, time.process_time() - c
page = bank.storage._conn().execute("PRAGMA page_size").fetchone()[0]
print(json.dumps({
    "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "load": round(load, 2), "warm": not cold,
    "page_size": page, "memory_bank": os.path.dirname(memory_bank.__file__),
    "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
    "minor_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
    "top": [h.memory.memory_id for h in hits],
}))
bank.close()
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", action="append", required=True, help="NAME=DIR holding memory_bank")
    ap.add_argument("--store", action="append", required=True, help="store directory (a copy)")
    ap.add_argument("--user", default="u0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="drop the store file's pages before each run")
    ap.add_argument("--json", type=Path, help="write every run here")
    args = ap.parse_args()
    codes = [c.split("=", 1) for c in args.code]
    runs = []
    for r in range(args.rounds):
        for name, code in codes:
            for store in args.store:
                out = subprocess.run(
                    [sys.executable, "-c", _CHILD, str(Path(code).resolve()), store, args.user, QUERY,
                     "1" if args.cold else "0"],
                    capture_output=True, text=True, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                )  # fmt: skip
                run = {
                    "round": r,
                    "code": name,
                    "store": store,
                    **json.loads(out.stdout.strip().splitlines()[-1]),
                }
                runs.append(run)
                print(json.dumps(run), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                         "query": QUERY, "runs": runs}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
