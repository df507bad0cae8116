"""Every development set at once, in one process, for ranking work (no store, no LLM).

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/eval_dev.py --cache-dir runs/cache [--set lexical_weight=0.5 ...]

Ranks with :func:`memory_bank.retrieval.rank` on partitions built exactly as the bank builds
them (the vectors of ``index_text``), so the figures equal ``memorybank eval ...`` with the same
retrieval settings, and prints one line per set: the paper's probing questions (EN/ZH, our
labels) asked once and asked a second time (after one round of useless answers; each user asks
their questions in order in one chat session, so ``--set chat_context_turns=N`` measures the
chat's dialogue query), ``eval_data/``
(EN/ZH, both ways), LoCoMo dev turn recall@10 (and its weakest category against BM25) and
MADial-Bench recall@10 (EN/ZH). ``--set`` overrides :class:`memory_bank.config.RetrievalConfig`
keys; ``--json FILE`` writes the figures. A weight is meant to be chosen on all lines together.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memory_bank.config import DEFAULT_ENCODERS, RetrievalConfig  # noqa: E402
from memory_bank.embeddings import get_encoder  # noqa: E402
from memory_bank.evaluation.encoders import CachingEncoder  # noqa: E402
from memory_bank.evaluation.metrics import hit_at_k, mean, recall_at_k  # noqa: E402

_ENCODERS: dict[str, CachingEncoder] = {}
#: ``--own-text-weight``: the share of the dense weight given to own-text vectors (variants.OwnTextDense).
OWN_TEXT_WEIGHT = 0.0
#: ``--feedback top,beta,terms``: pseudo-relevance feedback (variants.Feedback), measured, not in the bank.
FEEDBACK: Any = None
#: ``--turn-max SHARE,TEMPERATURE``: multi-vector dialogue query scoring (variants.TurnMaxDense).
TURN_MAX = (0.0, 0.0)
#: ``--own-text-encoder-en/-zh NAME``: the encoder of the own-text vectors (default: the set's own).
OWN_TEXT_ENCODER: dict[str, str | None] = {"en": None, "zh": None}


def own_encoder(lang: str, cache: str | None) -> CachingEncoder | None:
    name = OWN_TEXT_ENCODER[lang]
    return encoder(lang, cache, name) if name else None


class SavingEncoder(CachingEncoder):
    """A cache that writes itself every 50 new vectors, so a slow encoder's work survives an
    interrupted run (multilingual-e5-small embeds a few texts a second here)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        before = self.computed
        out = super().encode(texts)
        if self.computed // 50 > before // 50:
            self.save()
        return out


def encoder(language: str, cache: str | None, name: str | None = None) -> CachingEncoder:
    key = name or DEFAULT_ENCODERS[language]
    if key not in _ENCODERS:
        _ENCODERS[key] = SavingEncoder(get_encoder(key), cache)
    return _ENCODERS[key]


def labelled_sets(shared: Path) -> list[tuple[str, str, Path, Path, Path]]:
    paper = shared / "memorybank_eval"
    return [
        ("paper-en", "en", paper / "en" / "memory_bank_en.json", paper / "en" / "probing_questions_en.jsonl",
         REPO / "eval_data" / "paper_labels" / "probing_labels_en.jsonl"),
        ("paper-zh", "zh", paper / "cn" / "memory_bank_cn.json", paper / "cn" / "probing_questions_cn.jsonl",
         REPO / "eval_data" / "paper_labels" / "probing_labels_zh.jsonl"),
        ("own-en", "en", REPO / "eval_data" / "en" / "memories_en.json",
         REPO / "eval_data" / "en" / "questions_en.jsonl", REPO / "eval_data" / "en" / "labels_en.jsonl"),
        ("own-zh", "zh", REPO / "eval_data" / "zh" / "memories_zh.json",
         REPO / "eval_data" / "zh" / "questions_zh.jsonl", REPO / "eval_data" / "zh" / "labels_zh.jsonl"),
    ]  # fmt: skip


