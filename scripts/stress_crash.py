#!/usr/bin/env python3
"""Crash-safety stress tool: kill a writer with SIGKILL at random moments, then check the store.

A writer process adds turns in a loop and prints ``ack <n>`` after each ``add_turn`` returns.
The driver kills it with SIGKILL after a random delay, reopens the store and checks that:

* every acknowledged turn is there (no lost writes),
* nothing is duplicated (memory ids and (day, turn) positions are unique),
* the search index agrees with the store (every stored turn is searchable; the partition holds
  exactly the stored vectors), rebuilt from stored embeddings without re-embedding.

    python scripts/stress_crash.py --kills 100 --json results/crash.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def writer(store: str, start: int) -> None:
    from memory_bank import MemoryBank
    from memory_bank.embeddings import HashingEncoder

    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(64))
    # Resume after the last stored turn: a turn committed just before the previous kill was
    # never acknowledged, and re-adding it would be the client's duplicate, not the store's.
    stored = [int(m.query.split()[2]) for m in bank.history("crash-user")] if bank.has_user("crash-user") else []
    n = max([start - 1, *stored]) + 1
    while True:
        bank.add_turn("crash-user", f"message number {n} about topic {n % 17}", f"reply {n}",
                      at=f"2023-05-{1 + n % 28:02d}T10:00:00")
        print(f"ack {n}", flush=True)
        n += 1


def check(store: str, acked: set[int]) -> dict[str, object]:
    from memory_bank import MemoryBank
    from memory_bank.embeddings import HashingEncoder

    enc = HashingEncoder(64)
    calls = collections.Counter()
    orig = enc.encode

    def counting(texts):  # type: ignore[no-untyped-def]
        calls["texts"] += len(texts)
        return orig(texts)

    enc.encode = counting  # type: ignore[method-assign]
    bank = MemoryBank.open(store, encoder_instance=enc)
    problems: list[str] = []
    if not bank.has_user("crash-user"):
        bank.close()
        return {"stored": 0, "problems": [] if not acked else ["user missing although turns were acknowledged"]}
    turns = bank.history("crash-user")
    numbers = collections.Counter(int(m.query.split()[2]) for m in turns)
    lost = sorted(acked - set(numbers))
    if lost:
        problems.append(f"lost acknowledged turns: {lost[:10]}")
    dup = [n for n, c in numbers.items() if c > 1]
    if dup:
        problems.append(f"duplicated turns: {dup[:10]}")
    ids = collections.Counter(m.memory_id for m in turns)
    if any(c > 1 for c in ids.values()):
        problems.append("duplicate memory ids")
    positions = collections.Counter((m.date, m.turn) for m in turns)
    if any(c > 1 for c in positions.values()):
        problems.append("duplicate (day, turn) positions")
    # The index is rebuilt from stored vectors and agrees with the store.
    hits = bank.search("crash-user", "message", k=len(turns) + 5) if turns else []
    if len(hits) != len(turns):
        problems.append(f"index holds {len(hits)} turns but the store has {len(turns)}")
    if calls["texts"] > 1:
        problems.append(f"restart re-embedded {calls['texts'] - 1} memories")
    bank.close()
    return {"stored": len(turns), "problems": problems}


def run(kills: int, seed: int, max_delay: float, store: str | None) -> dict[str, object]:
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="mb-crash-")
    store = store or os.path.join(tmp, "store")
    acked: set[int] = set()
    results = []
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    for _ in range(kills):
        start = max(acked, default=-1) + 1
        # stderr goes to a file: with two pipes, communicate() would bypass the buffer that
        # readline() filled and lose acknowledgements.
        with tempfile.TemporaryFile(mode="w+") as errors:
            proc = subprocess.Popen(
                [sys.executable, __file__, "--writer", store, "--start", str(start)],
                stdout=subprocess.PIPE, stderr=errors, text=True, env=env,
            )
            assert proc.stdout is not None
            # Wait for the first ack so each round really writes, then kill at a random moment.
            first = proc.stdout.readline()
            if first.startswith("ack "):
                acked.add(int(first.split()[1]))
            time.sleep(rng.uniform(0, max_delay))
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate()
            errors.seek(0)
            err = errors.read()
        for line in out.splitlines():
            if line.startswith("ack "):
                acked.add(int(line.split()[1]))
        if not first.startswith("ack "):
            raise RuntimeError(f"writer failed to start: {err[-2000:]}")
        res = check(store, acked)
        results.append(res)
        if res["problems"]:
            break
    problems = [p for r in results for p in r["problems"]]  # type: ignore[attr-defined]
    return {"kills": len(results), "acknowledged": len(acked), "stored": results[-1]["stored"] if results else 0,
            "lost_writes": sum("lost" in p for p in problems), "problems": problems, "seed": seed}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kills", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-delay", type=float, default=0.5, help="longest time before a kill (s)")
    p.add_argument("--store", help="store directory (default: a new temporary one)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--writer", help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.writer:
        writer(args.writer, args.start)
        return 0
    result = run(args.kills, args.seed, args.max_delay, args.store)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
