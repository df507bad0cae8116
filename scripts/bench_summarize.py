"""Time "Summarize Memory Bank" with a real model on the paper's data (one user, ten days).

Imports one user of ``memory_bank_en.json`` / ``memory_bank_cn.json`` into a throwaway bank,
then runs what the web app's button runs (``SiliconFriend.summarize``: every finished day, then
the global layers) with the offline default model, or ``--llm``. Prints the wall time, the LLM
calls, the layers written and failed, and the portrait; writes the figures as JSON.

    python scripts/bench_summarize.py --data ../shared/data/memorybank_eval --user "Linda" \\
        --out artifacts/bench_summarize.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path


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
        engine = SiliconFriend(bank, loaded, language=args.language, summarizer=summarizer)
        session = engine.start(key)
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
        "progress_steps": len(steps),
        "layers_written": len([m for m in layers if m.text.strip()]),
        "error": error,
        "portrait": profile["global_portrait"],
        "summary": profile["global_summary"],
    }
    print(json.dumps(result, ensure_ascii=False, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
