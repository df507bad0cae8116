#!/usr/bin/env python3
"""Measure SiliconFriend's reply latency: time to the first streamed piece and to the full reply.

Runs the real engine (retrieval, prompt budgeting, streaming, storing the turn) against a fresh
temporary memory store, with the default offline model unless ``--llm`` says otherwise. One
warm-up reply (model load, encoder load) is reported separately. Prints a table and writes JSON.

    .venv/bin/python scripts/measure_latency.py                       # packaged SmolLM2, 8 replies
    .venv/bin/python scripts/measure_latency.py --max-new-tokens 64 --out runs/latency.json
    .venv/bin/python scripts/measure_latency.py --llm openai:smollm2@http://127.0.0.1:8080/v1

Timings include everything the app does for a reply; ``first`` is what a user waits before text
appears. The machine's load average is recorded: on a shared machine, numbers vary with it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MESSAGES = [
    "Hi! I'm Emily. I just adopted a cat named Miso.",
    "I've been feeling stressed about my exams next week.",
    "Do you remember what my cat is called?",
    "I went hiking on Mount Tai with my sister yesterday.",
    "Can you give me some advice for sleeping better?",
    "My best friend is moving to Shanghai and I feel sad.",
    "What did I tell you about my exams?",
    "Thank you for listening. I feel a bit better now.",
]


def force_llama_threads(n: int) -> None:
    """Make every ``llama_cpp.Llama`` use ``n`` threads (the LLM spec has no setting for it yet)."""
    import llama_cpp

    original = llama_cpp.Llama.__init__

    def init(self: Any, *a: Any, **kw: Any) -> None:
        kw.update(n_threads=n, n_threads_batch=n)
        original(self, *a, **kw)

    llama_cpp.Llama.__init__ = init  # type: ignore[method-assign]


def measure(engine: Any, session: Any, message: str) -> dict[str, Any]:
    started = time.perf_counter()
    first = None
    pieces = 0
    for _ in engine.stream(session, message):
        if first is None:
            first = time.perf_counter() - started
        pieces += 1
    total = time.perf_counter() - started
    turn = session.turns[-1]
    tokens = engine.model.count_tokens(turn.response) if turn.response else 0
    return {
        "message": message,
        "first_token_s": round(first, 3) if first is not None else None,
        "total_s": round(total, 3),
        "reply_tokens": tokens,
        "pieces": pieces,
        "tokens_per_s": round(tokens / (total - first), 1) if first is not None and total > first else None,
        "error": turn.error,
    }


def summary(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    values = [r[key] for r in rows if r[key] is not None]
    if not values:
        return {}
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--llm", help="LLM spec (default: the packaged SmolLM2 through llama.cpp)")
    parser.add_argument("--replies", type=int, default=len(MESSAGES))
    parser.add_argument("--max-new-tokens", type=int, default=256, help="the app's default is 256")
    parser.add_argument("--encoder", default=None, help="default: the language's (minilm for en)")
    parser.add_argument(
        "--n-threads",
        type=int,
        help="llama.cpp threads (memory_bank.llm uses min(cpus, 8); on a busy machine 1 can be much faster)",
    )
    parser.add_argument(
        "--context-tokens", type=int, help="the model's context (say it for a server: its --n_ctx)"
    )
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.n_threads:
        force_llama_threads(args.n_threads)

    from memory_bank import MemoryBank, runinfo
    from silicon_friend.engine import ChatSettings, SiliconFriend
    from silicon_friend.models import load_model

    t0 = time.perf_counter()
    model = load_model(args.llm, context_tokens=args.context_tokens)
    load_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as store:
        overrides = {"encoder": args.encoder} if args.encoder else {}
        bank = MemoryBank.open(Path(store), **overrides)
        engine = SiliconFriend(bank, model, settings=ChatSettings(max_new_tokens=args.max_new_tokens))
        warm = measure(engine, engine.start("Warmup"), "Hello!")
        session = engine.start("Emily")
        rows = [measure(engine, session, MESSAGES[i % len(MESSAGES)]) for i in range(args.replies)]
        bank.close()

    result = {
        "llm": model.name,
        "context_tokens": model.context_tokens,
        "max_new_tokens": args.max_new_tokens,
        "decoding": str(getattr(model, "decoding", "n/a")),
        "n_threads": args.n_threads or "default",
        "model_load_s": round(load_s, 3),
        "warmup": warm,
        "first_token_s": summary(rows, "first_token_s"),
        "total_s": summary(rows, "total_s"),
        "reply_tokens": summary(rows, "reply_tokens"),
        "tokens_per_s": summary(rows, "tokens_per_s"),
        "replies": rows,
        "git_commit": runinfo.git_commit(),
        "machine": runinfo.machine_info(),
    }
    print(f"model {result['llm']} (context {model.context_tokens}), loaded in {load_s:.2f} s")
    print(f"warm-up reply: first piece {warm['first_token_s']} s, full {warm['total_s']} s")
    print(f"{'first(s)':>9} {'full(s)':>8} {'tokens':>7} {'tok/s':>6}  message")
    for r in rows:
        print(
            f"{r['first_token_s']!s:>9} {r['total_s']:>8} {r['reply_tokens']:>7} {r['tokens_per_s']!s:>6}  {r['message'][:48]}"
        )
    first, full = result["first_token_s"].get("median"), result["total_s"].get("median")
    print(f"median first piece {first} s, median full reply {full} s")
    print(f"load average {result['machine']['loadavg']} on {result['machine']['cpus']} CPUs")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=2), encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
