"""The paper's answer evaluation (§4.2): SiliconFriend answers the probing questions, a judge scores.

For each labelled question and each system compared, SiliconFriend (any backbone) builds its
prompt exactly as in a chat (:meth:`silicon_friend.engine.SiliconFriend.prepare`: retrieved memories,
portrait, event summary) and answers; nothing is stored or reinforced, so questions cannot leak
into each other. A judge (:mod:`silicon_friend.evaluation.judge`) then scores the paper's four metrics.

Systems (``--systems``):

* ``memorybank``: the full method (retrieved memories incl. daily summaries, global portrait and
  event summary);
* ``no-memory``: the same backbone with no long-term memory at all (a first conversation);
* ``no-summaries``: turns only (no daily or global event summaries);
* ``no-portrait``: everything but the global user portrait;
* ``forgetting``: the full method on a copy of the store after a forgetting pass on every day of
  the history and on the question day (default: the paper's curve, tau = 1 day, stochastic).

Summaries and portraits exist only after a summarisation pass (``summarize=True``) or when the
memory file already holds them; without them ``no-summaries`` and ``no-portrait`` equal
``memorybank``. It drives the chatbot, so it lives in the app; the library's retrieval
evaluation (:mod:`memory_bank.evaluation`) needs no LLM.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import random
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_bank.config import DEFAULT_TOP_K
from memory_bank.config import PAPER_FORGETTING as BANK_PAPER_FORGETTING
from memory_bank.errors import InvalidInputError
from memory_bank.evaluation.paper import Question
from memory_bank.records import MemoryKind
from silicon_friend.evaluation.judge import JUDGE_VERSION, Judge, chat_invoker, prompt_hash, ranks_from_scores

logger = logging.getLogger(__name__)

SYSTEMS = ("memorybank", "no-memory", "no-summaries", "no-portrait", "forgetting")
#: The paper's forgetting as published (R = exp(-t/S), stochastic drops), seeded.
PAPER_FORGETTING: dict[str, Any] = {**BANK_PAPER_FORGETTING, "seed": 0}
METRICS = ("retrieval_accuracy", "evidence_hit", "correctness", "coherence", "ranking")


@dataclasses.dataclass
class AnswerSettings:
    systems: Sequence[str] = ("memorybank", "no-memory")
    k: int = DEFAULT_TOP_K
    language: str = "en"
    summarize: bool = False
    now: str | None = None
    max_new_tokens: int = 200
    temperature: float = 0.0
    forgetting: Mapping[str, Any] = dataclasses.field(default_factory=lambda: dict(PAPER_FORGETTING))
    seed: int = 0

    def check(self) -> None:
        unknown = [s for s in self.systems if s not in SYSTEMS]
        if unknown or not self.systems:
            raise InvalidInputError(f"unknown systems {unknown}; use some of {', '.join(SYSTEMS)}")
        if self.k < 1:
            raise InvalidInputError(f"k must be at least 1, got {self.k}")


class MemoryView:
    """A bank as one ablation sees it (read-only use by the engine's prompt building)."""

    def __init__(
        self, bank: Any, *, memory: bool = True, summaries: bool = True, portrait: bool = True
    ) -> None:
        self._bank = bank
        self.memory, self.summaries, self.portrait = memory, summaries, portrait

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bank, name)

    def has_user(self, user: str) -> bool:
        return self.memory and self._bank.has_user(user)

    def search(self, user: str, query: str, k: int | None = None, **kw: Any) -> list[Any]:
        if not self.memory:
            return []
        if not self.summaries:
            kw["kinds"] = [MemoryKind.TURN]
        return list(self._bank.search(user, query, k, **kw))

    def profile(self, user: str) -> dict[str, str]:
        out = dict(self._bank.profile(user)) if self.memory else {"global_summary": "", "global_portrait": ""}
        if not self.summaries:
            out["global_summary"] = ""
        if not self.portrait:
            out["global_portrait"] = ""
        return out


def _fixed_clock(day: str) -> Callable[[], dt.datetime]:
    when = dt.datetime.fromisoformat(day[:10]).replace(hour=12)
    return lambda: when


