"""What forgetting costs on LoCoMo, over decay settings: the evidence behind the recommended defaults.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/eval_forgetting_sweep.py \
        --data ../shared/data/locomo/locomo_dev.json --out runs/eval/forgetting-sweep.json

Replays every conversation's sessions in date order (MemoryBank with forgetting on, the clock at
each session's date, a forgetting pass per session day; with ``recall_k`` > 0 each utterance first
recalls its top memories, which reinforces them, as the chatbot does), then asks the questions on
the last day. For each tau (days) and policy (threshold 0.05; stochastic, seeded; stochastic-once,
see :class:`memory_bank.evaluation.benchmark.MemoryBankSystem`) it reports turn recall@10
(categories 1-4) and the share of turns forgotten, next to forgetting off. Writes the JSON, a
chart (``-sweep.png``) and a Markdown table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memory_bank.config import CALENDAR_ONLY  # noqa: E402
from memory_bank.embeddings import get_encoder  # noqa: E402
from memory_bank.evaluation import report  # noqa: E402
from memory_bank.evaluation.benchmark import MemoryBankSystem, evaluate  # noqa: E402
from memory_bank.evaluation.encoders import CachingEncoder  # noqa: E402
from memory_bank.evaluation.locomo import haystack, load_locomo  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--taus", default="1,7,30,60,90,180,365")
    ap.add_argument("--recall-k", default="0,2", help="recall (reinforcement) settings to try")
    ap.add_argument(
        "--policies",
        default="threshold,stochastic,stochastic-once",
        help="threshold (R < 0.05), stochastic (the bank's: a new draw each pass), stochastic-once "
        "(one draw per memory and recall: forgotten with probability 1 - R overall)",
    )
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--cache-dir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--replot", action="store_true", help="only redraw the chart and table from --out")
    args = ap.parse_args()
    if args.replot:
        import json

        saved = json.loads(Path(args.out).read_text(encoding="utf-8"))
        write_outputs(args.out, saved, saved["rows"], saved["off"])
        return 0
    taus = [float(t) for t in args.taus.split(",")]
    recalls = [int(r) for r in args.recall_k.split(",")]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    enc = CachingEncoder(get_encoder(args.encoder), args.cache_dir)
    hays = [haystack(c) for c in load_locomo(args.data)]

    def one(forgetting: dict[str, Any] | None, recall_k: int) -> dict[str, Any]:
        s = MemoryBankSystem(
            enc, name="x", forgetting=forgetting, replay=forgetting is not None, recall_k=recall_k
        )
        m, _ = evaluate(hays, [s], [10])
        r10 = m["x"]["turn_recall"]["all"]["10"]
        share = s.stats.forgotten / s.stats.memories if s.stats.memories else 0.0
        print(
            f"{forgetting} recall_k={recall_k}: recall@10 {100 * r10:.1f}%, forgot {100 * share:.0f}%",
            flush=True,
        )
        return {
            "forgetting": forgetting,
            "recall_k": recall_k,
            "recall_at_10": r10,
            "share_forgotten": round(share, 4),
        }

    rows = [one(None, 0)]
    for recall_k in recalls:
        for policy in policies:
            for tau in taus:
                f: dict[str, Any] = {"mode": "paper", "tau": tau, "policy": policy, "seed": args.seed, **CALENDAR_ONLY}
                if policy == "threshold":
                    f["threshold"] = 0.05
                rows.append(one(f, recall_k))
    enc.save()
    off = rows[0]["recall_at_10"]
    results = {"run": report.run_info("forgetting sweep", vars(args)), "off": off, "rows": rows}
    report.write_json(args.out, results)
    write_outputs(args.out, results, rows, off)
    return 0


def write_outputs(out: str, results: dict[str, Any], rows: list[dict[str, Any]], off: float) -> None:
    policies = list(dict.fromkeys(r["forgetting"]["policy"] for r in rows[1:]))
    recalls = list(dict.fromkeys(r["recall_k"] for r in rows[1:]))
    taus = sorted({r["forgetting"]["tau"] for r in rows[1:]})
    curves = {
        f"{p}, recall_k={rk}": {
            int(r["forgetting"]["tau"]): r["recall_at_10"]
            for r in rows[1:]
            if r["forgetting"]["policy"] == p and r["recall_k"] == rk
        }
        for p in policies
        for rk in recalls
    }
    curves["forgetting off"] = {int(t): off for t in taus}
    chart = report.recall_curves(
        report.sibling(out, "-sweep.png"),
        curves,
        title="LoCoMo dev: turn recall@10 vs forgetting time scale tau",
        ylabel="turn recall@10",
        xlabel="tau (days)",
    )
    lines = [
        "# Forgetting on LoCoMo dev (replayed in date order)",
        "",
        f"Forgetting off: turn recall@10 {100 * off:.1f}%. tau in days; threshold policy drops R < 0.05.",
        "",
        report.md_table(
            ["policy", "tau", "recall_k", "recall@10", "turns forgotten"],
            [
                [
                    r["forgetting"]["policy"],
                    r["forgetting"]["tau"],
                    r["recall_k"],
                    report.pct(r["recall_at_10"]),
                    f"{100 * r['share_forgotten']:.0f}%",
                ]
                for r in rows[1:]
            ],
        ),
        "",
    ]
    if chart:
        lines += [f"![sweep]({chart.name})", ""]
    lines.append(report.md_footer(results["run"]))
    report.write_markdown(report.sibling(out, ".md"), "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
