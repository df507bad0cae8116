"""``memorybank eval locomo`` and ``memorybank eval longmemeval``: build the systems, run, report.

Systems by name (``--systems``):

* ``bm25``: plain BM25 over each turn's own text (the published LoCoMo baseline's setting);
* ``dense``: plain cosine with the encoder (all-MiniLM-L6-v2 for English, as in the paper);
* ``ours``: a real MemoryBank with its configuration (defaults, or ``--config``);
* ``proposed-v2``: a measured ranking change not adopted in the core
  (:mod:`memory_bank.evaluation.variants`, see the Evaluation section of ``README.md``).

With ``--forgetting paper`` two more run: ``ours+forgetting(paper)``, the paper's curve as
published (tau = 1 day, stochastic passes), and ``ours+forgetting``, the settings given by the
flags (by default :data:`RECOMMENDED_FORGETTING`); both replay the sessions in date order.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from memory_bank.config import PAPER_FORGETTING as PAPER_FORGETTING
from memory_bank.config import SELECTIVE_FORGETTING
from memory_bank.errors import InvalidInputError

logger = logging.getLogger(__name__)

#: ``ours+forgetting``: the measured selective setting (config.py); the flags override its
#: tau, policy and threshold.
RECOMMENDED_FORGETTING: dict[str, Any] = SELECTIVE_FORGETTING

SYSTEM_NOTES = {
    "bm25": "BM25 over each turn's own text (the bank's CJK-aware tokenizer), no dense part",
    "dense": "cosine between the question and each turn's own text, no lexical part",
    "ours": "MemoryBank.search with the bank's configuration "
    + "(hybrid dense + BM25 + date/month hints + day evidence + neighbour lifting)",
    "proposed-v2": "a ranking change not adopted (evaluation/variants.py): own-text vectors with composed "
    + "in-context similarity, lexical 0.5, prev/next 0.3/0.3, day evidence 0.5, month hint 0.3",
}


def _systems(names: list[str], encoder: Any, args: argparse.Namespace, language: str) -> list[Any]:
    from memory_bank.evaluation.benchmark import BM25System, DenseSystem, MemoryBankSystem
    from memory_bank.evaluation.variants import PROPOSALS, ProposedSystem

    retrieval = _retrieval_overrides(args.config)
    out: list[Any] = []
    for name in names:
        if name == "bm25":
            out.append(BM25System())
        elif name == "dense":
            out.append(DenseSystem(encoder))
        elif name == "ours":
            out.append(MemoryBankSystem(encoder, name="ours", language=language, retrieval=retrieval))
        elif name in PROPOSALS:
            out.append(ProposedSystem(encoder, name=name))
        else:
            raise InvalidInputError(
                f"unknown system {name!r} in --systems; use bm25, dense, ours, " + ", ".join(PROPOSALS)
            )
    return out


def _retrieval_overrides(config: str | None) -> dict[str, Any]:
    if not config:
        return {}
    from memory_bank.config import load_config

    return load_config(config).retrieval.model_dump()


def _names(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise InvalidInputError("--systems is empty; name at least one of bm25, dense, ours")
    return list(dict.fromkeys(names))


def forgetting_settings(args: argparse.Namespace) -> dict[str, Any]:
    if not args.tau > 0:
        raise InvalidInputError(f"--tau must be > 0 days, got {args.tau}")
    if not 0 <= args.threshold <= 1:
        raise InvalidInputError(f"--threshold must be within 0..1, got {args.threshold}")
    f: dict[str, Any] = {**RECOMMENDED_FORGETTING, "tau": args.tau, "policy": args.policy, "seed": args.seed}
    if args.policy == "threshold":
        f["threshold"] = args.threshold
    return f


def run_locomo(args: argparse.Namespace) -> dict[str, Any]:
    from memory_bank.evaluation.benchmark import MemoryBankSystem
    from memory_bank.evaluation.encoders import eval_encoder
    from memory_bank.evaluation.locomo import CATEGORY_NAMES, haystack, load_locomo
    from memory_bank.evaluation.metrics import parse_ks
    from memory_bank.evaluation.runs import run_benchmark

    ks = parse_ks(args.k)
    convs = load_locomo(args.data)
    if args.conversations:
        wanted = {c.strip() for c in args.conversations.split(",")}
        convs = [c for c in convs if c.sample_id in wanted]
        if not convs:
            raise InvalidInputError(f"no conversation in {args.data} has an id among {sorted(wanted)}")
    haystacks = [haystack(c) for c in convs]
    encoder = eval_encoder(args.encoder, "en", args.cache_dir)
    systems = _systems(_names(args.systems), encoder, args, "en")
    retrieval = _retrieval_overrides(args.config)
    forgetting: dict[str, Any] = {}
    notes = [
        "Each conversation is one user; each utterance one turn (`Speaker: text [image: caption]`, "
        "empty response), dated with its session's date and indexed after the utterance before it. "
        "Questions of categories 1-4, asked on the last session's day. Turn recall@k: share of a "
        "question's evidence ids among the top-k retrieved turns; session recall@k: share of its "
        "evidence sessions among the first k distinct sessions retrieved.",
    ]
    system_notes = {s.name: SYSTEM_NOTES.get(s.name, "") for s in systems}
    if args.forgetting == "paper":
        forgetting = forgetting_settings(args)
        systems += [
            MemoryBankSystem(
                encoder,
                name="ours+forgetting(paper)",
                retrieval=retrieval,
                forgetting={**PAPER_FORGETTING, "seed": args.seed},
                replay=True,
                recall_k=args.recall_k,
            ),
            MemoryBankSystem(
                encoder,
                name="ours+forgetting",
                retrieval=retrieval,
                forgetting=forgetting,
                replay=True,
                recall_k=args.recall_k,
            ),
        ]
        system_notes["ours+forgetting(paper)"] = (
            "sessions replayed in date order with the paper's forgetting (tau 1 day, stochastic, "
            f"seed {args.seed}); each utterance recalls its top {args.recall_k} memories"
        )
        system_notes["ours+forgetting"] = (
            f"replayed with forgetting tau {forgetting['tau']} days, policy {forgetting['policy']}"
            + (f" (threshold {forgetting['threshold']})" if "threshold" in forgetting else "")
            + f"; each utterance recalls its top {args.recall_k} memories"
        )
    config = {
        "data": str(args.data),
        "ks": ks,
        "systems": [s.name for s in systems],
        "encoder": encoder.name,
        "bank_config": args.config,
        "retrieval_overrides": retrieval,
        "forgetting": args.forgetting,
        "forgetting_settings": forgetting,
        "recall_k": args.recall_k,
        "conversations": [c.sample_id for c in convs],
    }
    results = run_benchmark(
        name="LoCoMo retrieval",
        haystacks=haystacks,
        systems=systems,
        ks=ks,
        out=args.out,
        config=config,
        primary="ours" if any(s.name == "ours" for s in systems) else systems[0].name,
        category_names={str(k): v for k, v in CATEGORY_NAMES.items()},
        dataset={"conversations": len(convs), "sessions": sum(len(c.sessions) for c in convs)},
        notes=notes,
        system_notes=system_notes,
        extra=lambda: {"forgetting_stats": _forget_stats(systems)},
    )
    encoder.save()
    _print_summary(results)
    return results


def _forget_stats(systems: list[Any]) -> dict[str, Any]:
    out = {}
    for s in systems:
        stats = getattr(s, "stats", None)
        if stats is not None and getattr(s, "replay", False):
            out[s.name] = {
                "memories": stats.memories,
                "forgotten": stats.forgotten,
                "share_forgotten": round(stats.forgotten / stats.memories, 4) if stats.memories else 0.0,
                "recalls": stats.recalls,
            }
    return out


def _print_summary(results: dict[str, Any]) -> None:
    ks = [str(k) for k in results["ks"]]
    width = max(len(s) for s in results["systems"])
    print(f"{'turn recall':{width}s}  " + "  ".join(f"@{k:>3s}" for k in ks))
    for name, m in results["systems"].items():
        row = m["turn_recall"].get("all", {})
        print(f"{name:{width}s}  " + "  ".join(f"{100 * row.get(k, 0):5.1f}" for k in ks))
    for name, st in results.get("forgetting_stats", {}).items():
        print(
            f"{name}: forgot {st['forgotten']} of {st['memories']} turns ({100 * st['share_forgotten']:.0f}%)"
        )


def run_longmemeval(args: argparse.Namespace) -> dict[str, Any]:
    from memory_bank.evaluation.encoders import eval_encoder
    from memory_bank.evaluation.longmemeval import haystacks, load_longmemeval
    from memory_bank.evaluation.metrics import parse_ks
    from memory_bank.evaluation.runs import run_benchmark

    ks = parse_ks(args.k)
    instances = load_longmemeval(args.data)
    if args.limit:
        instances = instances[: args.limit]
    hays = haystacks(instances, include_abstention=args.include_abstention)
    if not hays:
        raise InvalidInputError(f"{args.data}: no questions to ask (all are abstention questions?)")
    encoder = eval_encoder(args.encoder, "en", args.cache_dir)
    systems = _systems(_names(args.systems), encoder, args, "en")
    config = {
        "data": str(args.data),
        "ks": ks,
        "systems": [s.name for s in systems],
        "encoder": encoder.name,
        "include_abstention": args.include_abstention,
        "limit": args.limit,
    }
    results = run_benchmark(
        name="LongMemEval retrieval",
        haystacks=hays,
        systems=systems,
        ks=ks,
        out=args.out,
        config=config,
        primary="ours" if any(s.name == "ours" for s in systems) else systems[0].name,
        notes=[
            "One history per question; a user message and the reply after it form one turn "
            "(evidence when either has `has_answer`); evidence sessions are `answer_session_ids`."
        ],
        system_notes={s.name: SYSTEM_NOTES.get(s.name, "") for s in systems},
    )
    encoder.save()
    _print_summary(results)
    return results
