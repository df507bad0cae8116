"""MADial-Bench (He et al., 2024) as an LLM-free memory-recall benchmark, with its own protocol.

A MADial folder holds, per language, ``MADial-Bench-{zh,en}-memory.json`` (one memory event per
line: ``{"<id>": {"time", "event", "scene", "emotion", ...}}``, in Chinese also a ``user-id``) and
``MADial-Bench-{zh,en}-dialogue.json`` (one dialogue per line: ``dialogue``, the raw lines with
speaker tags; ``test-turn``, the lines where the companion should recall something;
``relevant-id``, the memories it should recall; ``user-id``).

The benchmark's protocol, followed exactly (:func:`load_madial`):

* the query is ``"".join(dialogue[:test_turn[0]])``, the raw lines before the first test turn,
  speaker tags and ``<BOD>`` included;
* the candidates are the asking user's memories only (Chinese: by the memory's ``user-id``;
  English memories carry none: the first 76 lines belong to user 1, Bart, the rest to user 2,
  Lisa, as in the Chinese file);
* recall@k = |top-k ∩ relevant| / |relevant|, averaged over the dialogues; nDCG@k with binary
  relevance is reported next to it.

How the memories become MemoryBank memories (:func:`haystacks`): one user per MADial user; each
event is one memory of kind ``turn`` dated with its ``time``, whose text is the event and whose
response is empty; events are independent (no turn number, so no neighbour between them). The
questions are asked on :data:`ASKED_ON`, after every memory.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_bank.errors import InvalidInputError
from memory_bank.records import Memory, MemoryKind

if TYPE_CHECKING:
    from memory_bank.evaluation.benchmark import Haystack

#: English memory lines before this index belong to user 1 (Bart), the others to user 2 (Lisa).
EN_USER1_MEMORIES = 76
#: The day the dialogues take place: after every memory, so relative dates ("yesterday") name none.
ASKED_ON = "2025-01-01"
USER_NAMES = {1: "Bart", 2: "Lisa"}


@dataclasses.dataclass(frozen=True)
class Event:
    mid: str
    user: int
    time: str
    text: str


@dataclasses.dataclass(frozen=True)
class Dialogue:
    did: str
    user: int
    query: str
    relevant: list[str]
    latest: str


def _lines(path: Path) -> list[Any]:
    if not path.is_file():
        raise InvalidInputError(
            f"MADial file {str(path)!r} does not exist; pass the folder holding it with --data"
        )
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise InvalidInputError(f"{path}:{i}: not valid JSON ({e.msg})") from e
    return out


def load_madial(folder: str | Path, language: str) -> tuple[list[Event], list[Dialogue]]:
    """The memories and dialogues of one language, under the benchmark's protocol."""
    if language not in ("zh", "en"):
        raise InvalidInputError(f"--language must be zh or en, got {language!r}")
    root = Path(folder)
    events: list[Event] = []
    for i, item in enumerate(_lines(root / f"MADial-Bench-{language}-memory.json")):
        try:
            ((mid, rec),) = item.items()
            user = int(rec["user-id"]) if "user-id" in rec else (1 if i < EN_USER1_MEMORIES else 2)
            events.append(Event(str(mid), user, str(rec["time"])[:10], str(rec["event"])))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise InvalidInputError(f"MADial memory line {i + 1} is malformed ({e}): {item!r:.200}") from e
    dialogues: list[Dialogue] = []
    for i, item in enumerate(_lines(root / f"MADial-Bench-{language}-dialogue.json")):
        try:
            lines = [str(x) for x in item["dialogue"]]
            cut = int(item["test-turn"][0])
            before = lines[:cut]
            user_lines = [x for x in before if not x.startswith(("<Assistant>", "<BOD>"))]
            dialogues.append(
                Dialogue(
                    str(item.get("id", i)),
                    int(item["user-id"]),
                    "".join(before),
                    [str(r) for r in item["relevant-id"]],
                    user_lines[-1] if user_lines else "".join(before),
                )
            )
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise InvalidInputError(f"MADial dialogue line {i + 1} is malformed ({e})") from e
    if not events or not dialogues:
        raise InvalidInputError(f"{root}: no MADial memories or dialogues for language {language!r}")
    return events, dialogues


def haystacks(events: Sequence[Event], dialogues: Sequence[Dialogue]) -> list[Haystack]:
    """One :class:`Haystack` per user: their events as memories, their dialogues as probes."""
    from memory_bank.evaluation.benchmark import Haystack, Probe

    out = []
    for uid in sorted({e.user for e in events}):
        name = USER_NAMES.get(uid, f"user-{uid}")
        mems = [
            Memory(
                memory_id=f"{name}_{e.mid}",
                user=name,
                kind=MemoryKind.TURN,
                date=e.time,
                text=e.text,
                query=e.text,
                response="",
                extra={"id": e.mid, "session": e.time},
            )
            for e in events
            if e.user == uid
        ]
        probes = [
            Probe(qid=d.did, question=d.query, category="dialogue", evidence=d.relevant, sessions=[])
            for d in dialogues
            if d.user == uid
        ]
        out.append(Haystack(user=name, memories=mems, probes=probes, now=ASKED_ON))
    return out


def ndcg_at_k(relevant: Sequence[str], ranked: Sequence[str], k: int) -> float:
    """nDCG@k with binary relevance: DCG of ``ranked[:k]`` over the best possible DCG."""
    wanted = set(relevant)
    if not wanted:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, r in enumerate(ranked[:k]) if r in wanted)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(wanted))))
    return dcg / ideal


def ndcg(
    hays: Sequence[Haystack], ranked: Mapping[str, Mapping[str, list[str]]], ks: Sequence[int]
) -> dict[str, float]:
    """Mean nDCG@k over every probe, per cut-off (``{"10": 0.61, ...}``)."""
    scores = {
        str(k): [ndcg_at_k(p.evidence, ranked[h.user][p.qid], k) for h in hays for p in h.probes] for k in ks
    }
    return {k: round(sum(v) / len(v), 4) if v else 0.0 for k, v in scores.items()}
