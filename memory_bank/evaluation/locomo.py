"""LoCoMo (Maharana et al., ACL 2024) as an LLM-free retrieval benchmark.

A LoCoMo file is a JSON list of conversations. Each has two speakers, numbered sessions with a
date-time (``"1:56 pm on 8 May, 2023"``), utterances ``{"speaker", "dia_id", "text"}`` (some with
an image's ``blip_caption``), and questions ``{"question", "answer", "evidence", "category"}``
whose evidence lists the ids of the utterances that hold the answer (``"D3:7"`` = session 3,
utterance 7). Categories 1-4 are multi-hop, temporal, open-domain and single-hop; 5 is
adversarial (no answer) and is left out.

Evidence ids are normalised (:func:`normalise_evidence`): strings holding several ids are split
on ``;``, ``,`` and spaces, zero padding is stripped (``D30:05`` -> ``D30:5``), and a stray colon
after the ``D`` is dropped (``D:11:26`` -> ``D11:26``); ids that still match no utterance stay in
the question's evidence and count as missed.

How a conversation becomes MemoryBank memories (:func:`conversation_memories`): one user per
conversation; one turn per utterance, dated with its session's date, whose text is the speaker's
name and words (plus ``[image: caption]`` when a photo was shared), with an empty response, and
whose context (what the bank indexes it with, like the reply a user's message answers) is the
utterance just before it in the same session.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_bank.errors import InvalidInputError
from memory_bank.records import Memory, MemoryKind
from memory_bank.text import MONTHS

if TYPE_CHECKING:
    from memory_bank.evaluation.benchmark import Haystack

#: The categories asked (5, adversarial, has no evidence to retrieve).
CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


@dataclasses.dataclass(frozen=True)
class Utterance:
    dia_id: str
    speaker: str
    text: str
    session: int
    time: dt.datetime
    caption: str | None = None

    def memory_text(self) -> str:
        """What the utterance is stored as: ``"Speaker: words [image: caption]"``."""
        text = f"{self.speaker}: {self.text.strip()}"
        return f"{text} [image: {self.caption.strip()}]" if self.caption else text


@dataclasses.dataclass
class Session:
    number: int
    time: dt.datetime
    utterances: list[Utterance]

    @property
    def date(self) -> str:
        return self.time.date().isoformat()


@dataclasses.dataclass
class QA:
    index: int
    question: str
    answer: Any
    category: int
    evidence: list[str]
    raw_evidence: list[str]


@dataclasses.dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: list[Session]
    questions: list[QA]

    def utterances(self) -> list[Utterance]:
        return [u for s in self.sessions for u in s.utterances]

    @property
    def last_date(self) -> str:
        return max(s.date for s in self.sessions)


_TIME_RE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I)
_MONTHS = MONTHS  # shared with the date parsing of queries


def parse_session_time(text: str) -> dt.datetime:
    """``"1:56 pm on 8 May, 2023"`` -> ``datetime(2023, 5, 8, 13, 56)``; ISO strings work too."""
    m = _TIME_RE.match(text or "")
    if m is None:
        try:
            return dt.datetime.fromisoformat(str(text).strip())
        except ValueError as e:
            raise InvalidInputError(
                f"session date {text!r} is neither like '1:56 pm on 8 May, 2023' nor ISO 8601"
            ) from e
    hour, minute, ampm, day, month, year = m.groups()
    month_no = _MONTHS.get(month.lower())
    if month_no is None:
        raise InvalidInputError(f"session date {text!r}: unknown month {month!r}")
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    return dt.datetime(int(year), month_no, int(day), h, int(minute))


_ID_RE = re.compile(r"^D:?0*(\d+):0*(\d+)$")


def normalise_evidence(raw: str | Sequence[str] | None) -> list[str]:
    """Evidence ids as they appear in the turns' ``dia_id``s (see the module docstring)."""
    items = [raw] if isinstance(raw, str) else list(raw or [])
    out: list[str] = []
    for item in items:
        for piece in re.split(r"[;,\s]+", str(item)):
            if not piece:
                continue
            m = _ID_RE.match(piece)
            out.append(f"D{int(m.group(1))}:{int(m.group(2))}" if m else piece)
    return list(dict.fromkeys(out))


def _canonical_id(dia_id: str) -> str:
    ids = normalise_evidence(dia_id)
    return ids[0] if ids else dia_id