def _answer(friend: Any, user: str, question: str, settings: Any) -> dict[str, Any]:
    import threading

    from silicon_friend.models import call_params, stream_text

    started = time.perf_counter()
    record: dict[str, Any] = {"memories": [], "response": "", "error": None}
    try:
        session = friend.start(user)
        fitted = friend.prepare(session, question, settings)
        record["memories"] = [
            {"memory_id": m.memory_id, "kind": m.kind.value, "date": m.date, "turn": m.turn, "text": m.text}
            for m in fitted.memories
        ]
        record["prompt_tokens"] = fitted.prompt_tokens
        record["portrait_in_prompt"] = fitted.portrait
        record["summary_in_prompt"] = fitted.summary
        params = call_params(
            friend.model.chat_model,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tokens=fitted.max_new_tokens,
        )
        pieces = stream_text(
            friend.model.chat_model, fitted.messages, params=params, cancel=threading.Event()
        )
        record["response"] = "".join(pieces).strip()
    except Exception as e:  # a failed reply is scored as it is (empty), not fatal to the run
        logger.warning("reply failed for %r: %s", question[:60], e)
        record["error"] = f"{type(e).__name__}: {e}"
    record["seconds"] = round(time.perf_counter() - started, 3)
    return record


def run_answers(
    data: Mapping[str, Any],
    questions: Sequence[Question],
    *,
    backbone: Any,
    judge_model: Any,
    encoder: Any,
    settings: AnswerSettings,
    summary_model: Any = None,
    progress: Callable[[str, int], Any] | None = None,
) -> dict[str, Any]:
    """Answer and judge ``questions`` (labelled) about the users of memory-file ``data``.

    ``backbone``: a :class:`silicon_friend.models.LoadedModel` or LangChain chat model;
    ``judge_model``: a LangChain chat model; ``progress(stage, total)`` returns a callable that
    advances by one (e.g. a tqdm bar's ``update``), or ``None``.
    """
    from memory_bank.bank import MemoryBank
    from memory_bank.evaluation.paper import default_now
    from memory_bank.original_format import import_data
    from silicon_friend.engine import ChatSettings, SiliconFriend
    from silicon_friend.models import LoadedModel, prepare_model

    settings.check()
    if not all(q.answer for q in questions):
        raise InvalidInputError("every question needs a reference answer: pass --labels")
    model = backbone if isinstance(backbone, LoadedModel) else prepare_model(backbone)
    now = settings.now or default_now(dict(data))
    users = list(dict.fromkeys(q.user for q in questions))
    keys = {k.strip(): k for k in data}
    subset = {keys[u]: data[keys[u]] for u in users}
    chat = ChatSettings(
        temperature=settings.temperature, top_p=1.0, max_new_tokens=settings.max_new_tokens, top_k=settings.k
    )
    info: dict[str, Any] = {"now": now, "summaries": {}}
    records: list[dict[str, Any]] = [
        {
            "user": q.user,
            "qid": q.qid,
            "question": q.question,
            "type": q.type,
            "answer": q.answer,
            "evidence": [{"date": d, "turn": t} for d, t in q.evidence],
            "systems": {},
        }
        for q in questions
    ]
    with tempfile.TemporaryDirectory(prefix="memorybank-answers-") as tmp:
        store = Path(tmp) / "store"
        bank = MemoryBank.open(
            store, language=settings.language, encoder_instance=encoder, clock=_fixed_clock(now)
        )
        import_data(bank, subset)
        if settings.summarize:
            info["summaries"] = _summarize(
                bank, summary_model or model.chat_model, users, now, settings, progress
            )
        banks: dict[str, Any] = {}
        for name in settings.systems:
            if name == "forgetting":
                banks[name] = _forgetting_bank(bank, Path(tmp) / "forgetting", subset, settings, encoder, now)
                info["forgotten"] = {
                    u: sum(1 for m, _ in banks[name].memories(u) if m.archived) for u in users
                }
            else:
                banks[name] = MemoryView(
                    bank,
                    memory=name != "no-memory",
                    summaries=name != "no-summaries",
                    portrait=name != "no-portrait",
                )
        friends = {
            n: SiliconFriend(b, model, language=settings.language, settings=chat) for n, b in banks.items()
        }
        step = progress("answering", len(records) * len(friends)) if progress else None
        for rec in records:
            for name, friend in friends.items():
                rec["systems"][name] = _answer(friend, rec["user"], rec["question"], chat)
                if step:
                    step(1)
        for b in banks.values():
            if isinstance(b, MemoryBank):
                b.close()
        bank.close()
    judge = Judge(chat_invoker(judge_model), settings.language)
    _judge_all(records, judge, settings, progress)
    return {
        "settings": {**dataclasses.asdict(settings), "systems": list(settings.systems)},
        "judge": {"version": JUDGE_VERSION, "prompt_hash": prompt_hash(), "failures": judge.failures},
        "info": info,
        "metrics": aggregate(records, list(settings.systems)),
        "questions": records,
    }


