"""Dialogue-aware queries: a query that is a conversation is more than one string.

A companion searches its memories with the conversation so far, not with one question: the
latest thing the user said, and the turns before it that say what the talk is about. Embedded
as one string, the turns are averaged into each other, and a long one is cut at the encoder's
length limit (at its *end*, where the latest turn is). :func:`parse_dialogue` recognises a
query written as speaker-tagged lines (MADial-Bench's ``<Bart>: "..."``, ``User: ...``,
``用户：...``); :func:`query_vector` then embeds its parts separately, in one batch, and mixes
them:

    q = normalise((1 - latest_weight) * e(context) + latest_weight * e(latest user turn))

where the context is every turn, tags removed. Since the stored vectors are normalised, the
dense score of a memory is the same mix of its cosines with the two parts. A query that is not a
dialogue (a question, one message) is embedded exactly as before, so its ranking does not move.

>>> parse_dialogue("<BOD>\\n<Bart>: \\"I won!\\"\\n<Assistant>: \\"Great!\\"\\n<Bart>: \\"Yes.\\"\\n").latest
'Yes.'
>>> parse_dialogue("What did I eat on May 4th?") is None
True

A chat searches with the user's latest message; :func:`chat_query` can write the recent turns
of the conversation in front of it as such a dialogue (``chat_context_turns`` in
:class:`~memory_bank.config.RetrievalConfig`, 0 by default: measured in README, Evaluation).

>>> chat_query("And her name?", [("I adopted a cat", "How lovely!")], 1)
'User: I adopted a cat\nAssistant: How lovely!\nUser: And her name?'
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

import numpy as np

#: Speakers taken for the assistant (case-insensitive); every other speaker is the user.
ASSISTANT_NAMES = frozenset(
    [
        "assistant",
        "ai",
        "bot",
        "gpt",
        "chatgpt",
        "system",
        "siliconfriend",
        "硅基朋友",
        "助手",
        "助理",
        "机器人",
    ]
)
#: Lines that only mark a dialogue's beginning or end.
_MARKER = re.compile(r"^\s*<(?:BOD|EOD)>\s*$", re.I)
# "<Name>:", "<Name>：", or a bare "Name:" of up to 20 characters without spaces, at a line start.
_SPEAKER = re.compile(r"^\s*(?:<([^<>\n]{1,40})>\s*[:：]|([^\s<>:：\"“”'\[\]]{1,20})\s*[:：])\s*")
_QUOTES = "\"'“”‘’「」"


@dataclasses.dataclass(frozen=True)
class Dialogue:
    """A query split into turns: ``(speaker, text, is_user)``, in order, markers dropped."""

    turns: tuple[tuple[str, str, bool], ...]

    @property
    def latest(self) -> str:
        """The latest user turn (the latest turn when no speaker is the user)."""
        for _, text, user in reversed(self.turns):
            if user:
                return text
        return self.turns[-1][1]

    @property
    def context(self) -> str:
        """Every turn's text, one a line, without speaker tags."""
        return "\n".join(text for _, text, _ in self.turns)


def parse_dialogue(text: str) -> Dialogue | None:
    """The turns of ``text`` if it is a dialogue (at least two lines that start with a speaker
    tag, one of them the user's), else ``None``. An untagged line joins the turn before it."""
    turns: list[list[str | bool]] = []
    tagged = 0
    for line in text.splitlines():
        if not line.strip() or _MARKER.match(line):
            continue
        m = _SPEAKER.match(line)
        if m:
            speaker = (m.group(1) or m.group(2)).strip()
            body = line[m.end() :].strip().strip(_QUOTES).strip()
            turns.append([speaker, body, speaker.lower() not in ASSISTANT_NAMES])
            tagged += 1
        elif turns:
            turns[-1][1] = f"{turns[-1][1]} {line.strip().strip('<>').strip()}".strip()
        else:
            turns.append(["", line.strip(), True])
    if tagged < 2 or not any(user for _, _, user in turns):
        return None
    kept = tuple((str(s), str(t), bool(u)) for s, t, u in turns if str(t))
    return Dialogue(kept) if kept else None


#: The speaker tags :func:`chat_query` writes (the assistant's is in :data:`ASSISTANT_NAMES`).
USER_TAG, ASSISTANT_TAG = "User", "Assistant"


def chat_query(message: str, history: Sequence[tuple[str, str]], turns: int) -> str:
    """The search query for ``message`` in a chat: ``message`` itself, or with ``turns`` > 0 the
    last ``turns`` (query, response) pairs of ``history`` (oldest first) and ``message`` as a
    speaker-tagged dialogue, which :func:`query_vector` embeds as context mixed with the message.

    Line breaks inside a turn are folded to spaces, so no line of a turn reads as a speaker tag.
    """
    recent = list(history)[-turns:] if turns > 0 else []
    if not recent or not message.strip():
        return message

    def one_line(text: str) -> str:
        return " ".join(text.split())

    lines = []
    for query, response in recent:
        if query.strip():
            lines.append(f"{USER_TAG}: {one_line(query)}")
        if response.strip():
            lines.append(f"{ASSISTANT_TAG}: {one_line(response)}")
    return "\n".join([*lines, f"{USER_TAG}: {one_line(message)}"]) if lines else message


def query_vector(text: str, embed: Callable[[Sequence[str]], np.ndarray], latest_weight: float) -> np.ndarray:
    """The query vector of ``text``: ``embed([text])[0]``, or for a dialogue (with
    ``latest_weight`` > 0) the normalised mix of its context's and its latest user turn's
    vectors (see the module docstring), embedded in one call."""
    dialogue = parse_dialogue(text) if latest_weight > 0 else None
    if dialogue is None:
        return np.asarray(embed([text])[0], dtype=np.float32)
    context, latest = np.asarray(embed([dialogue.context, dialogue.latest]), dtype=np.float32)
    mixed = (1.0 - latest_weight) * context + latest_weight * latest
    norm = float(np.linalg.norm(mixed))
    return (mixed / norm if norm > 0 else context).astype(np.float32)
