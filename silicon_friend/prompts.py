"""SiliconFriend's prompts: one table per language, and the pieces a prompt is made of.

The prompt follows the paper's Figure 1: the companion's role, the memories related to the
user's message (with their dates), the global user portrait, the global event summary, the
recent dialog, then the user's message. Everything language-specific lives in :data:`PROMPTS`;
:mod:`silicon_friend.budget` decides which pieces fit the model's context.

>>> texts = prompt_texts("en")
>>> texts.bot_name
'SiliconFriend'
>>> prompt_texts("zh").bot_name
'硅基朋友'
"""

from __future__ import annotations

import dataclasses

from memory_bank.languages import LANGUAGES, WORDS, pick
from memory_bank.records import Memory, MemoryKind

__all__ = ["LANGUAGES", "PROMPTS", "PromptTexts", "fill", "prompt_texts"]


@dataclasses.dataclass(frozen=True)
class PromptTexts:
    """Everything a prompt says, in one language. ``{user}``, ``{bot}`` and ``{today}`` are filled in."""

    bot_name: str
    role: str
    first_time: str
    memories_heading: str
    portrait_heading: str
    summary_heading: str
    day_summary_label: str
    truncated: str
    language_rule: str
    #: the language rule for small models, which need a short reply asked for plainly
    brief_rule: str

    def memory_line(self, memory: Memory, user: str) -> str:
        """One retrieved memory as a dated line of the prompt."""
        if memory.kind is MemoryKind.TURN:
            said = f"{user}: {memory.query or memory.text}"
            if memory.response:
                said += f" | {self.bot_name}: {memory.response}"
            return f"[{memory.date}] {said}"
        return f"[{memory.date}] ({self.day_summary_label}) {memory.text}"


PROMPTS: dict[str, PromptTexts] = {
    "en": PromptTexts(
        bot_name="SiliconFriend",
        role=(
            "You are {bot}, a warm and caring AI companion of {user}, and also a skilled "
            "psychological counsellor: listen with empathy, notice how {user} feels, and offer kind, "
            "practical support. You have a long-term memory of your past conversations with {user}. "
            "Use the memories below when they are relevant (you may say when something happened); "
            "never invent memories you do not have. Today is {today}."
        ),
        first_time=(
            "This is your very first conversation with {user}: you have no memories of them yet. "
            "Welcome them warmly, introduce yourself briefly as {bot}, and get to know them."
        ),
        memories_heading="Memories related to {user}'s message:",
        portrait_heading="What you know about {user}'s personality, and how best to talk with them:",
        summary_heading="Summary of past events with {user}:",
        day_summary_label=WORDS["en"].day_summary,
        truncated=" […]",
        language_rule="Reply in English, briefly and naturally, as {bot}.",
        brief_rule="Reply as {bot} in English, in one to three short sentences.",
    ),
    "zh": PromptTexts(
        bot_name="硅基朋友",
        role=(
            "你是{bot}，{user}温暖贴心的AI伙伴，同时也是一位出色的心理咨询师：用同理心倾听，"
            "体察{user}的情绪，给出温和而实用的支持。你拥有与{user}过往对话的长期记忆。"
            "当下面的记忆与当前话题相关时请自然地运用（可以提到事情发生的时间）；不要编造没有的记忆。"
            "今天是{today}。"
        ),
        first_time="这是你和{user}的第一次对话，你还没有关于他/她的任何记忆。请热情地欢迎对方，简单介绍你自己是{bot}，并开始了解对方。",
        memories_heading="与{user}这句话相关的记忆：",
        portrait_heading="你对{user}性格的了解，以及与其交流的最佳方式：",
        summary_heading="与{user}过往事件的总结：",
        day_summary_label=WORDS["zh"].day_summary,
        truncated="[…]",
        language_rule="请以{bot}的身份，用中文简洁自然地回复。",
        brief_rule="请以{bot}的身份用中文回复，一到三句话即可。",
    ),
}


def prompt_texts(language: str) -> PromptTexts:
    """The prompt table of ``language`` (``en`` or ``zh``)."""
    return pick(PROMPTS, language, "SiliconFriend prompts")


def fill(template: str, *, user: str, bot: str, today: str = "") -> str:
    """Fill a template's ``{user}``, ``{bot}`` and ``{today}`` (user text is never formatted)."""
    return template.replace("{user}", user).replace("{bot}", bot).replace("{today}", today)
