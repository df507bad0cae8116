"""``silicon-friend eval answers``: SiliconFriend answers the probing questions; an LLM judge scores.

    silicon-friend eval answers --memory-file FILE --questions FILE.jsonl --labels FILE.jsonl
        --judge openai:gpt-4o-mini [--llm SPEC] [--systems memorybank,no-memory,...]
        [--summarize] [--k 2] [--language en|zh] [--limit N] --out OUT.json

``--llm`` is SiliconFriend's backbone (default: the packaged SmolLM2 through llama.cpp; any spec
of :mod:`memory_bank.llm`, e.g. ``hf:/base+/adapter`` for a LoRA-tuned model). ``--judge`` is
any chat model spec; an OpenAI-compatible one in practice (``openai:MODEL@http://host:port/v1``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from memory_bank.config import DEFAULT_TOP_K, PAPER_FORGETTING
from memory_bank.errors import InvalidInputError
from memory_bank.forgetting import POLICIES
from memory_bank.languages import LANGUAGES


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``eval answers`` under the ``silicon-friend`` command's subparsers ``sub``."""
    ev = sub.add_parser("eval", help="evaluate SiliconFriend's answers (paper §4.2)")
    evsub = ev.add_subparsers(dest="eval_command", required=True, metavar="EVAL")
    p = evsub.add_parser(
        "answers",
        help="answer the probing questions with SiliconFriend and score them with an LLM judge",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--memory-file", required=True, help="memory file in the original MemoryBank format")
    p.add_argument("--questions", required=True, help="probing questions, one {user: [questions]} per line")
    p.add_argument("--labels", required=True, help="our labels: the reference answers (and evidence turns)")
    p.add_argument(
        "--judge", required=True, help="judge LLM spec, e.g. openai:gpt-4o-mini@http://127.0.0.1:8080/v1"
    )
    p.add_argument("--llm", help="SiliconFriend's backbone LLM spec (default: the packaged SmolLM2)")
    p.add_argument(
        "--systems",
        default="memorybank,no-memory",
        help="comma-separated: memorybank, no-memory, no-summaries, no-portrait, forgetting",
    )
    p.add_argument("--summarize", action="store_true", help="make daily/global summaries first (LLM calls)")
    p.add_argument("--summary-llm", help="LLM spec for the summaries (default: the backbone)")
    p.add_argument(
        "--k", type=int, default=DEFAULT_TOP_K, help=f"memories retrieved per question (the paper's {DEFAULT_TOP_K})"
    )
    p.add_argument("--language", choices=LANGUAGES, default="en")
    p.add_argument("--now", help="day the questions are asked (default: the day after the last memory)")
    p.add_argument("--limit", type=int, help="only the first N questions (a smoke run)")
    p.add_argument("--users", help="only these users (comma-separated)")
    p.add_argument("--max-new-tokens", type=int, default=200)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--forgetting-tau", type=float, default=1.0, help="for the 'forgetting' system (days)")
    p.add_argument("--forgetting-policy", choices=POLICIES, default="stochastic")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", help="keep embeddings here between runs")
    p.add_argument("--out", required=True, help="results file; the report and charts go next to it")
    p.add_argument("--encoder", help="encoder (default: minilm for en, use-multilingual for zh)")
    p.add_argument("-v", "--verbose", action="store_true")


def run(args: argparse.Namespace) -> int:
    """Run ``silicon-friend eval answers`` with parsed ``args``; returns the exit code."""
    from memory_bank.evaluation import paper, report
    from memory_bank.evaluation.encoders import eval_encoder
    from memory_bank.llm import build_chat_model, parse_llm_spec
    from memory_bank.original_format import load_memory_file
    from silicon_friend.evaluation.answers import AnswerSettings, run_answers
    from silicon_friend.models import load_model

    data = load_memory_file(args.memory_file)
    questions = paper.load_questions(args.questions)
    paper.check_users(questions, data, args.questions)
    paper.attach_labels(questions, paper.load_labels(args.labels))
    if args.users:
        wanted = {u.strip() for u in args.users.split(",")}
        questions = [q for q in questions if q.user in wanted]
    questions = [q for q in questions if q.answer]
    if args.limit is not None:
        questions = questions[: args.limit]
    if not questions:
        raise InvalidInputError("no labelled questions to ask (check --labels, --users and --limit)")
    settings = AnswerSettings(
        systems=[s.strip() for s in args.systems.split(",") if s.strip()],
        k=args.k,
        language=args.language,
        summarize=args.summarize,
        now=args.now,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        forgetting={
            **PAPER_FORGETTING,
            "tau": args.forgetting_tau,
            "policy": args.forgetting_policy,
            "seed": args.seed,
        },
        seed=args.seed,
    )
    settings.check()
    judge_spec = parse_llm_spec(args.judge)
    backbone = load_model(args.llm)
    judge_model = build_chat_model(judge_spec)
    summary_model = build_chat_model(parse_llm_spec(args.summary_llm)) if args.summary_llm else None
    encoder = eval_encoder(args.encoder, args.language, args.cache_dir)
    bars: list[Any] = []

    def progress(stage: str, total: int) -> Callable[[int], Any]:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=stage, unit="step", disable=None, file=sys.stderr)
        bars.append(bar)
        return bar.update

    try:
        results = run_answers(
            data,
            questions,
            backbone=backbone,
            judge_model=judge_model,
            encoder=encoder,
            settings=settings,
            summary_model=summary_model,
            progress=progress,
        )
    finally:
        for bar in bars:
            bar.close()
    config = {
        "llm": str(parse_llm_spec(args.llm)),
        "judge": str(judge_spec),
        "encoder": encoder.name,
        "memory_file": str(args.memory_file),
        "questions": str(args.questions),
        "labels": str(args.labels),
        "n_questions": len(questions),
    }
    out = {"run": report.run_info("silicon-friend eval answers", config), **results}
    report.write_json(args.out, out)
    local = judge_spec.backend == "llamacpp" or any(
        h in str(judge_spec.base_url or "") for h in ("127.0.0.1", "localhost", "[::1]")
    )
    charts = _charts(args.out, out)
    report.write_markdown(report.sibling(args.out, ".md"), markdown(out, charts, local_judge=local))
    _print(out)
    return 0


