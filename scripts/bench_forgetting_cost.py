"""What the default forgetting costs a search, against forgetting off, on one user's large store.

    nice -n 10 .venv/bin/python scripts/bench_forgetting_cost.py --size 100000 --out runs/bench-forgetting.json

One user with ``--size`` turns spread over a year (a third small talk, a third chat, a third
personal statements, so the default forgets a real share), the hashing encoder (the figures are
what ranking and forgetting cost, without the query embedding, which both settings pay alike).
For each setting, in a fresh process state: the restart (open the store, first search), a warm
search, and a chat turn (add a turn, then search: the store changed, so the default recomputes
which memories are forgotten today). Medians of ``--queries`` searches; prints a table and writes
JSON with the run's information (commit, machine, load).
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memory_bank import MemoryBank  # noqa: E402
from memory_bank.config import FORGETTING_OFF, SELECTIVE_FORGETTING  # noqa: E402
from memory_bank.embeddings import HashingEncoder  # noqa: E402
from memory_bank.records import Memory, MemoryKind  # noqa: E402
from memory_bank.runinfo import run_info, write_json  # noqa: E402

NOW = "2024-01-01"
_KINDS = (
    "Thanks, see you tomorrow!",
    "What do you think about {topic} these days?",
    "My sister and I went to the {topic} club on Saturday and met my old teacher there.",
)
_TOPICS = ("chess", "jazz", "hiking", "pottery", "cycling", "baking", "sailing", "poetry", "tennis", "opera")


def _fill(store: Path, size: int) -> None:
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(256), forgetting=FORGETTING_OFF)
    mems = []
    for i in range(size):
        day = f"2023-{1 + (i * 12 // size):02d}-{1 + i % 28:02d}"
        text = _KINDS[i % 3].format(topic=f"{_TOPICS[i % 10]} {i % 997}")
        mems.append(Memory(f"u_{i}", "u", MemoryKind.TURN, day, text, turn=i, query=text, response=""))
    bank.add_memories("u", mems, batch_size=2048)
    bank.close()


def _ms(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def _measure(store: Path, forgetting: dict[str, Any], queries: int) -> dict[str, Any]:
    clock = lambda: dt.datetime.fromisoformat(f"{NOW}T12:00")  # noqa: E731 - the replayed "now"
    bank = MemoryBank.open(store, encoder_instance=HashingEncoder(256), forgetting=forgetting, clock=clock)
    qs = [f"the {_TOPICS[i % 10]} club with my sister {i}" for i in range(queries)]
    restart = _ms(lambda: bank.search("u", qs[0], k=10, now=NOW))
    warm = statistics.median(_ms(lambda q=q: bank.search("u", q, k=10, now=NOW)) for q in qs)
    turns = []
    for i, q in enumerate(qs):
        bank.add_turn("u", f"Another chat turn {i}", "ok", at=f"{NOW}T10:00")
        turns.append(_ms(lambda q=q: bank.search("u", q, k=10, now=NOW)))
    forgotten = sum(1 for m, _ in bank.memories("u", now=NOW) if m.archived)
    bank.close()
    return {
        "restart_ms": restart,
        "search_p50_ms": warm,
        "search_after_add_p50_ms": statistics.median(turns),
        "forgotten_after_turns": forgotten,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--out", help="write the results here as JSON")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mb-forget-bench-") as tmp:
        for name, setting in (("off", FORGETTING_OFF), ("default", SELECTIVE_FORGETTING)):
            store = Path(tmp) / name
            _fill(store, args.size)
            results[name] = _measure(store, setting, args.queries)
    print(
        f"{'setting':<8} {'restart ms':>11} {'search p50 ms':>14} {'add+search p50 ms':>18} {'forgotten':>10}"
    )
    for name, r in results.items():
        print(
            f"{name:<8} {r['restart_ms']:>11.0f} {r['search_p50_ms']:>14.2f} "
            f"{r['search_after_add_p50_ms']:>18.2f} {r['forgotten_after_turns']:>10}"
        )
    if args.out:
        info = run_info("scripts/bench_forgetting_cost.py", {"size": args.size, "queries": args.queries})
        write_json(
            args.out, {"runinfo": info, "size": args.size, "queries": args.queries, "results": results}
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