def session_queries(questions: list[str], lang: str, turns: int) -> list[str]:
    """The search queries of ``questions`` asked in order in one chat session, as SiliconFriend
    makes them (``chat_query``): each earlier question of the session got a useless answer."""
    from memory_bank.evaluation.second_ask import USELESS_ANSWERS
    from memory_bank.retrieval.dialogue import chat_query

    answers = USELESS_ANSWERS["zh" if lang == "zh" else "en"]
    history = [(q, answers[i % len(answers)]) for i, q in enumerate(questions)]
    return [chat_query(q, history[:i], turns) for i, q in enumerate(questions)]


def labelled(name: str, lang: str, memory: Path, qfile: Path, lfile: Path, cfg: RetrievalConfig,
             cache: str | None, enc_name: str | None) -> dict[str, dict[str, float]]:  # fmt: skip
    from memory_bank.evaluation import paper
    from memory_bank.evaluation.second_ask import asked_before, next_day
    from memory_bank.evaluation.variants import rank_memories
    from memory_bank.original_format import load_memory_file, user_memories
    from memory_bank.records import RETRIEVABLE_KINDS

    data = load_memory_file(memory)
    questions = paper.attach_labels(paper.load_questions(qfile), paper.load_labels(lfile))
    first = paper.default_now(data)
    out = {}
    for scenario, d, now in (("", data, first), ("/2nd", asked_before(data, questions, lang, first), next_day(first))):
        keys = {k.strip(): k for k in d}
        hits: dict[int, list[float]] = {1: [], 2: [], 3: [], 5: []}
        for user in sorted({q.user for q in questions}):
            mems, _ = user_memories(user, d[keys[user]])
            mems = [m for m in mems if m.kind in RETRIEVABLE_KINDS and m.text.strip()]
            qs = [q for q in questions if q.user == user and q.evidence]
            ranked = rank_memories(mems, session_queries([q.question for q in qs], lang, cfg.chat_context_turns),
                                   encoder(lang, cache, enc_name), 5, cfg=cfg, now=dt.date.fromisoformat(now),
                                   own_text_weight=OWN_TEXT_WEIGHT, feedback=FEEDBACK, turn_max=TURN_MAX,
                                   own_text_encoder=own_encoder(lang, cache))  # fmt: skip
            for q, idx in zip(qs, ranked, strict=True):
                got = [(mems[i].date, mems[i].turn) for i in idx]
                for k in hits:
                    hits[k].append(hit_at_k(q.evidence, got, k))
        out[name + scenario] = {f"hit@{k}": round(100 * mean(v), 1) for k, v in hits.items()}
    return out


def ranked_haystacks(hays: list[Any], lang: str, cfg: RetrievalConfig, cache: str | None, k: int,
                     enc_name: str | None) -> dict[str, dict[str, list[str]]]:  # fmt: skip
    from memory_bank.evaluation.variants import rank_memories

    out = {}
    for h in hays:
        ids = [m.extra["id"] for m in h.memories]
        ranked = rank_memories(h.memories, [p.question for p in h.probes], encoder(lang, cache, enc_name), k,
                               cfg=cfg, now=dt.date.fromisoformat(h.now), own_text_weight=OWN_TEXT_WEIGHT, feedback=FEEDBACK, turn_max=TURN_MAX,
                               own_text_encoder=own_encoder(lang, cache))  # fmt: skip
        out[h.user] = {p.qid: [ids[i] for i in r] for p, r in zip(h.probes, ranked, strict=True)}
    return out


def locomo(path: Path, cfg: RetrievalConfig, cache: str | None, enc_name: str | None) -> dict[str, Any]:
    from memory_bank.evaluation.benchmark import BM25System, score_system
    from memory_bank.evaluation.locomo import haystack, load_locomo

    hays = [haystack(c) for c in load_locomo(path)]
    ours = score_system(hays, ranked_haystacks(hays, "en", cfg, cache, 10, enc_name), [10])["turn_recall"]
    bm25 = score_system(hays, {h.user: BM25System().retrieve(h, 10) for h in hays}, [10])["turn_recall"]
    worst = min((ours[c]["10"] - bm25[c]["10"], c) for c in ours if c != "all")
    cats = {f"cat{c}": round(100 * ours[c]["10"], 1) for c in sorted(c for c in ours if c != "all")}
    return {"locomo": {"r@10": round(100 * ours["all"]["10"], 1), **cats,
                       "worst-cat-vs-bm25": f"{worst[1]}:{100 * worst[0]:+.1f}"}}  # fmt: skip