def _charts(out_path: str, results: dict[str, Any]) -> dict[str, Any]:
    from memory_bank.evaluation import report

    metrics = results["metrics"]
    names = ["retrieval_accuracy", "correctness", "coherence", "ranking"]
    series = {s: [m.get("all", {}).get(k, {}).get("mean", 0.0) for k in names] for s, m in metrics.items()}
    path = report.grouped_bars(
        report.sibling(out_path, "-metrics.png"),
        ["retrieval accuracy", "correctness", "coherence", "ranking"],
        series,
        title="Answers: the paper's four metrics (LLM judge)",
        ylabel="score (%)",
    )
    return {"metrics": path} if path else {}


def markdown(results: dict[str, Any], charts: dict[str, Any], *, local_judge: bool) -> str:
    from memory_bank.evaluation import report

    cfg = results["run"]["config"]
    judge = results["judge"]
    lines = [
        "# Answers on the probing questions",
        "",
        f"{cfg['n_questions']} questions; backbone `{cfg['llm']}`, judge `{cfg['judge']}` "
        f"({judge['version']}, prompts {judge['prompt_hash']}, {judge['failures']} unusable judge answers); "
        f"top-k {results['settings']['k']}; summaries made: {results['settings']['summarize']}.",
        "",
    ]
    if local_judge:
        lines += [
            "**The judge is a local model: unless it is a strong one, these scores are a smoke check "
            "of the pipeline, not a measurement.**",
            "",
        ]
    rows = []
    for s, m in results["metrics"].items():
        a = m.get("all", {})
        rows.append(
            [
                s,
                *[
                    report.pct(a[k]["mean"]) if k in a else "-"
                    for k in ("retrieval_accuracy", "evidence_hit", "correctness", "coherence", "ranking")
                ],
            ]
        )
    lines += [
        report.md_table(
            ["system", "retrieval acc.", "evidence hit (labels)", "correctness", "coherence", "ranking"], rows
        ),
        "",
        "Retrieval accuracy, correctness and coherence are judged 0/1, 0/0.5/1 and 0/0.5/1; ranking "
        "is the mean of 1/rank among the systems of this run; evidence hit is computed from the "
        "labels (an evidence turn among the retrieved memories), without the judge.",
        "",
    ]
    if "metrics" in charts:
        lines += [f"![metrics]({charts['metrics'].name})", ""]
    lines.append(report.md_footer(results["run"]))
    return "\n".join(lines)


def _print(results: dict[str, Any]) -> None:
    for s, m in results["metrics"].items():
        a = m.get("all", {})
        parts = [
            f"{k} {100 * a[k]['mean']:.1f}%"
            for k in ("retrieval_accuracy", "correctness", "coherence", "ranking")
            if k in a
        ]
        print(f"{s}: " + ", ".join(parts))
