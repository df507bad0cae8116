"""One measurement: one system at one size, normally in its own process (for its peak RSS).

``python -m memory_bank.bench.worker SPEC.json OUT.json`` runs :func:`measure` on a spec written
by :mod:`memory_bank.bench.runner`; the same functions run in-process in quick mode.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory_bank.bench.data import Turn, synth_vectors
from memory_bank.bench.timing import (
    FORGET_RATE,
    CpuClock,
    Spec,
    load_turns,
    pct,
    peak_rss_mb,
    rounds_summary,
    set_threads,
    timed,
)


def _encoder(spec: Spec) -> Any:
    from memory_bank.bench.systems import CachingEncoder
    from memory_bank.embeddings import get_encoder

    took, enc = timed(lambda: get_encoder(spec["encoder"]))
    enc.encode(["warm up the model"])
    return CachingEncoder(enc), took


def _make_system(spec: Spec, directory: Path, enc: Any) -> Any:
    import memory_bank.bench.systems as systems

    name = spec["system"]
    if name == "memorybank":
        return systems.MemoryBankSystem(directory, enc)
    if name == "original":
        s = systems.OriginalDesign(directory, enc)
        s.embed_limit = spec["embed_limit"]
        return s
    if name == "langchain":
        return systems.LangChainClassic(directory, enc)
    if name == "mem0":
        from memory_bank.bench.mem0_system import Mem0OSS

        return Mem0OSS(directory, spec.get("threads"))
    raise ValueError(f"unknown system {name!r}")


def _search(
    system: Any, queries: list[str], q_vecs: dict[str, np.ndarray], embed: Any, spec: Spec
) -> dict[str, Any]:
    """Search with the query embedding (what a chat sees), the embedding alone, and the search
    alone (embedding given); wall and CPU time."""
    k, rounds = spec["k"], spec["rounds"]
    clocks = {"full": CpuClock(), "embed": CpuClock(), "core": CpuClock()}
    ops: dict[str, Callable[[str], Any]] = {
        "full": lambda q: system.search("u0", q, k),
        "embed": lambda q: embed([q]),
        "core": lambda q: system.search_cached("u0", q, q_vecs, k),
    }
    summary: dict[str, dict[str, Any]] = {}
    for key, op in ops.items():
        clock = clocks[key]
        runs = [[clock.timed(functools.partial(op, q))[0] for q in queries] for _ in range(rounds)]
        summary[key] = rounds_summary(runs)
    return {
        "search_ms_p50": summary["full"]["p50"],
        "search_ms_p95": summary["full"]["p95"],
        "search_core_ms_p50": summary["core"]["p50"],
        "search_core_ms_p95": summary["core"]["p95"],
        "embed_query_ms_p50": summary["embed"]["p50"],
        "search_rounds_p50": summary["full"]["rounds_p50"],
        "search_cpu_ms_p50": clocks["full"].p50_ms(),
        "search_core_cpu_ms_p50": clocks["core"].p50_ms(),
        "embed_query_cpu_ms_p50": clocks["embed"].p50_ms(),
    }


def _adds(system: Any, adds: list[Turn], spec: Spec) -> dict[str, Any]:
    """Add a turn (embedding and durable write), rounds of a few, each within a time budget."""
    clock = CpuClock()
    rounds: list[list[float]] = []
    per_round = max(1, len(adds) // spec["rounds"])
    for r in range(spec["rounds"]):
        lat: list[float] = []
        start = time.perf_counter()
        for t in adds[r * per_round : (r + 1) * per_round]:
            lat.append(clock.timed(functools.partial(system.add, "u0", t))[0])
            if time.perf_counter() - start > spec["budget_s"] and len(lat) >= 3:
                break
        rounds.append(lat)
    s = rounds_summary(rounds)
    return {
        "add_ms_p50": s["p50"],
        "add_ms_p95": s["p95"],
        "add_cpu_ms_p50": clock.p50_ms(),
        "add_n": s["n"],
        "durable_add": system.durable_add,
    }


def _import(system: Any, name: str, imports: list[Turn], spec: Spec) -> dict[str, Any]:
    """Bulk import into a new user, with a progress bar (mem0 has no bulk path: one add per turn,
    within the time budget)."""
    from tqdm import tqdm

    done = [0]
    start = time.perf_counter()
    with tqdm(
        total=len(imports),
        desc=f"import {name}@{spec['size']}",
        unit="turn",
        file=sys.stderr,
        disable=spec.get("quiet"),
    ) as bar:

        def progress(n: int) -> None:
            done[0] += n
            bar.update(n)

        if name == "mem0":
            limit = time.perf_counter() + spec["budget_s"]
            for t in imports:
                system.add("u_import", t)
                progress(1)
                if time.perf_counter() > limit and done[0] >= 3:
                    break
        else:
            system.bulk_import("u_import", imports, progress=progress)
    return {"import_turns_per_s": done[0] / (time.perf_counter() - start), "import_n": done[0]}


def _paired(
    spec: Spec, other: Any, turns: list[Turn], vectors: np.ndarray, queries: list[str], adds: list[Turn]
) -> dict[str, Any]:
    """MemoryBank and another system in the same process, queries and adds interleaved one by
    one (alternating which goes first): a comparison that load on a shared machine cannot tilt."""
    from memory_bank.bench.systems import MemoryBankSystem

    enc, _ = _encoder(spec)
    mine = MemoryBankSystem(Path(spec["workdir"]) / f"paired-{spec['size']}", enc)
    mine.build("u0", turns, vectors)
    mine.open()
    mine.search("u0", queries[0], spec["k"])  # load the partition: the restart is measured apart
    times: dict[str, list[float]] = {"mine": [], "other": []}
    for r in range(spec["rounds"]):
        for i, q in enumerate(queries):
            pair = [("mine", mine), ("other", other)]
            for key, system in pair if (i + r) % 2 == 0 else pair[::-1]:
                times[key].append(timed(functools.partial(system.search, "u0", q, spec["k"]))[0])
    add_times: dict[str, list[float]] = {"mine": [], "other": []}
    start = time.perf_counter()
    for i, t in enumerate(adds):
        pair = [("mine", mine), ("other", other)]
        for key, system in pair if i % 2 == 0 else pair[::-1]:
            add_times[key].append(timed(functools.partial(system.add, "u0", t))[0])
        if time.perf_counter() - start > spec["budget_s"] and i >= 2:
            break
    mine.close()
    search_mine, search_other = pct(times["mine"], 50) * 1000, pct(times["other"], 50) * 1000
    add_mine, add_other = pct(add_times["mine"], 50) * 1000, pct(add_times["other"], 50) * 1000
    out: dict[str, Any] = {
        "memorybank_search_ms_p50": search_mine,
        "other_search_ms_p50": search_other,
        "memorybank_add_ms_p50": add_mine,
        "other_add_ms_p50": add_other,
        "searches": len(times["mine"]),
        "adds": len(add_times["mine"]),
        # onnx or torch: on the same runtime as mem0's embedder, the lead is the search alone
        "memorybank_encoder_backend": getattr(enc.inner, "backend", "numpy"),
    }
    out["search_ratio"] = search_mine / search_other
    out["add_speedup"] = add_other / add_mine
    return out


def measure(spec: Spec) -> dict[str, Any]:
    """Every per-size figure of one system (see the runner's docstring for what each means)."""
    from memory_bank.bench.systems import remove, turn_memories
    from memory_bank.records import index_text

    set_threads(spec.get("threads"))
    name, n, k = spec["system"], spec["size"], spec["k"]
    work = Path(spec["workdir"]) / f"{name}-{n}"
    remove(work)
    work.mkdir(parents=True)
    turns = load_turns(Path(spec["turns_file"]), n)
    adds = load_turns(Path(spec["extra_file"]), spec["adds"])
    imports = load_turns(Path(spec["extra_file"]), spec["imports"], offset=spec["adds"])
    queries: list[str] = spec["queries"]
    vectors = synth_vectors(np.load(spec["pool_file"]), n, seed=spec["seed"])
    out: dict[str, Any] = {"system": name, "size": n}

    enc: Any = None
    if name != "mem0":
        enc, out["model_load_s"] = _encoder(spec)
    system = _make_system(spec, work, enc)
    if name == "mem0":
        out["model_load_s"], _ = timed(system.open)
        embed = system.embed
    else:
        embed = enc.inner.encode
    # onnx / torch for sentence-transformers models (mem0 embeds with its own PyTorch embedder)
    out["encoder_backend"] = "torch" if enc is None else getattr(enc.inner, "backend", "numpy")
    out["rss_model_mb"] = peak_rss_mb()
    out["build_s"], _ = timed(functools.partial(system.build, "u0", turns, vectors))

    # Restart: open the store and answer a first search (its query embedding given).
    q_vecs = {q: embed([q])[0] for q in queries}
    if name != "mem0":
        system.open()
    restarts = []
    for _ in range(spec["rounds"] if name != "original" else 1):
        t0 = time.perf_counter()
        system.restart()
        system.search_cached("u0", queries[0], q_vecs, k)
        restarts.append(time.perf_counter() - t0)
    out["restart_s"] = statistics.median(restarts)
    out["restart_runs_s"] = [round(x, 4) for x in restarts]
    if name == "original":
        out["reembed_s"] = system.reembed_s
        out["reembed_estimated"] = system.reembed_estimated

    out.update(_search(system, queries, q_vecs, embed, spec))
    if name == "memorybank" and spec.get("recall"):
        out["approximate"] = system.recall("u0", queries, q_vecs, k)
    out.update(_adds(system, adds, spec))
    if name == "memorybank":
        # A chat's next search after an add also brings the partition up to date.
        after = []
        for q, t in zip(queries[:10], adds, strict=False):
            system.add("u0", t)
            after.append(timed(functools.partial(system.search_cached, "u0", q, q_vecs, k))[0])
        out["search_after_add_core_ms_p50"] = pct(after, 50) * 1000
    if name == "langchain":
        out["persist_s"], _ = timed(system.persist)

    # Forgetting pass (Ebbinghaus, paper mode, seeded), tau set to forget about FORGET_RATE.
    mean_age = float(np.mean([(adds[0].at - t.at).days for t in turns])) or 1.0
    now = adds[-1].at.date().isoformat()
    took, forgotten = timed(functools.partial(system.forget, "u0", now, mean_age / FORGET_RATE))
    out["forget_s"] = took if forgotten is not None else None
    out["forgotten"] = forgotten

    # The encoder's own batch speed on what an import embeds (MemoryBank embeds a turn after the
    # reply before it: see index_text), then the import itself.
    out["encoder_turns_per_s"] = None
    if name != "mem0":
        texts = [t.text for t in imports]
        if name == "memorybank":
            texts = [index_text(m.text, m.context) for m in turn_memories("x", imports)]
        enc_s, _ = timed(functools.partial(enc.inner.encode, texts))
        out["encoder_turns_per_s"] = len(texts) / enc_s
    out.update(_import(system, name, imports, {**spec, "size": n}))
    if spec.get("paired"):
        out["paired"] = _paired(spec, system, turns, vectors, queries, adds[len(adds) // 2 :])
    if out["encoder_turns_per_s"]:
        out["import_vs_encoder"] = out["import_turns_per_s"] / out["encoder_turns_per_s"]
        if name == "memorybank":
            out["reembed_s"] = n / out["encoder_turns_per_s"]
            out["reembed_estimated"] = True
    system.close()
    out["rss_mb"] = peak_rss_mb()
    out["loadavg"] = os.getloadavg()
    if not spec.get("keep"):
        remove(work)
    return out


def run_spec(spec: Spec) -> dict[str, Any]:
    """Run what ``spec`` asks for: one system at one size (``kind`` ``size``, the default) or a
    scenario of :mod:`memory_bank.bench.scenarios` (``users``, ``forget_million``)."""
    kind = spec.get("kind", "size")
    if kind == "size":
        return measure(spec)
    import memory_bank.bench.scenarios as scenarios

    return dict(getattr(scenarios, kind)(spec))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    if spec.get("system") == "mem0":
        from memory_bank.bench.mem0_system import prepare_env

        prepare_env(Path(spec["workdir"]))
    Path(args[1]).write_text(json.dumps(run_spec(spec)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
