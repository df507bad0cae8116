#!/usr/bin/env python3
"""Crash-safety stress tool: kill a writer with SIGKILL at random moments, then check the store.

A writer process adds turns in a loop and prints ``ack <n>`` after each ``add_turn`` returns.
The driver kills it with SIGKILL after a random delay, reopens the store and checks that:

* every acknowledged turn is there (no lost writes),
* nothing is duplicated (memory ids and (day, turn) positions are unique),
* the search index agrees with the store (every stored turn is searchable; the partition holds
  exactly the stored vectors), rebuilt from stored embeddings without re-embedding.

    python scripts/stress_crash.py --kills 100 --json results/crash.json

``--imports N`` then also kills ``memorybank import`` N times at random moments, alternately
replacing every user with another version of their history (``--replace``) and importing into
an empty store, and checks after each kill that every user holds exactly one whole version (no
half-imported or half-replaced user, no lost user, a user outside the file untouched), and that
running the interrupted import again finishes it without ``--replace`` and without duplicates.
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
    from memory_bank.encoder_identity import PROBE_TEXT

    enc = HashingEncoder(64)
    calls = collections.Counter()
    orig = enc.encode

    def counting(texts):  # type: ignore[no-untyped-def]
        if list(texts) != [PROBE_TEXT]:  # the store's encoder check embeds its probe once
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


IMPORT_USERS, IMPORT_DAYS, IMPORT_TURNS = 6, 10, 30


def memory_file(path: Path, version: str) -> None:
    """A memory file of IMPORT_USERS users whose every turn names ``version``."""
    data = {
        f"user{u}": {
            "name": f"user{u}",
            "history": {
                f"2023-05-{d + 1:02d}": [
                    {"query": f"{version} user {u} day {d} turn {t} about kites", "response": f"{version} ok"}
                    for t in range(IMPORT_TURNS)
                ]
                for d in range(IMPORT_DAYS)
            },
        }
        for u in range(IMPORT_USERS)
    }
    path.write_text(json.dumps(data))


def _cli(store: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "memory_bank.cli", *args, "--store", store, "--encoder", "hashing-64"]


def check_import(store: str, allowed: set[str], bystander: bool) -> list[str]:
    """Every user of the file holds one whole version of ``allowed`` (or is absent, if "absent"
    is allowed); the bystander (not in the file) still has its one turn."""
    from memory_bank import MemoryBank
    from memory_bank.embeddings import HashingEncoder

    problems: list[str] = []
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(64))
    try:
        for u in range(IMPORT_USERS):
            name = f"user{u}"
            if not bank.has_user(name):
                if "absent" not in allowed:
                    problems.append(f"{name} is gone")
                continue
            turns = bank.history(name)
            versions = collections.Counter(m.query.split()[0] for m in turns)
            if len(versions) != 1 or next(iter(versions)) not in allowed:
                problems.append(f"{name} holds a mixture: {dict(versions)}")
            elif len(turns) != IMPORT_DAYS * IMPORT_TURNS:
                problems.append(f"{name} is partial: {len(turns)} of {IMPORT_DAYS * IMPORT_TURNS} turns")
            if len({m.memory_id for m in turns}) != len(turns):
                problems.append(f"{name} has duplicate memory ids")
            hits = bank.search(name, "kites", k=len(turns) + 5)
            if len(hits) != len(turns):
                problems.append(f"{name}: the index holds {len(hits)} of {len(turns)} turns")
        if bystander and [m.query for m in bank.history("bystander")] != ["I stay out of imports"]:
            problems.append("the user outside the file was touched")
    finally:
        bank.close()
    return problems


def run_imports(kills: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed + 1)
    tmp = Path(tempfile.mkdtemp(prefix="mb-crash-import-"))
    files = {v: tmp / f"{v}.json" for v in ("v1", "v2")}
    for v, f in files.items():
        memory_file(f, v)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    problems: list[str] = []
    stats = {"replace_kills": 0, "fresh_kills": 0, "reruns_to_finish": 0}

    window = [1.0]  # how long an uninterrupted import writes, measured below

    def files_state(store_dir: str) -> tuple[float, ...]:
        d = Path(store_dir)
        return tuple(
            p.stat().st_mtime_ns if p.exists() else 0.0
            for p in (d / "memorybank.sqlite3", d / "memorybank.sqlite3-wal")
        )

    def first_write(proc: subprocess.Popen[bytes], store_dir: str) -> float:
        """Wait until the import writes to the store (start-up takes seconds); when it did."""
        before = files_state(store_dir)
        while proc.poll() is None and files_state(store_dir) == before:
            time.sleep(0.002)
        return time.monotonic()

    def killed_run(cmd: list[str], store_dir: str) -> int | None:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        first_write(proc, store_dir)
        try:  # kill at a random moment of the writing
            return proc.wait(rng.uniform(0, 1.1 * window[0]))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return None

    # 1. --replace killed at random moments: each user stays wholly old or becomes wholly new.
    base = str(tmp / "replace-store")
    proc = subprocess.Popen(_cli(base, "import", str(files["v1"])), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = first_write(proc, base)
    if proc.wait() != 0:
        raise RuntimeError("the first import failed")
    window[0] = time.monotonic() - started
    subprocess.run(_cli(base, "add", "--user", "bystander", "--query", "I stay out of imports"),
                   check=True, env=env, capture_output=True)
    current = {"v1"}
    for i in range(kills):
        target = "v2" if i % 2 == 0 else "v1"
        code = killed_run(_cli(base, "import", str(files[target]), "--replace"), base)
        stats["replace_kills"] += code is None
        current = {target} if code == 0 else current | {target}
        problems += check_import(base, current, bystander=True)
        if problems:
            break
    # 2. A fresh import killed, then the same command run again (no --replace) finishes it.
    for i in range(kills if not problems else 0):
        fresh = str(tmp / f"fresh-{i}")
        code = killed_run(_cli(fresh, "import", str(files["v1"])), fresh)
        stats["fresh_kills"] += code is None
        problems += check_import(fresh, {"v1", "absent"}, bystander=False)
        done = subprocess.run(_cli(fresh, "import", str(files["v1"])), env=env, capture_output=True, text=True)
        stats["reruns_to_finish"] += 1
        if done.returncode != 0:
            problems.append(f"re-running the import failed: {done.stderr.strip()[-300:]}")
        problems += check_import(fresh, {"v1"}, bystander=False)
        if problems:
            break
    return {**stats, "import_write_seconds": round(window[0], 2), "import_problems": problems}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kills", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-delay", type=float, default=0.5, help="longest time before a kill (s)")
    p.add_argument("--store", help="store directory (default: a new temporary one)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--imports", type=int, default=0, help="also kill this many imports (see above)")
    p.add_argument("--writer", help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.writer:
        writer(args.writer, args.start)
        return 0
    result = run(args.kills, args.seed, args.max_delay, args.store) if args.kills else {"problems": []}
    if args.imports:
        result.update(run_imports(args.imports, args.seed))
        result["problems"] = [*result["problems"], *result["import_problems"]]  # type: ignore[misc]
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
