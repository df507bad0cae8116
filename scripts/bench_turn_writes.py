"""A chat reply's memory writes, three transactions against one, interleaved reply by reply.

"before" is what a reply did before: store the turn, mark the day's summaries stale, reinforce the
memories the reply used, each committed on its own (here: ``add_turn``, then ``mark_stale``
again and ``reinforce``, three commits); "after" is ``add_turn(..., recalled=...)``, which does all three in one
commit. Runs on a copy of a store made by ``scripts/bench_scale.py`` (it adds turns to it)::

    cp -r /tmp/mb-scale/store-100000 /tmp/mb-turn && python scripts/bench_turn_writes.py /tmp/mb-turn 60
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from memory_bank import Memory, MemoryBank, MemoryKind
from memory_bank.bench.data import DialogGenerator
from memory_bank.embeddings import HashingEncoder

store, reps = Path(sys.argv[1]), int(sys.argv[2])
bank = MemoryBank.open(store, encoder_instance=HashingEncoder(384))
rec = bank.user("big")
msgs = DialogGenerator(11).turns(2 * reps, first_day=20000)


def before(m: Any, hits: list[Memory]) -> None:
    mem = bank.add_turn("big", m.query, m.response, at=m.at)
    bank.storage.mark_stale(rec.id, [MemoryKind.DAILY_SUMMARY, MemoryKind.DAILY_PERSONALITY], [mem.date])
    bank.reinforce("big", [h.memory_id for h in hits], now=m.at)


def after(m: Any, hits: list[Memory]) -> None:
    bank.add_turn("big", m.query, m.response, at=m.at, recalled=hits)


res: dict[str, list[float]] = {"before": [], "after": []}
load0 = os.getloadavg()[0]
for i, m in enumerate(msgs):
    hits = [h.memory for h in bank.search("big", m.query, k=5, now=m.at)]
    name = ("before", "after")[i % 2]
    t = time.perf_counter()
    (before if name == "before" else after)(m, hits)
    res[name].append(time.perf_counter() - t)
figures = {f"{k}_ms_p50": round(1000 * statistics.median(v), 3) for k, v in res.items()}
loads = [round(load0, 2), round(os.getloadavg()[0], 2)]
print(json.dumps({"memories": len(bank._cache.get(rec.id)), **figures, "replies_each": reps, "load": loads}))
