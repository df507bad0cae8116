"""Time "Summarize Memory Bank" with a real model on the paper's data (one user, ten days).

Imports one user of ``memory_bank_en.json`` / ``memory_bank_cn.json`` into a throwaway bank,
then runs what the web app's button runs (``SiliconFriend.summarize``: every finished day, then
the global layers) with the offline default model, or ``--llm``. Prints the wall time, the LLM
calls, the layers written and failed, and the portrait; then every LLM call (task, attempt,
prompt and output tokens, seconds, outcome) and the totals per task and per outcome, so the
time can be read call by call; writes the figures as JSON.

    python scripts/bench_summarize.py --data ../shared/data/memorybank_eval --user "Linda" \\
        --out artifacts/bench_summarize.json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", default="../shared/data/memorybank_eval", help="the paper's eval data folder"
    )
    parser.add_argument("--language", choices=("en", "zh"), default="en")
    parser.add_argument("--user", default=None, help="the user to import (default: the first)")
    parser.add_argument("--days", type=int, default=None, help="keep only the first N days of history")
    parser.add_argument("--llm", default=None, help="LLM spec (default: the offline SmolLM2)")
    parser.add_argument("--out", default=None, help="write the figures here as JSON")
    args = parser.parse_args(argv)

    from memory_bank import MemoryBank
    from memory_bank.embeddings import HashingEncoder
    from memory_bank.original_format import import_data, load_memory_file
    from memory_bank.summaries import Summarizer
    from silicon_friend.engine import SiliconFriend
    from silicon_friend.models import load_model

    sub = "en" if args.language == "en" else "cn"
    path = Path(args.data) / sub / f"memory_bank_{sub}.json"
    if not path.exists():
        print(f"error: {path} not found; pass --data with the paper's eval folder", file=sys.stderr)
        return 2
    data = load_memory_file(path)
    user = args.user or next(iter(data))
    key = next((k for k in data if k.strip() == user.strip()), None)
    if key is None:
        print(f"error: no user {user!r} in {path}", file=sys.stderr)
        return 2
    record = data[key]
    if args.days:
        record = {**record, "history": dict(sorted(record["history"].items())[: args.days])}
    days = sorted(record["history"])
    now = dt.datetime.fromisoformat(days[-1]) + dt.timedelta(days=1, hours=12)
    with tempfile.TemporaryDirectory() as tmp:
        bank = MemoryBank.open(tmp, encoder_instance=HashingEncoder(64), clock=lambda: now)
        import_data(bank, {key: record})
        loaded = load_model(args.llm)
        summarizer = Summarizer(bank, loaded.chat_model, args.language)
        reports = _record_reports(summarizer)
        engine = SiliconFriend(bank, loaded, language=args.language, summarizer=summarizer)
        session = engine.start(key)
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        steps: list[float] = []
        error = None
        try:
            profile = engine.summarize(
                session, progress=lambda done, total: steps.append(time.perf_counter())
            )
        except Exception as e:  # reported, not raised: the figures are still worth having
            error = f"{type(e).__name__}: {e}"
            profile = bank.profile(key)
        seconds = time.perf_counter() - started
        layers = [m for m, _ in bank.memories(key) if m.kind.value != "turn"]
        bank.close()
    result = {
        "user": key.strip(),
        "language": args.language,
        "days": len(days),
        "turns": sum(len(v) for v in record["history"].values()),
        "llm": args.llm or "default (SmolLM2-135M, llama.cpp)",
        "seconds": round(seconds, 1),
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],  # start, end (machine share)
        "progress_steps": len(steps),
        "layers_written": len([m for m in layers if m.text.strip()]),
        "error": error,
        **_call_figures(reports),
        "portrait": profile["global_portrait"],
        "summary": profile["global_summary"],
    }
    print(json.dumps({k: v for k, v in result.items() if k != "attempts"}, ensure_ascii=False, indent=2))
    for a in result["attempts"]:
        print(
            f"{a['task']:<18} try {a['attempt']}  prompt {a['prompt_tokens']:>5}  out {a['output_tokens']:>4}"
            f"  {a['seconds']:>6.1f} s  {a['outcome'][:90]}"
        )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


def _record_reports(summarizer: Any) -> list[Any]:
    """Keep the report of every run the button makes (the engine returns only the profile)."""
    reports: list[Any] = []
    for name in ("summarize_user", "summarize_day", "summarize_globals"):
        method = getattr(summarizer, name)

        def wrapped(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
            report = _method(*args, **kwargs)
            reports.append(report)
            return report

        setattr(summarizer, name, wrapped)
    return reports


def _call_figures(reports: list[Any]) -> dict[str, Any]:
    """Per-call records and their totals by task and by outcome (ok, copy, or the refusal)."""
    attempts = [dataclasses.asdict(a) for r in reports for a in r.attempts]
    by_task: dict[str, dict[str, float]] = {}
    by_outcome: dict[str, dict[str, float]] = {}
    for a in attempts:
        outcome = a["outcome"] if a["outcome"] in ("ok", "copy") else a["outcome"].split(" (")[0][:60]
        for table, key in ((by_task, a["task"]), (by_outcome, outcome)):
            row = table.setdefault(key, {"calls": 0, "seconds": 0.0, "output_tokens": 0, "prompt_tokens": 0})
            row["calls"] += 1
            row["seconds"] = round(row["seconds"] + a["seconds"], 1)
            row["output_tokens"] += a["output_tokens"]
            row["prompt_tokens"] += a["prompt_tokens"]
    return {
        "llm_calls": len(attempts),
        "llm_seconds": round(sum(a["seconds"] for a in attempts), 1),
        "output_tokens": sum(a["output_tokens"] for a in attempts),
        "prompt_tokens": sum(a["prompt_tokens"] for a in attempts),
        "failed": [dataclasses.asdict(f) for r in reports for f in r.failed],
        "by_task": by_task,
        "by_outcome": by_outcome,
        "attempts": attempts,
    }


if __name__ == "__main__":
    raise SystemExit(main())
