"""``memorybank bench``: the command line of the benchmark (see :mod:`memory_bank.bench.runner`).

memorybank bench --json bench.json --chart bench.png          # default sizes, about 15 min
memorybank bench --quick --json quick.json                    # seconds, hashing encoder
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from memory_bank.cli_support import command, register_extension
from memory_bank.errors import InvalidInputError


def _ints(text: str) -> list[int]:
    try:
        values = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from e
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"sizes must be positive, got {text!r}")
    return values


def _add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "bench", help="benchmark latency and throughput against the original, LangChain and mem0"
    )
    p.add_argument(
        "--sizes", type=_ints, help="memories in the measured user's store (default 1000,10000,100000)"
    )
    p.add_argument("--users", type=int, help="users in the many-users scenario, 0 to skip (default 1000)")
    p.add_argument("--per-user", type=int, help="memories per user in that scenario (default 1000)")
    p.add_argument(
        "--forget-size", type=int, help="memories in the forgetting-pass scenario, 0 to skip (1000000)"
    )
    p.add_argument(
        "--chat-sizes",
        type=_ints,
        help="memories of one user in the chat-turn scenario (default 1000,100000,1000000)",
    )
    p.add_argument("--no-chat", action="store_true", help="skip the chat-turn scenario")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="write the results as JSON")
    p.add_argument("--chart", metavar="PNG", help="write a chart (matplotlib)")
    p.add_argument("--markdown", metavar="MD", help="write the results table as Markdown")
    p.add_argument("--quick", action="store_true", help="tiny sizes, hashing encoder, a few seconds (CI)")
    p.add_argument("--encoder", help="encoder (default minilm; hashing in --quick)")
    p.add_argument(
        "--baselines",
        help="comma-separated, from original,langchain,mem0 (default all; 'none' for none)",
    )
    p.add_argument("--mem0-python", help="python of a separate environment with mem0ai installed")
    p.add_argument("--threads", type=int, help="torch threads (default 1: one query per request)")
    p.add_argument("--rounds", type=int, help="repeated rounds; medians are reported (default 3)")
    p.add_argument("--queries", type=int, help="queries per round (default 50)")
    p.add_argument("--workdir", help="keep the stores here instead of a temporary directory")
    p.add_argument("--in-process", action="store_true", help="measure in this process (no per-system RSS)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-v", "--verbose", action="store_true")


register_extension(_add_parsers)


@command("bench")
def _bench(args: argparse.Namespace) -> int:
    from memory_bank.bench.report import markdown
    from memory_bank.bench.runner import SYSTEMS, BenchConfig, run

    if args.mem0_python and not (os.path.isfile(args.mem0_python) and os.access(args.mem0_python, os.X_OK)):
        raise InvalidInputError(  # checked before any work: the run found out after its first stage
            f"--mem0-python {args.mem0_python!r} is not a python interpreter here; give the python of "
            "the environment where mem0ai is installed (e.g. /path/to/venv/bin/python)"
        )
    overrides: dict[str, Any] = {
        "sizes": args.sizes,
        "users": args.users,
        "per_user": args.per_user,
        "forget_size": args.forget_size,
        "chat_sizes": [] if args.no_chat else args.chat_sizes,
        "encoder": args.encoder,
        "mem0_python": args.mem0_python,
        "threads": args.threads,
        "rounds": args.rounds,
        "queries": args.queries,
        "workdir": args.workdir,
        "keep": True if args.workdir else None,  # --workdir keeps the stores for reruns
        "seed": args.seed,
    }
    if args.baselines is not None:
        names = (
            [] if args.baselines == "none" else [b.strip() for b in args.baselines.split(",") if b.strip()]
        )
        unknown = [b for b in names if b not in SYSTEMS[1:]]
        if unknown:
            raise InvalidInputError(f"unknown baseline {unknown[0]!r}; use original, langchain, mem0 or none")
        overrides["baselines"] = names
    if args.in_process:
        overrides["in_process"] = True
    if args.quick:
        cfg = BenchConfig.quick_mode(**overrides)
    else:
        cfg = BenchConfig(**{k: v for k, v in overrides.items() if v is not None})
    out = run(cfg, json_out=args.json_out, chart=args.chart)
    table = markdown(out)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(table + "\n")
    print(table)
    if not args.json_out:
        json.dump({"targets": out["targets"]}, sys.stdout, indent=1, default=float)
        print()
    return 0
