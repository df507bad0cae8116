"""Fitting a SiliconFriend prompt into the model's context window (pure functions).

The role instruction and the user's message are never cut. The optional pieces (recent dialog
turns, retrieved memories, the user portrait and the event summary) are added in priority order
while they fit, leaving room for the reply: the latest turn first, then the best memory, the
portrait, the summary, and then the older turns and other memories alternately. A memory, the
portrait or the summary that is too long is shortened; dialog turns are kept or dropped whole and
always contiguous (the newest ones). If even the instruction and the message leave no room for
a reply, :class:`PromptTooLongError` says so.

>>> from silicon_friend.prompts import prompt_texts
>>> plan = PromptPlan(prompt_texts("en"), "Emily", "2023-05-04", "Hi!", first_time=True)
>>> fitted = fit_prompt(plan, context_tokens=2048, max_new_tokens=128, count=estimate_tokens)
>>> [m["role"] for m in fitted.messages]
['system', 'user']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from memory_bank.llm import estimate_tokens
from memory_bank.records import Memory
from silicon_friend.errors import PromptTooLongError
from silicon_friend.prompts import PromptTexts, fill

__all__ = ["FittedPrompt", "PromptPlan", "TokenCounter", "count_messages", "estimate_tokens", "fit_prompt"]

TokenCounter = Callable[[str], int]

#: Tokens a chat template adds around each message (ChatML: ``<|im_start|>role\n ... <|im_end|>\n``).
MESSAGE_OVERHEAD = 6
#: Tokens of the generation prompt (``<|im_start|>assistant\n``) and a safety margin.
REPLY_PRIMER = 4
SAFETY_MARGIN = 16
#: A too-long memory, portrait or summary is shortened only if at least this many tokens are left.
MIN_PIECE_TOKENS = 24


@dataclasses.dataclass
class PromptPlan:
    """Everything that could go into a prompt, before budgeting.

    ``memories`` are ranked best first; ``history`` is the recent dialog, oldest first, as
    ``(user message, reply)`` pairs.
    """

    texts: PromptTexts
    user: str
    today: str
    message: str
    first_time: bool = False
    memories: Sequence[Memory] = ()
    portrait: str = ""
    summary: str = ""
    history: Sequence[tuple[str, str]] = ()
    #: ask for one to three sentences (small models ramble otherwise)
    brief: bool = False


@dataclasses.dataclass
class FittedPrompt:
    """The messages to send, what made it in, and how many tokens the reply may use."""

    messages: list[dict[str, str]]
    memories: list[Memory]
    history_turns: int
    portrait: bool
    summary: bool
    prompt_tokens: int
    max_new_tokens: int
    shortened: list[str] = dataclasses.field(default_factory=list)

    @property
    def system(self) -> str:
        return self.messages[0]["content"]


@dataclasses.dataclass
class _Piece:
    section: str  # "history", "memory", "portrait", "summary"
    index: int
    text: str
    shortened: bool = False


def _shorten(text: str, limit: int, count: TokenCounter, marker: str) -> str:
    """The longest prefix of ``text`` (plus ``marker``) that counts at most ``limit`` tokens."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid] + marker) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + marker if lo else ""


def _priority(plan: PromptPlan) -> list[_Piece]:
    history = [_Piece("history", i, "") for i in reversed(range(len(plan.history)))]
    memories = [_Piece("memory", i, "") for i in range(len(plan.memories))]
    order: list[_Piece] = []
    if history:
        order.append(history.pop(0))
    if memories:
        order.append(memories.pop(0))
    if plan.portrait.strip():
        order.append(_Piece("portrait", 0, plan.portrait.strip()))
    if plan.summary.strip():
        order.append(_Piece("summary", 0, plan.summary.strip()))
    while history or memories:
        if history:
            order.append(history.pop(0))
        if memories:
            order.append(memories.pop(0))
    return order


