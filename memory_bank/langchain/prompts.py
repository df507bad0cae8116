"""The text the LangChain adapters put around memories, one table per language.

The paper's prompt gives the model the retrieved memories with their dates, the global user
portrait and the global event summary, then the recent dialog. :func:`memory_block` renders the
first three as one block (the agent middleware appends it to the system message);
:func:`conversation_prompt` is a ready prompt for classic chains with :class:`MemoryBankMemory`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from langchain_core.prompts import PromptTemplate

from memory_bank.languages import memory_words, pick
from memory_bank.records import MemoryKind, SearchResult


@dataclasses.dataclass(frozen=True)
class PromptText:
    """Fixed wording for one language (the speaker labels and the day-summary label are the
    shared :mod:`memory_bank.languages` words)."""

    intro: str
    memories: str
    portrait: str
    summary: str
    instruction: str
    conversation: str


PROMPTS: dict[str, PromptText] = {
    "en": PromptText(
        intro="The following is a friendly conversation between a human and an AI that has a "
        "long-term memory of this human.",
        memories="Memories from earlier conversations with this user that may be relevant (with their dates):",
        portrait="The user's personality, and how to respond to them:",
        summary="Summary of past events with this user:",
        instruction="Use these memories when they are relevant to the current message; do not invent memories.",
        conversation="Current conversation:",
    ),
    "zh": PromptText(
        intro="以下是用户与一位拥有长期记忆的 AI 之间的友好对话。",
        memories="与该用户过去对话中可能相关的记忆（附日期）：",
        portrait="用户的性格，以及应当如何回应他/她：",
        summary="与该用户过去事件的总结：",
        instruction="当这些记忆与当前消息相关时，请自然地使用它们；不要编造记忆。",
        conversation="当前对话：",
    ),
}


def prompt_text(language: str) -> PromptText:
    """The wording for ``language`` (``en`` or ``zh``)."""
    return pick(PROMPTS, language, "memory prompt")


def format_memories(
    results: Sequence[SearchResult],
    *,
    language: str = "en",
    human_prefix: str | None = None,
    ai_prefix: str | None = None,
) -> str:
    """One line per retrieved memory, each starting with its date; the speakers are named
    ``human_prefix`` and ``ai_prefix`` (default: the language's labels).

    >>> from memory_bank.records import Memory, MemoryKind, SearchResult
    >>> m = Memory("e_1", "Emily", MemoryKind.TURN, "2023-05-04", "", query="I got a cat.", response="Nice!")
    >>> format_memories([SearchResult(m, 0.9, 1.0)])
    '[2023-05-04] User: I got a cat. AI: Nice!'
    """
    words = memory_words(language)
    human_prefix = human_prefix or words.user
    ai_prefix = ai_prefix or words.ai
    lines = []
    for r in results:
        m = r.memory
        if m.kind is MemoryKind.TURN and m.query is not None:
            body = f"{human_prefix}: {m.query}"
            if m.response:
                body += f" {ai_prefix}: {m.response}"
        elif m.kind is MemoryKind.DAILY_SUMMARY:
            body = f"{words.day_summary}: {m.text}"
        else:
            body = m.text
        lines.append(f"[{m.date}] {' '.join(body.split())}")
    return "\n".join(lines)


def memory_block(memories: str, portrait: str, summary: str, *, language: str = "en") -> str:
    """The memory part of a system message; empty when there is nothing to remember yet."""
    text = prompt_text(language)
    parts = [
        f"{heading}\n{body.strip()}"
        for heading, body in (
            (text.memories, memories),
            (text.portrait, portrait),
            (text.summary, summary),
        )
        if body.strip()
    ]
    if not parts:
        return ""
    return "\n\n".join([*parts, text.instruction])


def conversation_prompt(
    language: str = "en", *, input_key: str = "input", human_prefix: str = "Human", ai_prefix: str = "AI"
) -> PromptTemplate:
    """A prompt for classic chains using :class:`~memory_bank.langchain.memory.MemoryBankMemory`
    with its default variable names (``memories``, ``user_portrait``, ``event_summary``,
    ``history``) and the chain input ``input_key``.

    >>> sorted(conversation_prompt().input_variables)
    ['event_summary', 'history', 'input', 'memories', 'user_portrait']
    """
    text = prompt_text(language)
    template = (
        f"{text.intro}\n\n"
        f"{text.memories}\n{{memories}}\n\n"
        f"{text.portrait}\n{{user_portrait}}\n\n"
        f"{text.summary}\n{{event_summary}}\n\n"
        f"{text.instruction}\n\n"
        f"{text.conversation}\n{{history}}\n"
        f"{human_prefix}: {{{input_key}}}\n{ai_prefix}:"
    )
    return PromptTemplate.from_template(template)
