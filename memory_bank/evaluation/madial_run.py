"""``memorybank eval madial``: MADial-Bench memory recall with baselines, in one run.

    memorybank eval madial --data DIR --language zh|en [--k 1,3,5,10] [--systems bm25,dense,ours]
                           --out OUT.json

Writes ``OUT.json`` (run metadata, recall@k and nDCG@k per system, one record per dialogue with
every system's ranked memory ids), ``OUT.md`` and charts, like ``memorybank eval locomo``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from memory_bank.evaluation.benchmark import Haystack


class _Recording:
    """A benchmark system that keeps what the system it wraps retrieved (for nDCG)."""

    def __init__(self, system: Any) -> None:
        self.system = system
        self.name = system.name
        self.ranked: dict[str, dict[str, list[str]]] = {}

    def config(self) -> dict[str, Any]:
        return getattr(self.system, "config", lambda: {})()

    def retrieve(self, hay: Haystack, k: int) -> dict[str, list[str]]:
        out: dict[str, list[str]] = self.system.retrieve(hay, k)
        self.ranked[hay.user] = out
        return out


def add_madial_parser(
    evsub: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]
) -> None:
    p = evsub.add_parser(
        "madial", help="MADial-Bench memory recall (the benchmark's protocol), with baselines"
    )
    p.add_argument("--data", required=True, help="folder with MADial-Bench-{zh,en}-{memory,dialogue}.json")
    p.add_argument("--language", choices=["zh", "en"], required=True)
    p.add_argument("--k", default="1,3,5,10", help="cut-offs, comma-separated")
    p.add_argument(
        "--systems", default="bm25,dense,ours", help="comma-separated: bm25, dense, ours, proposed-v2"
    )
    p.add_argument("--cache-dir", help="keep embeddings here between runs")
    common(p)


def run_madial(args: argparse.Namespace) -> dict[str, Any]:
    from memory_bank.evaluation import report
    from memory_bank.evaluation.encoders import eval_encoder
    from memory_bank.evaluation.locomo_run import SYSTEM_NOTES, _names, _systems
    from memory_bank.evaluation.madial import ASKED_ON, haystacks, load_madial, ndcg
    from memory_bank.evaluation.metrics import parse_ks
    from memory_bank.evaluation.runs import run_benchmark

    ks = parse_ks(args.k)
    events, dialogues = load_madial(args.data, args.language)
    hays = haystacks(events, dialogues)
    encoder = eval_encoder(args.encoder, args.language, args.cache_dir)
    systems = [_Recording(s) for s in _systems(_names(args.systems), encoder, args, args.language)]
    config = {
        "data": str(args.data),
        "language": args.language,
        "ks": ks,
        "systems": [s.name for s in systems],
        "encoder": encoder.name,
        "bank_config": args.config,
        "asked_on": ASKED_ON,
    }
    notes = [
        "The benchmark's protocol: the query is the raw dialogue lines before the first test turn "
        "(speaker tags included); the candidates are the asking user's memories; recall@k = "
        "|top-k ∩ relevant| / |relevant| per dialogue (shown as turn recall), nDCG@k with binary "
        f"relevance. Each memory event is one memory dated with its time; dialogues are asked on {ASKED_ON}.",
    ]
    results = run_benchmark(
        name=f"MADial-Bench retrieval ({args.language})",
        haystacks=hays,
        systems=systems,
        ks=ks,
        out=args.out,
        config=config,
        primary="ours" if any(s.name == "ours" for s in systems) else systems[0].name,
        dataset={"memories": len(events), "dialogues": len(dialogues)},
        notes=notes,
        system_notes={s.name: SYSTEM_NOTES.get(s.name, "") for s in systems},
        extra=lambda: {"ndcg": {s.name: ndcg(hays, s.ranked, ks) for s in systems}},
    )
    encoder.save()
    # run_benchmark wrote the report; add the nDCG table to it.
    md = report.sibling(args.out, ".md")
    rows = [[name, *[report.pct(v[str(k)]) for k in ks]] for name, v in results["ndcg"].items()]
    table = report.md_table(["system", *[f"@{k}" for k in ks]], rows)
    text = md.read_text(encoding="utf-8").replace(
        "## Session recall@k (%)", f"## nDCG@k (%)\n\n{table}\n\n## Session recall@k (%)", 1
    )
    report.write_markdown(md, text)
    width = max(len(s.name) for s in systems)
    print(f"{'':{width}s}  " + "  ".join(f"R@{k:<3d} nDCG@{k:<3d}" for k in ks))
    for s in systems:
        r = results["systems"][s.name]["turn_recall"]["all"]
        n = results["ndcg"][s.name]
        print(
            f"{s.name:{width}s}  " + "  ".join(f"{100 * r[str(k)]:5.1f} {100 * n[str(k)]:8.1f}" for k in ks)
        )
    return results
