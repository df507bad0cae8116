"""A loader for LongMemEval (Wu et al., ICLR 2025) files, as benchmark haystacks.

A LongMemEval file is a JSON list of instances, each with its own history::

    {"question_id", "question_type", "question", "answer", "question_date": "2023/05/30 (Tue) 23:40",
     "haystack_session_ids": [...], "haystack_dates": [...],
     "haystack_sessions": [[{"role": "user"|"assistant", "content": str, "has_answer": true?}, ...], ...],
     "answer_session_ids": [...]}

Question ids ending in ``_abs`` are abstention questions (the answer is not in the history).
Each instance becomes one :class:`~memory_bank.evaluation.benchmark.Haystack` whose user is the
question id. A user message and the assistant reply after it form one MemoryBank turn (its
``query`` and ``response``), dated with the session's date; the turn's id is
``{session_id}:{i}`` and it is evidence when either message has ``has_answer``. Evidence
sessions are ``answer_session_ids``. The data is on Hugging Face
(``xiaowu0162/longmemeval-cleaned``); this package ships none of it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_bank.errors import InvalidInputError
from memory_bank.evaluation.benchmark import Haystack, Probe
from memory_bank.records import Memory, MemoryKind, turn_text

_DATE_RE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\([^)]*\))?(?:\s+(\d{1,2}):(\d{2}))?\s*$")


def parse_lme_date(text: str) -> dt.datetime:
    """``"2023/05/20 (Sat) 02:21"`` -> ``datetime(2023, 5, 20, 2, 21)``; ISO 8601 works too."""
    m = _DATE_RE.match(str(text))
    if m:
        y, mo, d, h, mi = m.groups()
        return dt.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0))
    try:
        return dt.datetime.fromisoformat(str(text).strip())
    except ValueError as e:
        raise InvalidInputError(f"LongMemEval date {text!r} is not like '2023/05/20 (Sat) 02:21'") from e


@dataclasses.dataclass
class Instance:
    question_id: str
    question_type: str
    question: str
    answer: Any
    question_date: dt.datetime
    sessions: list[tuple[str, dt.datetime, list[dict[str, Any]]]]
    answer_session_ids: list[str]

    @property
    def abstention(self) -> bool:
        return self.question_id.endswith("_abs")


def parse_instance(item: dict[str, Any], where: str = "instance") -> Instance:
    try:
        ids = [str(s) for s in item["haystack_session_ids"]]
        dates = [parse_lme_date(d) for d in item["haystack_dates"]]
        sessions = item["haystack_sessions"]
        if not len(ids) == len(dates) == len(sessions):
            raise InvalidInputError(
                f"{where}: haystack_session_ids, haystack_dates and haystack_sessions differ in length "
                f"({len(ids)}, {len(dates)}, {len(sessions)})"
            )
        for s in sessions:
            for msg in s:
                if msg.get("role") not in ("user", "assistant") or not isinstance(msg.get("content"), str):
                    raise InvalidInputError(
                        f"{where}: a message must be {{'role': user|assistant, 'content': str}}"
                    )
        return Instance(
            question_id=str(item["question_id"]),
            question_type=str(item.get("question_type", "unknown")),
            question=str(item["question"]),
            answer=item.get("answer"),
            question_date=parse_lme_date(item.get("question_date") or max(item["haystack_dates"])),
            sessions=list(zip(ids, dates, sessions, strict=True)),
            answer_session_ids=[str(s) for s in item.get("answer_session_ids", [])],
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise InvalidInputError(f"{where}: not a LongMemEval instance ({type(e).__name__}: {e})") from e


def load_longmemeval(path: str | Path) -> list[Instance]:
    p = Path(path)
    if not p.is_file():
        raise InvalidInputError(f"LongMemEval file {str(p)!r} does not exist")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InvalidInputError(f"LongMemEval file {str(p)!r} is not valid JSON: {e}") from e
    if not isinstance(data, list):
        raise InvalidInputError(f"LongMemEval file {str(p)!r} must hold a list of instances")
    return [parse_instance(it, f"{p.name}[{i}]") for i, it in enumerate(data)]


def _pairs(messages: Sequence[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    """(user text, assistant reply, has_answer) per user message; stray replies stand alone."""
    out: list[list[Any]] = []
    for msg in messages:
        flag = bool(msg.get("has_answer"))
        if msg["role"] == "user" or not out or out[-1][1]:
            if msg["role"] == "user":
                out.append([msg["content"], "", flag])
            else:  # a reply with no user message before it
                out.append(["", msg["content"], flag])
        else:
            out[-1][1] = msg["content"]
            out[-1][2] = out[-1][2] or flag
    return [(q, r, f) for q, r, f in out]


def instance_haystack(inst: Instance) -> Haystack:
    """One instance as a haystack (see the module docstring)."""
    user = inst.question_id
    memories: list[Memory] = []
    evidence: list[str] = []
    per_day: dict[str, int] = {}
    for sid, when, messages in sorted(inst.sessions, key=lambda s: s[1]):
        day = when.date().isoformat()
        previous: str | None = None
        for j, (query, response, has_answer) in enumerate(_pairs(messages)):
            i = per_day.get(day, 0)
            per_day[day] = i + 1
            tid = f"{sid}:{j}"
            text = turn_text(query, response) if query else response
            memories.append(
                Memory(
                    memory_id=f"{user}_{day}_{i}",
                    user=user,
                    kind=MemoryKind.TURN,
                    date=day,
                    turn=i,
                    text=text,
                    query=query,
                    response=response,
                    timestamp=when.isoformat(timespec="seconds"),
                    context=previous,
                    extra={"id": tid, "session": sid},
                )
            )
            previous = response or None
            if has_answer:
                evidence.append(tid)
    probe = Probe(
        qid=inst.question_id,
        question=inst.question,
        category=inst.question_type + ("_abs" if inst.abstention else ""),
        evidence=evidence,
        sessions=list(inst.answer_session_ids),
        answer=inst.answer,
    )
    return Haystack(user, memories, [probe], inst.question_date.date().isoformat())


def haystacks(instances: Sequence[Instance], *, include_abstention: bool = False) -> list[Haystack]:
    return [instance_haystack(i) for i in instances if include_abstention or not i.abstention]
