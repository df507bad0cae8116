"""The paper's probing-question evaluation (§4.2): retrieval over a memory file.

Questions files hold one JSON object per line, ``{user: [question, ...]}``; user keys are
matched after stripping spaces (the paper's data has keys like ``' Jason '``). Label files (ours,
in ``eval_data/``) hold one object per question::

    {"user", "qid", "question", "evidence": [{"date": "YYYY-MM-DD", "turn": i}], "answer", "type"}

A question is a *hit at k* when any evidence turn is among the top-k retrieved memories, and its
*full recall at k* is the share of its evidence turns found there. Questions whose evidence is
empty (the event never happened) are reported but not scored for retrieval.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_bank.errors import InvalidInputError

if TYPE_CHECKING:
    from memory_bank.bank import MemoryBank


@dataclasses.dataclass
class Question:
    user: str
    qid: int
    question: str
    evidence: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    answer: str | None = None
    type: str | None = None


def _jsonl(path: str | Path) -> list[Any]:
    p = Path(path)
    if not p.is_file():
        raise InvalidInputError(f"file {str(p)!r} does not exist")
    out = []
    for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise InvalidInputError(f"{p}:{i}: not valid JSON ({e.msg})") from e
    return out


def load_questions(path: str | Path) -> list[Question]:
    """Probing questions in the paper's format, in file order."""
    questions = []
    for item in _jsonl(path):
        if not isinstance(item, dict):
            raise InvalidInputError(f"{path}: each line must be an object {{user: [questions]}}")
        for user, qs in item.items():
            if not isinstance(qs, list) or not all(isinstance(q, str) for q in qs):
                raise InvalidInputError(f"{path}: user {user!r} must map to a list of question strings")
            questions += [Question(user.strip(), i, q) for i, q in enumerate(qs)]
    return questions


def load_labels(path: str | Path) -> dict[tuple[str, int], Question]:
    """Our labels, keyed by (stripped user, qid)."""
    out = {}
    for item in _jsonl(path):
        try:
            q = Question(
                item["user"].strip(),
                int(item["qid"]),
                item["question"],
                [(e["date"], int(e["turn"])) for e in item.get("evidence", [])],
                item.get("answer"),
                item.get("type"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInputError(f"{path}: malformed label {item!r}: {e}") from e
        out[(q.user, q.qid)] = q
    return out


def attach_labels(questions: list[Question], labels: dict[tuple[str, int], Question]) -> list[Question]:
    for q in questions:
        lab = labels.get((q.user, q.qid))
        if lab is not None:
            if lab.question != q.question:
                raise InvalidInputError(
                    f"label for {q.user!r} #{q.qid} is for another question ({lab.question!r} != {q.question!r})"
                )
            q.evidence, q.answer, q.type = lab.evidence, lab.answer, lab.type
    return questions


def retrieve(
    bank: MemoryBank, questions: list[Question], k: int, *, now: str | None = None
) -> list[dict[str, Any]]:
    """One output record per question: the ranked memories retrieved for it."""
    rows = []
    for q in questions:
        hits = bank.search(q.user, q.question, k, now=now)
        rows.append(
            {
                "user": q.user,
                "qid": q.qid,
                "question": q.question,
                "retrieved": [
                    {
                        "kind": h.memory.kind.value,
                        "date": h.memory.date,
                        "turn": h.memory.turn,
                        "score": round(h.score, 6),
                        "text": h.memory.text,
                        "memory_id": h.memory.memory_id,
                    }
                    for h in hits
                ],
            }
        )
    return rows


def score(questions: list[Question], rows: list[dict[str, Any]], ks: list[int]) -> dict[str, Any]:
    """hit@k and full-evidence recall@k over labelled questions (overall and per label type)."""
    by_key = {(r["user"], r["qid"]): r for r in rows}
    per: dict[str, dict[str, list[float]]] = {}
    for q in questions:
        if not q.evidence:
            continue
        got = [(m["date"], m["turn"]) for m in by_key[(q.user, q.qid)]["retrieved"] if m["kind"] == "turn"]
        gold = set(q.evidence)
        for group in ("all", q.type or "untyped"):
            bucket = per.setdefault(group, {})
            for k in ks:
                top = set(got[:k])
                bucket.setdefault(f"hit@{k}", []).append(float(bool(gold & top)))
                bucket.setdefault(f"recall@{k}", []).append(len(gold & top) / len(gold))
    return {
        group: {
            "n": len(next(iter(m.values()))),
            **{name: round(sum(v) / len(v), 4) for name, v in m.items()},
        }
        for group, m in per.items()
    }
