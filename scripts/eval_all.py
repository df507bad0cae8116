"""Reproduce every retrieval figure of the Evaluation section of README.md (no LLM needed).

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python scripts/eval_all.py --out-dir runs/eval

Runs, with the default (packaged) encoders:

1. ``memorybank eval retrieval`` on the paper's probing questions (en, zh) with our labels, and
   on our own set (eval_data/, en and zh), once per ranker: the bank as it is, and the two
   the measured ranking change not adopted (``--ranker proposed-v2``), and the bank again with
   ``--scenario second-ask`` (every question asked once before and answered uselessly);
2. ``memorybank eval madial`` (en, zh) with bm25, dense and ours;
3. ``memorybank eval locomo`` on the LoCoMo dev file with every system, forgetting off;
4. the same with ``--forgetting paper`` (the paper's curve and the recommended settings);

then writes ``SUMMARY.md`` in the output folder with the headline numbers of every run. Each run
also writes its own JSON, Markdown report and charts there. The data is read from
``$MEMORYBANK_SHARED_DATA`` (default ``../shared/data``); runs whose data is missing are skipped.
``--cache-dir`` keeps embeddings between runs (only speed changes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from eval_dev import labelled_sets  # noqa: E402  (the dev sets, defined once)

from memory_bank.cli import main as memorybank  # noqa: E402


def run(argv: list[str]) -> None:
    print("+ memorybank " + " ".join(argv), file=sys.stderr, flush=True)
    code = memorybank(argv)
    if code != 0:
        raise SystemExit(f"memorybank {argv[0]} {argv[1]} failed with exit code {code}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", default="runs/eval")
    ap.add_argument(
        "--shared", default=os.environ.get("MEMORYBANK_SHARED_DATA", str(REPO.parent / "shared" / "data"))
    )
    ap.add_argument("--cache-dir", help="keep embeddings here between runs (speed only)")
    ap.add_argument("--skip", default="", help="comma-separated steps to skip: retrieval, madial, locomo, forgetting")
    args = ap.parse_args()
    out, shared = Path(args.out_dir), Path(args.shared)
    out.mkdir(parents=True, exist_ok=True)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    rows: list[list[Any]] = []
    cache = ["--cache-dir", args.cache_dir] if args.cache_dir else []
    if "retrieval" not in skip:
        for name, lang, memory, questions, labels in labelled_sets(shared):
            if not memory.is_file():
                print(f"skipping {name}: {memory} not found", file=sys.stderr)
                continue
            for ranker, scenario in (("bank", "first-ask"), ("proposed-v2", "first-ask"), ("bank", "second-ask")):
                stem = out / f"{name}-{ranker}{'-second-ask' if scenario == 'second-ask' else ''}.jsonl"
                run(["eval", "retrieval", "--memory-file", str(memory), "--questions", str(questions),
                     "--labels", str(labels), "--language", lang, "--k", "10", "--ranker", ranker,
                     "--scenario", scenario, *cache, "--out", str(stem)])  # fmt: skip
                m = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))["metrics"]["all"]
                rows.append([name, ranker, scenario, m["n"], *(f"{100 * m[f'hit@{k}']:.1f}" for k in (1, 2, 3, 5)),
                             f"{100 * m['recall@3']:.1f}"])  # fmt: skip
    madial_rows: list[list[Any]] = []
    if "madial" not in skip and (shared / "madial").is_dir():
        for lang in ("en", "zh"):
            stem = out / f"madial-{lang}.json"
            run(["eval", "madial", "--data", str(shared / "madial"), "--language", lang, "--k", "1,3,5,10",
                 "--systems", "bm25,dense,ours", *cache, "--out", str(stem)])  # fmt: skip
            res = json.loads(stem.read_text(encoding="utf-8"))
            for system, m in res["systems"].items():
                r, n = m["turn_recall"]["all"], res["ndcg"][system]
                madial_rows.append([f"madial-{lang}", system, *(f"{100 * r[k]:.1f}" for k in ("5", "10")),
                                    f"{100 * n['10']:.1f}"])  # fmt: skip
    elif "madial" not in skip:
        print(f"skipping MADial: {shared / 'madial'} not found", file=sys.stderr)
    locomo = shared / "locomo" / "locomo_dev.json"
    runs = []
    if locomo.is_file():
        if "locomo" not in skip:
            runs.append(("locomo-dev", ["--systems", "bm25,dense,ours,proposed-v2"]))
        if "forgetting" not in skip:
            runs.append(("locomo-dev-forgetting", ["--systems", "bm25,ours", "--forgetting", "paper"]))
        for stem, extra in runs:
            run(["eval", "locomo", "--data", str(locomo), *extra, *cache, "--out", str(out / f"{stem}.json")])
    else:
        print(f"skipping LoCoMo: {locomo} not found", file=sys.stderr)
    lines = ["# Evaluation summary", "", "## Labelled questions (hit@k and full-evidence recall@3, %)", ""]
    lines += [
        "| set | ranker | scenario | n | hit@1 | hit@2 | hit@3 | hit@5 | recall@3 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    if madial_rows:
        lines += ["", "## MADial-Bench (the benchmark's protocol, %)", "",
                  "| set | system | recall@5 | recall@10 | nDCG@10 |", "|---|---|---|---|---|"]  # fmt: skip
        lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in madial_rows]
    for stem, _ in runs:
        res = json.loads((out / f"{stem}.json").read_text(encoding="utf-8"))
        ks = [str(k) for k in res["ks"]]
        lines += ["", f"## {stem}: turn recall@k (%)", "", "| system | " + " | ".join(f"@{k}" for k in ks) + " |",
                  "|---|" + "---|" * len(ks)]  # fmt: skip
        for name, m in res["systems"].items():
            lines.append(
                f"| {name} | " + " | ".join(f"{100 * m['turn_recall']['all'][k]:.1f}" for k in ks) + " |"
            )
        for name, st in res.get("forgetting_stats", {}).items():
            lines.append(f"\n{name}: forgot {st['forgotten']} of {st['memories']} turns")
    (out / "SUMMARY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out / 'SUMMARY.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