def _summarize(
    bank: Any,
    chat_model: Any,
    users: Sequence[str],
    now: str,
    settings: AnswerSettings,
    progress: Callable[[str, int], Any] | None,
) -> dict[str, Any]:
    from memory_bank.summaries import Summarizer

    summarizer = Summarizer(bank, chat_model, settings.language)
    step = progress("summarising", len(users)) if progress else None
    out = {}
    for u in users:
        report = summarizer.summarize_user(u, now=now)
        out[u] = {
            "days": len(report.days),
            "written": len(report.written),
            "failed": len(report.failed),
            "calls": report.calls,
            "seconds": round(report.seconds, 1),
        }
        if step:
            step(1)
    return out


def _forgetting_bank(
    bank: Any, copy: Path, subset: Mapping[str, Any], settings: AnswerSettings, encoder: Any, now: str
) -> Any:
    """A second store with the same memories and summary layers and forgetting on, after a
    pass on each history day and on ``now`` (a user who talked on each of those days)."""
    from memory_bank.bank import MemoryBank
    from memory_bank.original_format import import_data

    fb = MemoryBank.open(
        copy,
        language=settings.language,
        encoder_instance=encoder,
        clock=_fixed_clock(now),
        forgetting=dict(settings.forgetting),
    )
    import_data(fb, dict(subset))
    layers = [k for k in MemoryKind if k is not MemoryKind.TURN]
    for u in fb.users():
        for m, _ in bank.memories(u, kinds=layers):
            if m.text.strip():
                fb.set_layer(u, m.kind, m.text, date=m.date)
        for day in sorted({m.date for m, _ in fb.memories(u)} | {now}):
            fb.forget(u, now=day)
    return fb


def _judge_all(
    records: list[dict[str, Any]],
    judge: Judge,
    settings: AnswerSettings,
    progress: Callable[[str, int], Any] | None,
) -> None:
    names = list(settings.systems)
    step = progress("judging", len(records)) if progress else None
    for rec in records:
        evidence = {(e["date"], e["turn"]) for e in rec["evidence"]}
        for name in names:
            r = rec["systems"][name]
            got = {(m["date"], m["turn"]) for m in r["memories"] if m["kind"] == "turn"}
            scorable = bool(evidence) and name != "no-memory"
            r["evidence_hit"] = float(bool(evidence & got)) if scorable else None
            if scorable:
                j = judge.retrieval(rec["question"], rec["answer"], [m["text"] for m in r["memories"]])
                r["retrieval_accuracy"], r["judge_retrieval"] = j.score, j.raw
            else:
                r["retrieval_accuracy"] = None
            j = judge.correctness(rec["question"], rec["answer"], r["response"])
            r["correctness"], r["judge_correctness"] = j.score, j.raw
            j = judge.coherence(rec["question"], r["response"])
            r["coherence"], r["judge_coherence"] = j.score, j.raw
        if len(names) > 1:
            order = names[:]
            random.Random(f"{settings.seed}:{rec['user']}:{rec['qid']}").shuffle(order)  # no position bias
            ranked, raw = judge.ranking(
                rec["question"], rec["answer"], [rec["systems"][n]["response"] for n in order]
            )
            rec["ranking_order"], rec["judge_ranking"] = order, raw
            if ranked is not None:
                ranks = {order[i]: pos + 1 for pos, i in enumerate(ranked)}
                rec["rank_source"] = "judge"
            else:  # fall back on the scores: correctness first, then coherence
                scores = [
                    (rec["systems"][n]["correctness"] or 0.0, rec["systems"][n]["coherence"] or 0.0)
                    for n in names
                ]
                ranks = dict(zip(names, ranks_from_scores(scores), strict=True))
                rec["rank_source"] = "scores"
            for n in names:
                rec["systems"][n]["rank"] = ranks[n]
                rec["systems"][n]["ranking"] = round(1.0 / ranks[n], 4)
        if step:
            step(1)


def aggregate(records: Sequence[Mapping[str, Any]], systems: Sequence[str]) -> dict[str, Any]:
    """Mean of each metric per system, overall and per question type (``None`` values skipped)."""
    out: dict[str, Any] = {}
    for name in systems:
        groups: dict[str, dict[str, list[float]]] = {}
        for rec in records:
            r = rec["systems"][name]
            for group in ("all", rec.get("type") or "untyped"):
                for metric in METRICS:
                    value = r.get(metric)
                    if value is not None:
                        groups.setdefault(group, {}).setdefault(metric, []).append(float(value))
        out[name] = {
            g: {m: {"mean": round(sum(v) / len(v), 4), "n": len(v)} for m, v in per.items()}
            for g, per in groups.items()
        }
    return out
