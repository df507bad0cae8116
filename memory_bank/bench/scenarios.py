"""The two benchmark scenarios that are not "one system at one size":

* :func:`users`: many users of ``per_user`` memories each in one store; search latency when
  requests hop between users (partitions load lazily and at most ``max_cached_users`` stay in
  memory), against one user of the same size; then a forgetting pass over every user.
* :func:`forget_million`: one forgetting pass over a million memories of one user, and the
  original design's per-memory Python loop over the same memories.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import numpy as np

from memory_bank.bench.timing import FORGET_RATE, Spec, load_turns, pct, peak_rss_mb, set_threads, timed


def _current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def users(spec: Spec) -> dict[str, Any]:
    from memory_bank.bank import MemoryBank
    from memory_bank.bench.systems import CachingEncoder, MemoryBankSystem, remove
    from memory_bank.embeddings import get_encoder

    set_threads(spec.get("threads"))
    n_users, per_user, k = spec["users"], spec["per_user"], spec["k"]
    work = Path(spec["workdir"]) / f"users-{n_users}x{per_user}"
    remove(work)
    enc = CachingEncoder(get_encoder(spec["encoder"]))
    turns = load_turns(Path(spec["turns_file"]), per_user)
    pool = np.load(spec["pool_file"])
    vecs = np.ascontiguousarray(pool[np.arange(per_user) % len(pool)], dtype=np.float32)
    names = [f"user{i:05d}" for i in range(n_users)]
    system = MemoryBankSystem(work, enc)
    build_s, _ = timed(lambda: system.build_users(names, turns, lambda i: vecs))
    queries: list[str] = spec["queries"]
    enc.cache.update({q: enc.inner.encode([q])[0] for q in queries})
    enc.use_cache = True

    bank = MemoryBank.open(work, encoder_instance=enc)
    max_cached = bank.config.max_cached_users
    rss_start = _current_rss_mb()

    def search(user: str, q: str) -> float:
        return timed(lambda: bank.search(user, q, k=k))[0]

    search(names[0], queries[0])  # load one partition
    one = [search(names[0], q) for q in queries for _ in range(spec["rounds"])]
    rng = np.random.default_rng(spec["seed"])
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(spec["sessions"]):
        user = names[int(rng.integers(n_users))]
        cached = bank.user(user).id in bank._cache
        for j in range(spec["per_session"]):
            t = search(user, queries[int(rng.integers(len(queries)))])
            (warm if j or cached else cold).append(t)
    rss_after = _current_rss_mb()

    # A forgetting pass over every user (paper mode, seeded), forgetting about FORGET_RATE.
    mean_age = float(np.mean([(turns[-1].at - t.at).days + 1 for t in turns]))
    bank.config.forgetting.tau = mean_age / FORGET_RATE
    now = (turns[-1].at + dt.timedelta(days=1)).date().isoformat()
    forget_s, reports = timed(lambda: bank.forget(None, now=now, mode="paper", seed=0))
    bank.close()
    if not spec.get("keep"):
        remove(work)
    return {
        "users": n_users,
        "per_user": per_user,
        "memories": n_users * per_user,
        "build_s": build_s,
        "max_cached_users": max_cached,
        "search_core_ms_p50_one_user": pct(one, 50) * 1000,
        "search_core_ms_p50_many_users_warm": pct(warm, 50) * 1000,
        "search_core_ms_p95_many_users_warm": pct(warm, 95) * 1000,
        "search_core_ms_p50_many_users_all": pct(cold + warm, 50) * 1000,
        "search_core_ms_p95_many_users_all": pct(cold + warm, 95) * 1000,
        "first_search_of_session_ms_p50": pct(cold, 50) * 1000 if cold else None,
        "sessions": spec["sessions"],
        "searches_per_session": spec["per_session"],
        "rss_mb_before_sessions": rss_start,
        "rss_mb_after_sessions": rss_after,
        "rss_mb": peak_rss_mb(),
        "forget_all_users_s": forget_s,
        "forgotten": sum(len(r.forgotten) for r in reports.values()),
        "loadavg": os.getloadavg(),
    }


def forget_million(spec: Spec) -> dict[str, Any]:
    """One user with ``forget_size`` memories (no vectors: a pass does not read them)."""
    from memory_bank.bank import MemoryBank
    from memory_bank.bench.systems import remove
    from memory_bank.embeddings import HashingEncoder
    from memory_bank.records import RETRIEVABLE_KINDS
    from memory_bank.stores import Storage

    n = spec["forget_size"]
    work = Path(spec["workdir"]) / f"forget-{n}"
    remove(work)
    rng = np.random.default_rng(spec["seed"])
    start = dt.date(2021, 1, 1)
    span = 1000
    days: np.ndarray = np.sort(rng.integers(0, span, n))
    strengths = np.asarray(rng.integers(1, 6, size=n))
    recalled = np.asarray(rng.random(size=n)) < 0.2
    recall_after = np.asarray(rng.integers(0, 200, size=n))
    day_str = [(start + dt.timedelta(days=int(d))).isoformat() for d in range(span + 200)]
    bank = MemoryBank.open(work, encoder_instance=HashingEncoder(8))
    rec = bank.user("big", create=True)

    def rows() -> Any:
        turn, prev = 0, -1
        for i in range(n):
            d = int(days[i])
            turn = turn + 1 if d == prev else 0
            prev = d
            last = day_str[min(d + int(recall_after[i]), span - 1)] if recalled[i] else None
            yield (rec.id, f"big_{day_str[d]}_{turn}", "turn", day_str[d], turn, "x", int(strengths[i]), last)

    def build() -> None:
        bank.storage._write(  # type: ignore[attr-defined]
            lambda c: c.executemany(
                "INSERT INTO memories(user_id, memory_id, kind, date, turn, text, strength, last_recall_date) "
                "VALUES (?,?,?,?,?,?,?,?)",
                rows(),
            )
        )

    build_s, _ = timed(build)
    now = day_str[span - 1]
    anchors = np.where(recalled, np.minimum(days + recall_after, span - 1), days)
    mean_age = float(np.mean(span - 1 - anchors) / np.mean(strengths))
    read_s, cols = timed(lambda: bank.storage.forget_columns(rec.id, RETRIEVABLE_KINDS))
    bank.config.forgetting.tau = mean_age / FORGET_RATE
    forget_s, report = timed(lambda: bank.forget("big", now=now, mode="paper", seed=0))
    # The same pass forgetting ten times as many, the next day (stress: writes grow with it).
    bank.config.forgetting.tau = mean_age / (10 * FORGET_RATE)
    later = day_str[span]
    stress_s, stress = timed(lambda: bank.forget("big", now=later, mode="paper", seed=0))
    out: dict[str, Any] = {
        "memories": n,
        "build_s": build_s,
        "columns_read_s": read_s,
        "forget_s": forget_s,
        "forgotten": len(report["big"].forgotten),
        "examined": report["big"].examined,
        "forget_10x_s": stress_s,
        "forgotten_10x": len(stress["big"].forgotten),
    }
    if spec.get("generic_path"):
        out["generic_path_read_s"], _ = timed(
            lambda: Storage.forget_columns(bank.storage, rec.id, RETRIEVABLE_KINDS)
        )
    bank.close()

    # The original design: a Python loop over every memory of the memory file, then a rewrite.
    from memory_bank.bench.systems import OriginalDesign

    orig = OriginalDesign(work / "original", None)  # type: ignore[arg-type]
    history: dict[str, list[dict[str, Any]]] = {}
    for i in range(n):
        history.setdefault(day_str[int(days[i])], []).append(
            {"query": "x", "response": "", "memory_strength": int(strengths[i])}
        )
    orig.dir.mkdir(parents=True, exist_ok=True)
    orig.data = {"big": {"name": "big", "history": history}}
    out["original_forget_s"], _ = timed(lambda: orig.forget("big", now, bank.config.forgetting.tau))
    out["rss_mb"] = peak_rss_mb()
    out["loadavg"] = os.getloadavg()
    del cols
    if not spec.get("keep"):
        remove(work)
    return out