def _system(plan: PromptPlan, pieces: Sequence[_Piece]) -> str:
    t, names = plan.texts, {"user": plan.user, "bot": plan.texts.bot_name, "today": plan.today}
    parts = [fill(t.role, **names)]
    if plan.first_time:
        parts.append(fill(t.first_time, **names))
    head = " ".join(parts)
    sections = []
    mems = sorted(
        (p for p in pieces if p.section == "memory"),
        key=lambda p: (plan.memories[p.index].date, plan.memories[p.index].turn or 0),
    )
    if mems:
        lines = "\n".join(f"- {p.text}" for p in mems)
        sections.append(f"{fill(t.memories_heading, **names)}\n{lines}")
    for section, heading in (("portrait", t.portrait_heading), ("summary", t.summary_heading)):
        for p in pieces:
            if p.section == section:
                sections.append(f"{fill(heading, **names)}\n{p.text}")
    rule = t.brief_rule if plan.brief else t.language_rule
    return "\n\n".join([head, *sections, fill(rule, **names)])


def _messages(plan: PromptPlan, pieces: Sequence[_Piece]) -> list[dict[str, str]]:
    kept = sorted(p.index for p in pieces if p.section == "history")
    out = [{"role": "system", "content": _system(plan, pieces)}]
    for i in kept:
        query, reply = plan.history[i]
        out += [{"role": "user", "content": query}, {"role": "assistant", "content": reply}]
    out.append({"role": "user", "content": plan.message})
    return out


def count_messages(messages: Sequence[dict[str, str]], count: TokenCounter) -> int:
    """Tokens of a chat prompt: its texts plus the template's per-message overhead."""
    return sum(count(m["content"]) + MESSAGE_OVERHEAD for m in messages) + REPLY_PRIMER


def fit_prompt(
    plan: PromptPlan,
    *,
    context_tokens: int,
    max_new_tokens: int,
    count: TokenCounter,
    min_new_tokens: int = 32,
) -> FittedPrompt:
    """Choose what fits: see the module docstring. Raises :class:`PromptTooLongError`."""
    limit = context_tokens - SAFETY_MARGIN
    base = count_messages(_messages(plan, []), count)
    min_new_tokens = min(min_new_tokens, max_new_tokens)
    if base + min_new_tokens > limit:
        raise PromptTooLongError(
            f"the message is too long for the model: the prompt needs about {base} tokens and the "
            f"model's context holds {context_tokens}; send a shorter message"
        )
    reply_tokens = min(max_new_tokens, limit - base)  # >= min_new_tokens, checked above
    room = limit - reply_tokens - base
    marker = plan.texts.truncated
    chosen: list[_Piece] = []
    history_blocked = False
    for piece in _priority(plan):
        if piece.section == "history":
            if history_blocked:
                continue
            query, reply = plan.history[piece.index]
            cost = count(query) + count(reply) + 2 * MESSAGE_OVERHEAD
            if cost <= room:
                chosen.append(piece)
                room -= cost
            else:
                history_blocked = True  # keep the dialog contiguous: no older turn after a gap
            continue
        if piece.section == "memory":
            m = plan.memories[piece.index]
            piece.text = plan.texts.memory_line(m, plan.user)
        heading = 0 if any(p.section == piece.section for p in chosen) else 12
        cost = count(piece.text) + 2 + heading
        if cost <= room:
            chosen.append(piece)
            room -= cost
        elif room - heading - 2 >= MIN_PIECE_TOKENS:
            piece.text = _shorten(piece.text, room - heading - 2, count, marker)
            if piece.text:
                piece.shortened = True
                chosen.append(piece)
                room = 0
    messages = _messages(plan, chosen)
    total = count_messages(messages, count)
    # Token counts of joined text are not exactly additive; drop the last additions until it fits.
    while chosen and total + reply_tokens > limit:
        chosen.pop()
        messages = _messages(plan, chosen)
        total = count_messages(messages, count)
    used = sorted(p.index for p in chosen if p.section == "memory")
    return FittedPrompt(
        messages=messages,
        memories=[plan.memories[i] for i in used],
        history_turns=sum(p.section == "history" for p in chosen),
        portrait=any(p.section == "portrait" for p in chosen),
        summary=any(p.section == "summary" for p in chosen),
        prompt_tokens=total,
        max_new_tokens=reply_tokens,
        shortened=[p.section for p in chosen if p.shortened],
    )
