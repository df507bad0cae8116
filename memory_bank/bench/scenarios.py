"""The two benchmark scenarios that are not "one system at one size":

* :func:`users`: many users of ``per_user`` memories each in one store; search latency when
  requests hop between users (partitions load lazily and at most ``max_cached_users`` stay in
  memory), against one user of the same size; then a forgetting pass over every user.
* :func:`forget_million`: one forgetting pass over a million memories of one user, and the
  original design's per-memory Python loop over the same memories.
"""

from __future__ import annotations

import datetime as dt
import functools
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
    from memory_bank.config import PAPER_FORGETTING
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

    # Its forgetting pass is the paper's (stochastic, seeded), whatever the bank's default.
    bank = MemoryBank.open(work, encoder_instance=enc, forgetting=PAPER_FORGETTING)
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
    from memory_bank.config import PAPER_FORGETTING
    from memory_bank.embeddings import HashingEncoder
    from memory_bank.records import RETRIEVABLE_KINDS, Memory, MemoryKind
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
    bank = MemoryBank.open(work, encoder_instance=HashingEncoder(8), forgetting=PAPER_FORGETTING)
    rec = bank.user("big", create=True)

    def memories(lo: int, hi: int) -> list[Memory]:
        out: list[Memory] = []
        for i in range(lo, hi):
            d = int(days[i])
            turn = int(turns[i])
            last = day_str[min(d + int(recall_after[i]), span - 1)] if recalled[i] else None
            out.append(
                Memory(
                    memory_id=f"big_{day_str[d]}_{turn}", user="big", kind=MemoryKind.TURN, date=day_str[d],
                    turn=turn, text="x", strength=int(strengths[i]), last_recall_date=last,
                )
            )  # fmt: skip
        return out

    # Turn numbers within each day: 0, 1, ... (days are sorted).
    first = np.r_[True, days[1:] != days[:-1]]
    starts = np.flatnonzero(first)
    turns = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))

    def build() -> None:  # no vectors: a forgetting pass does not read them
        for lo in range(0, n, 50_000):
            bank.storage.add_memories(rec.id, memories(lo, min(n, lo + 50_000)), None, "")

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


def chat_turn(spec: Spec) -> dict[str, Any]:
    """The memory work of one SiliconFriend reply, everything but the LLM call, at each of
    ``chat_sizes`` memories of one user: what :class:`silicon_friend.engine.ChatEngine` asks of
    the bank for a reply (the library cannot import the app, so the calls are listed here in
    its order): the user lookup, the global layers for the prompt, the search for the message,
    storing the turn and reinforcing the memories the reply used (one transaction).

    ``chat_turn_ms_p50`` includes the two embeddings (the message and the new turn);
    ``chat_turn_core_ms_p50`` gives them from a cache, leaving the memory work itself, which
    should not grow with the history; ``chat_turn_besides_search_ms_p50`` is that work without
    the search (the user lookup, the global layers, storing the turn, reinforcing), whose cost
    is O(k) by design, apart from the search's, which grows with the history sub-linearly. Replies alternate between the two, so both see the same
    load. A store is built once per size and kept under ``workdir`` (``chat-N``) with
    ``keep``, so reruns with ``--workdir`` reuse it.
    """
    from memory_bank.bench.systems import CachingEncoder
    from memory_bank.embeddings import get_encoder

    set_threads(spec.get("threads"))
    enc = CachingEncoder(get_encoder(spec["encoder"]))
    pool = np.load(spec["pool_file"])
    sizes = {str(n): _chat_turn_at(spec, n, enc, pool) for n in spec["chat_sizes"]}
    return {"k": spec["k"], "sizes": sizes, "rss_mb": peak_rss_mb()}


def _chat_turn_at(spec: Spec, n: int, enc: Any, pool: np.ndarray) -> dict[str, Any]:
    from memory_bank.bank import MemoryBank
    from memory_bank.bench.data import DialogGenerator, synth_vectors
    from memory_bank.bench.systems import MemoryBankSystem, remove
    from memory_bank.records import index_text, turn_text

    k = spec["k"]
    work = Path(spec["workdir"]) / f"chat-{n}"
    gen = DialogGenerator(spec["seed"])
    built_s = None
    if not (work / "memorybank.sqlite3").exists():
        turns = gen.many(n)
        system = MemoryBankSystem(work, enc)
        built_s, _ = timed(lambda: system.build("user", turns, synth_vectors(pool, n)))
        del turns
    last_day = (n - 1) // 12  # gen.many puts 12 turns on a day
    bank = MemoryBank.open(work, encoder_instance=enc)
    rec = bank.user("user")
    first_s, _ = timed(lambda: bank.search("user", "warm up", k=k))  # loads the partition
    messages = DialogGenerator(spec["seed"] + 5).turns(spec["adds"], first_day=last_day + 1)

    searching: list[float] = []  # of each reply, the search's share

    def reply(msg: Any) -> None:
        # silicon_friend.engine.ChatEngine.prepare, then _finish, in order
        bank.has_user("user")
        bank.profile("user")
        took, hits = timed(lambda: bank.search("user", msg.query, k=k, now=msg.at))
        searching.append(took)
        bank.add_turn("user", msg.query, msg.response, at=msg.at, recalled=[h.memory for h in hits])

    full: list[float] = []
    core: list[float] = []
    besides: list[float] = []  # a cached reply's work but its search
    for i, msg in enumerate(messages):
        cached = i % 2 == 1
        if cached:  # the two texts the reply embeds: the message, the new turn after the day's last reply
            previous = bank.storage.last_turn(rec.id, msg.at.date().isoformat())
            context = previous.response if previous is not None and previous.response else None
            for text in (msg.query, index_text(turn_text(msg.query, msg.response), context)):
                enc.cache[text] = enc.inner.encode([text])[0]
            enc.use_cache = True
        took, _ = timed(functools.partial(reply, msg))
        enc.use_cache = False
        (core if cached else full).append(took)
        if cached:
            besides.append(took - searching[-1])
    bank.close()
    if not spec.get("keep"):
        remove(work)
    return {
        "memories": n,
        "build_s": built_s,
        "first_search_s": first_s,
        "chat_turn_ms_p50": pct(full, 50) * 1000,
        "chat_turn_core_ms_p50": pct(core, 50) * 1000,
        "chat_turn_core_ms_p95": pct(core, 95) * 1000,
        "chat_turn_besides_search_ms_p50": pct(besides, 50) * 1000,
        "turns": len(messages),
        "loadavg": os.getloadavg(),
    }
