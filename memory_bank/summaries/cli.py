"""``memorybank summarize``: make the due summaries of one user or all, now.

    memorybank summarize --store DIR [--user U] [--llm SPEC] [--language en|zh] [--now DATE]
                         [--summary-config FILE.yaml] [--dry-run] [--json]

Days before ``--now`` (default today) whose layers are missing or stale are summarised, then
the global layers are updated. Exit code 0 when everything due was made, 1 when some layers
failed (they are logged and stay due for the next run), 2 on a usage or setup error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memory_bank.cli_support import command, dump_json, open_bank, progress, register_extension
from memory_bank.languages import LANGUAGES


def _add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "summarize",
        help="make due daily/global event summaries and personality portraits with an LLM",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--store", required=True, help="memory store directory")
    p.add_argument("--config", help="MemoryBank YAML config file; flags override it")
    p.add_argument("--user", help="only this user (default: every user)")
    p.add_argument(
        "--llm",
        help="LLM spec, e.g. llamacpp, llamacpp:/m.gguf, openai:gpt-4o-mini (default: packaged SmolLM2)",
    )
    p.add_argument("--language", choices=LANGUAGES, help="summary language (default: the store's)")
    p.add_argument("--encoder", help="encoder for indexing the summaries (default: the configured one)")
    p.add_argument("--now", help="today (YYYY-MM-DD): days before it are over (default: today)")
    p.add_argument(
        "--summary-config",
        help="summariser YAML config (configs/summaries.yaml); overrides the --config file's summaries:",
    )
    p.add_argument("--dry-run", action="store_true", help="list the due days; call no LLM")
    p.add_argument("--json", action="store_true", help="one JSON report per user on stdout")
    p.add_argument("-v", "--verbose", action="store_true")


register_extension(_add_parsers)


@command("summarize")
def _summarize(args: argparse.Namespace) -> int:
    from memory_bank.summaries.config import load_summary_config
    from memory_bank.summaries.state import due_days
    from memory_bank.summaries.summarizer import summarizer_from_config

    # --language picks the summaries' language only; the store keeps its encoder (which the
    # core's --language would change) so summaries are embedded like the turns they sit with.
    with open_bank(argparse.Namespace(**{**vars(args), "language": None})) as bank:
        # The --config file's summaries: section, then --summary-config, then the flags.
        cfg = load_summary_config(
            args.summary_config, base=bank.config.summaries, language=args.language, llm=args.llm
        )
        users = [bank.user(args.user).name] if args.user else bank.users()
        due = {u: due_days(bank, u, args.now) for u in users}
        if args.dry_run:
            for u, days in due.items():
                dump_json({"user": u, "due_days": days}) if args.json else print(
                    f"{u}: {', '.join(days) or 'nothing due'}"
                )
            return 0
        summarizer = summarizer_from_config(bank, cfg)
        reports: list[Any] = []
        with progress(sum(len(d) + 1 for d in due.values()), "summarising", unit="step") as bar:
            for u in users:
                bar.set_postfix_str(u, refresh=False)
                reports.append(summarizer.summarize_user(u, now=args.now, progress=bar.update))
    for r in reports:
        if args.json:
            dump_json(r.to_dict())
        else:
            print(
                f"{r.user}: {len(r.days)} days summarised, {len(r.written)} layers written, "
                f"{len(r.deleted)} deleted, {len(r.failed)} failed ({r.calls} LLM calls, {r.seconds:.1f} s)"
            )
    failed = sum(len(r.failed) for r in reports)
    if failed:
        print(
            f"memorybank: {failed} layers failed; they stay due for the next run (see the log)",
            file=sys.stderr,
        )
    return 1 if failed else 0
