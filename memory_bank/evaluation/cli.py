"""``memorybank eval``: the paper's probing-question evaluation and the retrieval benchmarks.

    memorybank eval retrieval --memory-file FILE --questions FILE.jsonl [--labels FILE.jsonl]
                              [--k K] [--language en|zh] [--store DIR] --out OUT.jsonl
    memorybank eval locomo    --data FILE [--k 1,5,10,25,50] [--forgetting off|paper|sweep] --out OUT.json
    memorybank eval forgetting [--locomo FILE] [--paper-data DIR] [--eval-data DIR] --out OUT.json
    memorybank eval longmemeval --data FILE [--k 1,5,10] --out OUT.json
    memorybank eval madial    --data DIR --language zh|en [--k 1,3,5,10] --out OUT.json

The answer evaluation (the paper's four metrics) runs the chatbot, so it belongs to the app:
``silicon-friend eval answers`` (see :mod:`silicon_friend.evaluation`).

Each writes its results, a Markdown report (``OUT.md``) and charts (``OUT-*.png``) next to OUT.
Nothing here reads or writes a user's store unless ``--store`` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from memory_bank.cli_support import command, register_extension
from memory_bank.errors import InvalidInputError
from memory_bank.languages import LANGUAGES

logger = logging.getLogger(__name__)

_HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {}


def _sub(name: str) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    def register(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        _HANDLERS[name] = fn
        return fn

    return register


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="results file; the report and charts go next to it")
    p.add_argument("--encoder", help="encoder (default: minilm for en, use-multilingual for zh)")
    p.add_argument("--config", help="MemoryBank YAML config for the bank under test (retrieval settings)")
    p.add_argument("-v", "--verbose", action="store_true")


def _forgetting_args(p: argparse.ArgumentParser) -> None:
    from memory_bank.config import DEFAULT_TOP_K
    from memory_bank.evaluation.locomo_run import RECOMMENDED_FORGETTING
    from memory_bank.forgetting import POLICIES

    rec = RECOMMENDED_FORGETTING
    p.add_argument(
        "--forgetting",
        choices=["off", "paper", "sweep"],
        default="off",
        help="paper: also replay the sessions in date order with Ebbinghaus forgetting on; "
        "sweep: share forgotten vs recall@10 over many settings (see 'eval forgetting')",
    )
    p.add_argument(
        "--tau", type=float, default=rec["tau"], help=f"forgetting time scale in days ({rec['tau']})"
    )
    p.add_argument("--policy", choices=POLICIES, default=rec["policy"])
    p.add_argument("--threshold", type=float, default=rec["threshold"])
    p.add_argument("--seed", type=int, default=0, help="seed of stochastic forgetting passes")
    p.add_argument(
        "--recall-k",
        type=int,
        default=DEFAULT_TOP_K,
        help="while replaying, each utterance recalls (reinforces) this many memories (0: none)",
    )


def _add_parsers(sub: argparse._SubParsersAction) -> None:
    from memory_bank.evaluation.forgetting_sweep import add_sweep_parser, sweep_args

    ev = sub.add_parser(
        "eval",
        help="evaluate retrieval and answers (paper §4.2, eval_data/, LoCoMo, LongMemEval)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    evsub = ev.add_subparsers(dest="eval_command", required=True, metavar="EVAL")

    p = evsub.add_parser("retrieval", help="retrieve memories for the paper's probing questions")
    p.add_argument("--memory-file", required=True, help="memory file in the original MemoryBank format")
    p.add_argument("--questions", required=True, help="probing questions, one {user: [questions]} per line")
    p.add_argument("--labels", help="our labels (evidence turns, answers): prints hit@k and recall@k")
    p.add_argument("--k", type=int, default=3, help="memories retrieved per question (default 3)")
    p.add_argument("--language", choices=LANGUAGES, default="en")
    p.add_argument("--store", help="store to use (default: a temporary one); existing users are reused")
    p.add_argument("--now", help="day the questions are asked (default: the day after the last memory)")
    p.add_argument(
        "--ranker",
        choices=["bank", "proposed-v2"],
        default="bank",
        help="bank: MemoryBank.search; proposed-v2: a ranking change measured in evaluation/variants.py",
    )
    p.add_argument(
        "--scenario",
        choices=["first-ask", "second-ask"],
        default="first-ask",
        help="second-ask: the user asked every question once before and got useless answers (stored as turns)",
    )
    p.add_argument("--cache-dir", help="keep embeddings here between runs")
    _common(p)

    p = evsub.add_parser("locomo", help="LLM-free turn recall@k on LoCoMo, with baselines")
    p.add_argument("--data", required=True, help="LoCoMo JSON file (e.g. locomo10.json)")
    p.add_argument("--k", default="1,5,10,25,50", help="cut-offs, comma-separated")
    p.add_argument(
        "--systems",
        default="bm25,dense,ours",
        help="comma-separated: bm25, dense, ours, proposed-v2 (forgetting adds two)",
    )
    p.add_argument("--conversations", help="only these sample ids (comma-separated)")
    p.add_argument("--cache-dir", help="keep embeddings here between runs")
    _forgetting_args(p)
    sweep_args(p)
    _common(p)

    p = evsub.add_parser("longmemeval", help="LLM-free turn and session recall@k on a LongMemEval file")
    p.add_argument("--data", required=True, help="LongMemEval JSON file (longmemeval_s.json, ...)")
    p.add_argument("--k", default="1,5,10,25,50")
    p.add_argument("--systems", default="bm25,dense,ours")
    p.add_argument("--include-abstention", action="store_true", help="also ask the _abs questions")
    p.add_argument("--limit", type=int, help="only the first N questions")
    p.add_argument("--cache-dir", help="keep embeddings here between runs")
    _common(p)

    p = evsub.add_parser(
        "answers",
        help="moved to the app: silicon-friend eval answers (the answers come from the chatbot)",
        add_help=False,
        prefix_chars="+",  # take every option as it comes: the handler says where they go now
    )
    p.add_argument("rest", nargs="*")

    from memory_bank.evaluation.madial_run import add_madial_parser

    add_madial_parser(evsub, _common)
    add_sweep_parser(evsub, _common)


register_extension(_add_parsers)


@command("eval")
def _eval(args: argparse.Namespace) -> int:
    logging.getLogger("memory_bank").setLevel(
        logging.INFO if getattr(args, "verbose", False) else logging.WARNING
    )
    return _HANDLERS[args.eval_command](args)


@contextlib.contextmanager
def _store(path: str | None) -> Iterator[str]:
    if path:
        yield path
    else:
        with tempfile.TemporaryDirectory(prefix="memorybank-eval-") as tmp:
            yield tmp


@_sub("retrieval")
def _retrieval(args: argparse.Namespace) -> int:
    from memory_bank.bank import MemoryBank
    from memory_bank.evaluation import paper, report
    from memory_bank.evaluation.encoders import eval_encoder
    from memory_bank.original_format import import_data, load_memory_file

    if args.k < 1:
        raise InvalidInputError(f"--k must be at least 1, got {args.k}")
    data = load_memory_file(args.memory_file)
    questions = paper.load_questions(args.questions)
    paper.check_users(questions, data, args.questions)
    if args.labels:
        paper.attach_labels(questions, paper.load_labels(args.labels))
    now = args.now or paper.default_now(data)
    if args.scenario == "second-ask":
        from memory_bank.evaluation.second_ask import asked_before, next_day

        data, now = asked_before(data, questions, args.language, now), next_day(now)
    encoder = eval_encoder(args.encoder, args.language, args.cache_dir)
    if args.ranker != "bank":
        rows = paper.retrieve_proposed(data, questions, args.k, encoder, now=now, proposal=args.ranker)
    else:
        with _store(args.store) as store:
            bank = MemoryBank.open(
                store, config_file=args.config, language=args.language, encoder_instance=encoder
            )
            try:
                new = {k: v for k, v in data.items() if not bank.has_user(k)}
                if new:
                    import_data(bank, new)
                rows = paper.retrieve(bank, questions, args.k, now=now)
            finally:
                bank.close()
    encoder.save()
    paper.write_jsonl(args.out, rows)
    print(f"wrote {len(rows)} questions to {args.out}", file=sys.stderr)
    if not args.labels:
        return 0
    ks = paper.metric_ks(args.k)
    metrics = paper.score(questions, rows, ks)
    turns = sum(len(t) for u in data.values() for t in (u.get("history") or {}).values())
    results = {
        "run": report.run_info("eval retrieval", vars(args) | {"now": now}),
        "config": {
            "ranker": args.ranker,
            "encoder": encoder.name,
            "k": args.k,
            "now": now,
            "scenario": args.scenario,
        },
        "dataset": {
            "memory_file": str(args.memory_file),
            "questions_file": str(args.questions),
            "labels_file": str(args.labels),
            "users": len(data),
            "turns": turns,
            "questions": len(questions),
            "labelled": sum(1 for q in questions if q.evidence),
            "absent": sum(1 for q in questions if q.type == "absent"),
        },
        "ks": ks,
        "metrics": metrics,
    }
    qfile = Path(args.questions)
    title = f"Retrieval on {qfile.parent.name}/{qfile.name} ({args.ranker} ranker, {args.scenario})"
    paper.write_report(args.out, title, results)
    a = metrics.get("all", {})
    print(
        f"{a.get('n', 0)} labelled questions: "
        + "  ".join(f"hit@{k} {100 * a.get(f'hit@{k}', 0):.1f}%" for k in ks)
        + "  |  "
        + "  ".join(f"recall@{k} {100 * a.get(f'recall@{k}', 0):.1f}%" for k in ks)
    )
    print(f"report: {report.sibling(args.out, '.md')}", file=sys.stderr)
    return 0


@_sub("answers")
def _answers(args: argparse.Namespace) -> int:
    raise InvalidInputError(
        "the answer evaluation runs the SiliconFriend chatbot, so it lives in the app now: "
        "run `silicon-friend eval answers` with the same options"
    )


@_sub("locomo")
def _locomo(args: argparse.Namespace) -> int:
    from memory_bank.evaluation.locomo_run import run_locomo

    if args.forgetting == "sweep":
        from memory_bank.evaluation.forgetting_sweep import locomo_sweep

        return locomo_sweep(args)
    run_locomo(args)
    return 0


@_sub("forgetting")
def _forgetting_sweep(args: argparse.Namespace) -> int:
    from memory_bank.evaluation.forgetting_sweep import run_sweep_command

    return run_sweep_command(args)


@_sub("longmemeval")
def _longmemeval(args: argparse.Namespace) -> int:
    from memory_bank.evaluation.locomo_run import run_longmemeval

    run_longmemeval(args)
    return 0


@_sub("madial")
def _madial(args: argparse.Namespace) -> int:
    from memory_bank.evaluation.madial_run import run_madial

    run_madial(args)
    return 0