def _session_numbers(conv: dict[str, Any]) -> list[int]:
    return sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))


def parse_conversation(item: dict[str, Any], where: str = "conversation") -> Conversation:
    """One LoCoMo conversation object."""
    try:
        conv = item["conversation"]
        sample_id = str(item.get("sample_id") or where)
        speakers = (str(conv.get("speaker_a", "A")), str(conv.get("speaker_b", "B")))
        sessions = []
        for n in _session_numbers(conv):
            turns = conv[f"session_{n}"] or []
            if not turns:
                continue
            when = parse_session_time(conv[f"session_{n}_date_time"])
            utts = [
                Utterance(
                    dia_id=_canonical_id(str(t["dia_id"])),
                    speaker=str(t.get("speaker", "")),
                    text=str(t.get("text", "")),
                    session=n,
                    time=when,
                    caption=t.get("blip_caption") or None,
                )
                for t in turns
            ]
            sessions.append(Session(n, when, utts))
        sessions.sort(key=lambda s: (s.time, s.number))
        questions = [
            QA(
                index=i,
                question=str(q["question"]),
                answer=q.get("answer", q.get("adversarial_answer")),
                category=int(q["category"]),
                evidence=normalise_evidence(q.get("evidence")),
                raw_evidence=[str(e) for e in (q.get("evidence") or [])],
            )
            for i, q in enumerate(item.get("qa", []))
        ]
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, InvalidInputError):
            raise
        raise InvalidInputError(f"{where}: not a LoCoMo conversation ({type(e).__name__}: {e})") from e
    return Conversation(sample_id, speakers, sessions, questions)


def load_locomo(path: str | Path) -> list[Conversation]:
    """Read a LoCoMo JSON file (a list of conversations, or one conversation object)."""
    p = Path(path)
    if not p.is_file():
        raise InvalidInputError(f"LoCoMo file {str(p)!r} does not exist")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InvalidInputError(f"LoCoMo file {str(p)!r} is not valid JSON: {e}") from e
    items = data if isinstance(data, list) else [data]
    return [parse_conversation(it, f"{p.name}[{i}]") for i, it in enumerate(items)]


def conversation_memories(conv: Conversation, user: str, *, context: bool = True) -> list[Memory]:
    """The conversation as MemoryBank turns (see the module docstring), in time order.

    ``memory_id`` is ``{user}_{date}_{i}`` (``i`` counts the day's turns, as in the original
    format); ``extra["id"]`` keeps the utterance id and ``extra["session"]`` its session number.
    """
    out: list[Memory] = []
    per_day: dict[str, int] = {}
    for s in conv.sessions:
        previous: str | None = None
        for u in s.utterances:
            i = per_day.get(s.date, 0)
            per_day[s.date] = i + 1
            text = u.memory_text()
            out.append(
                Memory(
                    memory_id=f"{user}_{s.date}_{i}",
                    user=user,
                    kind=MemoryKind.TURN,
                    date=s.date,
                    turn=i,
                    text=text,
                    query=text,
                    response="",
                    timestamp=s.time.isoformat(timespec="seconds"),
                    context=previous if context else None,
                    extra={"id": u.dia_id, "session": str(u.session)},
                )
            )
            previous = text
    return out


def _session_of_id(dia_id: str) -> str | None:
    m = re.match(r"^D(\d+):\d+$", dia_id)
    return m.group(1) if m else None


def haystack(conv: Conversation, *, categories: Sequence[int] = CATEGORIES, context: bool = True) -> Haystack:
    """The conversation as a benchmark :class:`~memory_bank.evaluation.benchmark.Haystack`.

    The user is the conversation's ``sample_id``; the questions (of ``categories``) are asked on
    the day of the last session.
    """
    from memory_bank.evaluation.benchmark import Haystack, Probe

    memories = conversation_memories(conv, conv.sample_id, context=context)
    known = {m.extra["id"] for m in memories}
    probes = []
    for q in conv.questions:
        if q.category not in categories:
            continue
        sessions = [s for s in (_session_of_id(e) for e in q.evidence if e in known) if s is not None]
        probes.append(
            Probe(
                qid=f"{conv.sample_id}#{q.index}",
                question=q.question,
                category=str(q.category),
                evidence=list(q.evidence),
                sessions=list(dict.fromkeys(sessions)),
                answer=q.answer,
            )
        )
    return Haystack(conv.sample_id, memories, probes, conv.last_date)