def madial(folder: Path, lang: str, cfg: RetrievalConfig, cache: str | None, enc_name: str | None) -> dict[str, Any]:
    from memory_bank.evaluation.madial import haystacks, load_madial, ndcg

    hays = haystacks(*load_madial(folder, lang))
    ranked = ranked_haystacks(hays, lang, cfg, cache, 10, enc_name)
    r10 = [recall_at_k(p.evidence, ranked[h.user][p.qid], 10) for h in hays for p in h.probes]
    return {f"madial-{lang}": {"r@10": round(100 * mean(r10), 1), "ndcg@10": round(100 * ndcg(hays, ranked, [10])["10"], 1)}}


def parse_value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=os.environ.get("MEMORYBANK_SHARED_DATA", str(REPO.parent / "shared" / "data")),
                    help="the shared data folder (default: ../shared/data)")
    ap.add_argument("--cache-dir")
    ap.add_argument("--set", action="append", default=[], help="RetrievalConfig key=value")
    ap.add_argument("--only", default="", help="comma-separated: paper, own, locomo, madial")
    ap.add_argument("--encoder-en")
    ap.add_argument("--encoder-zh")
    ap.add_argument("--json")
    ap.add_argument("--feedback", help="pseudo-relevance feedback TOP,BETA,TERMS, e.g. 3,0.3,5 (measured, not in the bank)")
    ap.add_argument("--turn-max", help="SHARE,TEMPERATURE of the dense weight on the best query turn (0: max)")
    ap.add_argument("--own-text-weight", type=float, default=0.0,
                    help="share of the dense weight on each turn's own-text vector (measured, not in the bank)")
    for lang in ("en", "zh"):
        ap.add_argument(f"--own-text-encoder-{lang}", help="encoder of the own-text vectors (with --own-text-weight)")
    args = ap.parse_args()
    global OWN_TEXT_WEIGHT, FEEDBACK, TURN_MAX
    OWN_TEXT_ENCODER.update(en=args.own_text_encoder_en, zh=args.own_text_encoder_zh)
    if args.turn_max:
        share, temperature = args.turn_max.split(",")
        TURN_MAX = (float(share), float(temperature))
    OWN_TEXT_WEIGHT = args.own_text_weight
    if args.feedback:
        from memory_bank.evaluation.variants import Feedback

        top, beta, terms = args.feedback.split(",")
        FEEDBACK = Feedback(int(top), float(beta), int(terms))
    cfg = RetrievalConfig(**{k: parse_value(v) for k, v in (s.split("=", 1) for s in args.set)})
    shared = Path(args.shared)
    only = {s for s in args.only.split(",") if s}
    enc = {"en": args.encoder_en, "zh": args.encoder_zh}
    res: dict[str, Any] = {}

    def show(part: dict[str, Any]) -> None:
        res.update(part)
        for e in _ENCODERS.values():
            e.save()
        for name, m in part.items():
            print(f"{name:16s} " + "  ".join(f"{k} {v}" for k, v in m.items()), flush=True)

    for name, lang, memory, q, lab in labelled_sets(shared):
        if memory.is_file() and (not only or name.split("-")[0] in only):
            show(labelled(name, lang, memory, q, lab, cfg, args.cache_dir, enc[lang]))
    if (shared / "madial").is_dir() and (not only or "madial" in only):
        for lang in ("en", "zh"):
            show(madial(shared / "madial", lang, cfg, args.cache_dir, enc[lang]))
    loc = shared / "locomo" / "locomo_dev.json"
    if loc.is_file() and (not only or "locomo" in only):
        show(locomo(loc, cfg, args.cache_dir, enc["en"]))
    if args.json:
        Path(args.json).write_text(json.dumps({"config": cfg.model_dump(), "results": res}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
