"""Cutting the prompt's own instructions out of a small model's reply.

SmolLM2-135M often repeats parts of its prompt in the reply: the reply-length rule ("Reply as
SiliconFriend in English, in one to three short sentences."), a heading of the prompt ("What you
know about Emily's personality, and how best to talk with them:"), sometimes followed by the
real answer on the same line. :func:`strip_echo` drops every sentence of the reply that copies
one of those fixed texts (four words or more of it, in order), and a heading that opens a line,
keeping the rest. User text is never matched: only the prompt's fixed texts are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from silicon_friend.prompts import PromptTexts, fill

_WORDS = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u9fff]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
#: A copied fragment must be at least this long to count (words; CJK: characters / 2).
MIN_WORDS = 4


def _norm(text: str) -> str:
    return " ".join(_WORDS.findall(text.casefold()))


def _size(norm: str) -> float:
    cjk = len(_CJK.findall(norm))
    return len(norm.split()) + cjk / 2 - (1 if cjk else 0)


def instruction_texts(texts: PromptTexts, user: str) -> list[str]:
    """The prompt's fixed texts a reply must not repeat, filled with the names."""
    fields = (
        texts.brief_rule,
        texts.language_rule,
        texts.memories_heading,
        texts.portrait_heading,
        texts.summary_heading,
        texts.first_time,
        texts.role,
    )
    out = []
    for template in fields:
        filled = fill(template, user=user, bot=texts.bot_name)
        out += [s for s in _SENTENCE.split(filled) if s.strip()]  # each sentence on its own
    return out


def _copies(sentence: str, instructions: Iterable[str]) -> bool:
    norm = _norm(sentence)
    return bool(norm) and _size(norm) >= MIN_WORDS and any(norm in _norm(i) for i in instructions)


def strip_echo(reply: str, texts: PromptTexts, user: str) -> str:
    """``reply`` without the sentences that copy the prompt's fixed texts, and without a
    prompt heading that opens a line (what follows the heading is kept)."""
    instructions = instruction_texts(texts, user)
    headings = [
        h.rstrip(":：")
        for h in (
            fill(t, user=user, bot=texts.bot_name)
            for t in (texts.memories_heading, texts.portrait_heading, texts.summary_heading)
        )
    ]
    lines = []
    for line in reply.split("\n"):
        stripped = line.strip()
        for heading in headings:
            if stripped.casefold().startswith(heading.casefold()):
                stripped = stripped[len(heading) :].lstrip(" :：-")
        sentences = [s for s in _SENTENCE.split(stripped) if s.strip()]
        kept = [s for s in sentences if not _copies(s, instructions)]
        if len(kept) == len(sentences) and stripped == line.strip():
            lines.append(line.rstrip())  # nothing copied: the line as it was written (indented code, blank lines)
            continue
        joiner = "" if _CJK.search(stripped) else " "
        cut = joiner.join(s.strip() for s in kept)
        if cut:  # (a line that was all copy leaves no blank line behind)
            lines.append(cut)
    return "\n".join(lines).strip("\n").lstrip(" \t") if lines else ""
