"""Targets check, Markdown table and chart for a benchmark result."""

from __future__ import annotations

from typing import Any


def _get(entry: dict[str, Any], system: str, key: str) -> Any:
    if system == "memorybank":
        return entry.get(key, entry.get("details", {}).get(key))
    b = entry.get("baselines", {}).get(system) or {}
    return b.get(key, (b.get("details") or {}).get(key))


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def targets(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Each issue target: the figure measured here, the threshold, and whether it is met."""
    res = {e["size"]: e for e in out["results"]}
    sizes = sorted(res)
    largest, smallest = (res[sizes[-1]], res[sizes[0]]) if sizes else ({}, {})
    t: list[dict[str, Any]] = []

    def add(
        name: str, value: float | None, limit: float | None, *, at_most: bool = True, note: str = ""
    ) -> None:
        if limit is None:  # a figure to document, not a target
            met = None
        else:
            met = None if value is None else (value <= limit if at_most else value >= limit)
        t.append({"target": name, "value": value, "limit": limit, "met": met, "note": note})

    n = largest.get("size")
    for size in sizes:  # each size against the targets of its scale (a smaller one meets a larger's)
        e = res[size]
        add(
            f"search p50 at {size} memories incl. query embedding (ms)",
            _get(e, "memorybank", "search_ms_p50"),
            15 if size <= 100_000 else 20,
        )
        if size <= 100_000:  # the search core: 1 ms up to 10k memories, 2 ms up to 100k
            add(
                f"search p50 at {size} memories without embedding (ms)",
                _get(e, "memorybank", "search_core_ms_p50"),
                1 if size <= 10_000 else 2,
            )
        add(
            f"first search after a restart at {size} memories (s)",
            _get(e, "memorybank", "restart_s"),
            1 if size <= 100_000 else 5,
        )
        rss, model = _get(e, "memorybank", "rss_mb"), _get(e, "memorybank", "rss_model_mb")
        if size >= 100_000 and rss is not None and model is not None:
            add(
                f"peak resident memory per memory at {size} memories, store built in the same run, "
                "the encoder's aside (KB)",
                (rss - model) * 1024 / size,
                None,
                note=f"peak {rss:,.0f} MB, {model:,.0f} MB with the encoder loaded",
            )
    for e in (res[s] for s in sizes):
        paired = _get(e, "mem0", "paired") or {}
        m0 = _get(e, "mem0", "search_ms_p50")
        if paired.get("search_ratio") is not None:
            add(
                f"search p50 vs mem0 at {e['size']}, same process, interleaved (ratio, < 1 is faster)",
                paired["search_ratio"],
                1.0,
                note=f"{paired['memorybank_search_ms_p50']:.2f} vs {paired['other_search_ms_p50']:.2f} ms",
            )
        elif m0 is not None:
            add(
                f"search p50 vs mem0 at {e['size']} (ratio, < 1 is faster)",
                _ratio(_get(e, "memorybank", "search_ms_p50"), m0),
                1.0,
            )
    add(
        f"add p50 growth {smallest.get('size')} -> {n} (ratio)",
        _ratio(_get(largest, "memorybank", "add_ms_p50"), _get(smallest, "memorybank", "add_ms_p50")),
        1.5,
    )
    t.append(
        {"target": "LLM calls on add", "value": 0, "limit": 0, "met": True, "note": "no LLM in the add path"}
    )
    for e in (res[s] for s in sizes):
        paired = _get(e, "mem0", "paired") or {}
        m0 = _get(e, "mem0", "add_ms_p50")
        if e["size"] < 10_000:
            continue
        if paired.get("add_speedup") is not None:
            add(
                f"add p50 speed-up over mem0 at {e['size']}, same process, interleaved (x)",
                paired["add_speedup"],
                5,
                at_most=False,
                note=f"{paired['memorybank_add_ms_p50']:.1f} vs {paired['other_add_ms_p50']:.1f} ms",
            )
        elif m0 is not None:
            add(
                f"add p50 speed-up over mem0 at {e['size']} (x)",
                _ratio(m0, _get(e, "memorybank", "add_ms_p50")),
                5,
                at_most=False,
            )
    add(
        f"restart at {n} / re-embedding cost",
        _ratio(_get(largest, "memorybank", "restart_s"), _get(largest, "memorybank", "reembed_s")),
        0.05,
    )
    forgetting = (out.get("scenarios") or {}).get("forgetting") or {}
    add(f"forgetting pass over {forgetting.get('memories')} memories (s)", forgetting.get("forget_s"), 0.5)
    ratios = [_get(res[s], "memorybank", "import_vs_encoder") for s in sizes]
    ratios = [r for r in ratios if r is not None]
    add(
        "bulk import / encoder batch throughput (min over sizes)",
        min(ratios) if ratios else None,
        0.8,
        at_most=False,
    )
    chat = ((out.get("scenarios") or {}).get("chat_turn") or {}).get("sizes") or {}
    if len(chat) >= 2:
        lo, hi = min(chat, key=int), max(chat, key=int)
        add(
            f"memory work of a chat reply (LLM and embeddings aside), {lo} -> {hi} memories (ratio)",
            _ratio(chat[hi].get("chat_turn_core_ms_p50"), chat[lo].get("chat_turn_core_ms_p50")),
            1.5,
            note=f"{chat[lo].get('chat_turn_core_ms_p50', 0):.2f} -> {chat[hi].get('chat_turn_core_ms_p50', 0):.2f} ms",
        )
        if chat[hi].get("chat_turn_besides_search_ms_p50") is not None:
            add(
                f"the same without the search (user, global layers, store, reinforce), {lo} -> {hi} memories (ratio)",
                _ratio(
                    chat[hi]["chat_turn_besides_search_ms_p50"],
                    chat[lo].get("chat_turn_besides_search_ms_p50"),
                ),
                1.5,
                note=f"{chat[lo].get('chat_turn_besides_search_ms_p50', 0):.2f} -> "
                f"{chat[hi]['chat_turn_besides_search_ms_p50']:.2f} ms",
            )
    users = (out.get("scenarios") or {}).get("users") or {}
    add(
        f"search p50, {users.get('users')} users x {users.get('per_user')} vs one user (ratio, warm)",
        _ratio(users.get("search_core_ms_p50_many_users_warm"), users.get("search_core_ms_p50_one_user")),
        1.25,
        note="first search of a session loads the partition: first_search_of_session_ms_p50",
    )
    return t


def _fmt(x: Any, digits: int = 1) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        if abs(x) >= 100:
            return f"{x:,.0f}"
        return f"{x:.{digits}f}" if abs(x) >= 1 else f"{x:.{max(digits, 2)}f}"
    return str(x)


def markdown(out: dict[str, Any]) -> str:
    cols = [
        ("add p50 ms", "add_ms_p50"),
        ("add p95 ms", "add_ms_p95"),
        ("search p50 ms", "search_ms_p50"),
        ("search p95 ms", "search_ms_p95"),
        ("search w/o embedding p50 ms", "search_core_ms_p50"),
        ("restart s", "restart_s"),
        ("re-embed s", "reembed_s"),
        ("forget s", "forget_s"),
        ("import turns/s", "import_turns_per_s"),
        ("peak RSS MB", "rss_mb"),
    ]
    lines = [
        "| memories | system | " + " | ".join(c for c, _ in cols) + " |",
        "|---:|---|" + "---:|" * len(cols),
    ]
    for e in out["results"]:
        for system in ["memorybank", *e.get("baselines", {})]:
            if system != "memorybank" and (e["baselines"][system] or {}).get("skipped"):
                continue
            vals = [_fmt(_get(e, system, k), 2 if "ms" in k else 1) for _, k in cols]
            lines.append(f"| {e['size']:,} | {system} | " + " | ".join(vals) + " |")
    lines.append("")
    lines.append("| target | measured | limit | met |")
    lines.append("|---|---:|---:|:---:|")
    for t in out.get("targets", []):
        met = {True: "yes", False: "**no**", None: "n/a"}[t["met"]]
        limit = "-" if t["limit"] is None else t["limit"]
        lines.append(f"| {t['target']} | {_fmt(t['value'], 2)} | {limit} | {met} |")
    return "\n".join(lines)


def chart(out: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("search p50 (ms), with query embedding", "search_ms_p50"),
        ("search p50 (ms), without it", "search_core_ms_p50"),
        ("add a turn p50 (ms)", "add_ms_p50"),
        ("restart (s)", "restart_s"),
        ("bulk import (turns/s)", "import_turns_per_s"),
        ("peak RSS (MB)", "rss_mb"),
    ]
    systems = ["memorybank", *sorted({b for e in out["results"] for b in e.get("baselines", {})})]
    fig, axes = plt.subplots(2, 3, figsize=(14, 8))
    for ax, (title, key) in zip(axes.flat, panels, strict=True):
        for system in systems:
            xs, ys = [], []
            for e in out["results"]:
                v = _get(e, system, key)
                if v is not None:
                    xs.append(e["size"])
                    ys.append(v)
            if xs:
                ax.plot(xs, ys, marker="o", label=system, linewidth=2.5 if system == "memorybank" else 1.2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("memories in the user's store")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    m = out["machine"]
    load = m.get("loadavg_start", [0])[0]
    fig.suptitle(
        f"MemoryBank benchmark: {m.get('processor', m.get('cpu'))}, {m.get('cpus', m.get('cores'))} cores, "
        f"load {load:.1f} at start",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
