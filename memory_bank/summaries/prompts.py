"""Our summary prompts, one table per language (paper §2.1; instructions quoted in the notes).

Every task has an instruction, a header for the material and a closing cue that restates the
task and the output language, in English and in Chinese. There is no system message: with one,
SmolLM2 copies the dialogue instead of summarising it (measured on the paper's data), and larger
models need none. The instruction comes first and the cue last, and the material in between is always
sized to fit the model's context (see :mod:`memory_bank.summaries.summarizer`), so a long day
can never push the instruction out of the prompt. Output stays in the table's language.

Template variables: ``{date}`` (the day), ``{period}`` (first to last day), ``{part_note}`` (empty,
or "part 2 of 3" when a long day is summarised in chunks), ``{content}`` and ``{retry_note}``.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping
from types import MappingProxyType

from memory_bank.languages import WORDS, pick


class Task(str, enum.Enum):
    """What one LLM call makes."""

    DAILY_EVENTS = "daily_events"  # a day's dialog -> its event summary
    DAILY_PERSONALITY = "daily_personality"  # a day's dialog -> the user's traits and emotions
    MERGE_EVENTS = "merge_events"  # event summaries of a long day's parts -> one
    MERGE_PERSONALITY = "merge_personality"  # personality notes of a long day's parts -> one
    GLOBAL_EVENTS = "global_events"  # daily event summaries -> the global event summary
    GLOBAL_PORTRAIT = "global_portrait"  # daily personalities -> the portrait + how to respond


@dataclasses.dataclass(frozen=True)
class LanguagePack:
    """Everything language-specific about summarising: prompts, labels, and output checks."""

    code: str
    instructions: Mapping[Task, str]
    headers: Mapping[Task, str]
    #: closes the prompt by restating the task (small models follow a restated task far better)
    cues: Mapping[Task, str]
    #: added after the cue when an answer is retried, so the retry is not the same prompt again
    retry_note: str
    #: retry notes that say what was wrong with the refused answer, by :func:`chains.retry_kind`
    retry_notes: Mapping[str, str]
    user_label: str
    ai_label: str
    part_note: str  # formatted with part, parts
    part_label: str  # formatted with part
    period: str  # formatted with first, last
    item: str  # formatted with label, text: a speaker's line, or a day's (or part's) summary
    #: answers starting with these are stripped of them ("Summary:", "总结：")
    label_prefixes: tuple[re.Pattern[str], ...]
    #: lines starting with these (item labels copied from the material) are stripped of them
    line_labels: re.Pattern[str]
    #: answers containing these are refusals or boilerplate, not summaries
    junk_markers: tuple[str, ...]
    #: share of CJK characters among letters an answer must reach (zh) or stay under (en)
    cjk_share: tuple[float, float]
    #: the companion talking to the user ("That sounds lovely! You..."), not a summary about them:
    #: an answer that starts like this, or addresses the user (``you_words``) twice, is refused
    voice_start: re.Pattern[str]
    you_words: re.Pattern[str]
    #: animals a user tells about; a personality answer whose first sentence is about one and
    #: not about the user (``user_words``) describes the pet, not the user, and is refused
    pet_words: re.Pattern[str]
    user_words: re.Pattern[str]

    def human_template(self, task: Task) -> str:
        return f"{self.instructions[task]}\n\n{self.headers[task]}\n{{content}}\n\n{self.cues[task]}{{retry_note}}"


def _rx(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


_EN = LanguagePack(
    code="en",
    instructions=MappingProxyType(
        {
            Task.DAILY_EVENTS: (
                "Summarize the events and key information in the following dialogue from {date}. "
                "Keep the names, places, dates, numbers, plans and preferences the user mentioned. "
                "Write one short paragraph."
            ),
            Task.DAILY_PERSONALITY: (
                "Based on the following dialogue from {date}, please summarize the user's personality "
                "traits and emotions. Write two or three short sentences about the user only: a pet, friend "
                "or relative the user talks about is not the user."
            ),
            Task.MERGE_EVENTS: (
                "The following are summaries of consecutive parts of the dialogue from {date}. Combine "
                "them into one summary of the events and key information of that day. Keep names, "
                "places, dates, numbers and plans; do not repeat yourself."
            ),
            Task.MERGE_PERSONALITY: (
                "The following are notes on the user's personality traits and emotions in consecutive "
                "parts of the dialogue from {date}. Combine them into one short summary of the user's "
                "personality traits and emotions that day."
            ),
            Task.GLOBAL_EVENTS: (
                "The following are summaries of the events of several days ({period}). Summarize the "
                "events and key information in them as one short overview, oldest first, keeping the "
                "dates of important events."
            ),
            Task.GLOBAL_PORTRAIT: (
                "The following are the user's exhibited personality traits and emotions throughout "
                "multiple days ({period}). Please provide a highly concise and general summary of the "
                "user's personality (the user themself, not their pets, friends or family). Then add one "
                "sentence on how the AI companion should respond to this user."
            ),
        }
    ),
    headers=MappingProxyType(
        {
            Task.DAILY_EVENTS: "Dialogue{part_note}:",
            Task.DAILY_PERSONALITY: "Dialogue{part_note}:",
            Task.MERGE_EVENTS: "Summaries of the parts:",
            Task.MERGE_PERSONALITY: "Notes on the parts:",
            Task.GLOBAL_EVENTS: "Daily event summaries:",
            Task.GLOBAL_PORTRAIT: "Daily personality traits and emotions:",
        }
    ),
    cues=MappingProxyType(
        {
            Task.DAILY_EVENTS: (
                "Now write one short paragraph in English summarizing the events and key information of this dialogue."
            ),
            Task.DAILY_PERSONALITY: (
                "Now, in two or three short sentences in English, describe the user's personality traits and emotions."
            ),
            Task.MERGE_EVENTS: "Now write one short paragraph in English that combines these summaries.",
            Task.MERGE_PERSONALITY: (
                "Now, in two or three short sentences in English, describe the user's personality traits "
                "and emotions that day."
            ),
            Task.GLOBAL_EVENTS: "Now write one short overview in English of the events and key information of these days.",
            Task.GLOBAL_PORTRAIT: (
                "Now, in English, give a highly concise summary of the user's personality, then one sentence "
                "on how the AI companion should respond to this user."
            ),
        }
    ),
    retry_note=" Use your own words; do not copy the text above.",
    retry_notes=MappingProxyType(
        {
            "voice": " Write about the user in the third person, starting with “The user”; do not talk to them.",
            "pet": " Describe the user themself, starting with “The user”; their pet is not the user.",
            "echo": " Do not repeat these instructions; write only the summary.",
            "copy": " Use your own words; do not copy the text above.",
        }
    ),
    user_label=WORDS["en"].user,
    ai_label=WORDS["en"].ai,
    part_note=" (part {part} of {parts})",
    part_label="Part {part}",
    period="{first} to {last}",
    item="{label}: {text}",
    label_prefixes=_rx(
        r"^(?:sure[,.!]?\s*)?here(?: is|'s)[^:\n]{0,80}:\s*",
        r"^[*#\s]*(?:(?:daily|overall|global|user|event|events)\s+)*"
        r"(?:summary|summaries|overview|personality(?: traits)?(?: summary)?|portrait)[*\s]*[:：]\s*",
    ),
    line_labels=re.compile(r"^(?:\d{4}-\d{2}-\d{2}(?: to \d{4}-\d{2}-\d{2})?|part \d+)\s*:\s*", re.I),
    junk_markers=("as an ai language model", "i'm sorry, but i can", "i cannot help", "i can't help with"),
    cjk_share=(0.0, 0.5),
    voice_start=re.compile(
        r"^\s*(?:i\b|i'm\b|i've\b|oh\b|wow\b|aww?\b|that's\b|that sounds\b|it sounds like you\b|"
        r"sounds like you\b|thank you\b|thanks\b|you\b|you're\b|your\b|dear\b|hi\b|hello\b)",
        re.I,
    ),
    you_words=re.compile(r"\b(?:you|your|you're|yours|yourself)\b", re.I),
    pet_words=re.compile(
        r"\b(?:cats?|kittens?|kitty|dogs?|pupp(?:y|ies)|pets?|parrots?|hamsters?|rabbits?|bunn(?:y|ies)|"
        r"goldfish|turtles?|horses?)\b",
        re.I,
    ),
    user_words=re.compile(r"\b(?:users?|they|them|their|she|he|her|his|themself|themselves)\b", re.I),
)

_ZH = LanguagePack(
    code="zh",
    instructions=MappingProxyType(
        {
            Task.DAILY_EVENTS: (
                "请总结以下{date}的对话内容中的事件和关键信息。保留用户提到的人名、地点、日期、数字、计划和喜好。写成一段简短的话。"
            ),
            Task.DAILY_PERSONALITY: (
                "请根据以下{date}的对话，总结用户的性格特点和情绪。只写两三句关于用户本人的简短描述："
                "用户提到的宠物、朋友或家人不是用户。"
            ),
            Task.MERGE_EVENTS: (
                "以下是{date}对话中连续几个部分的总结。请把它们合并成一段关于当天事件和关键信息的总结，"
                "保留人名、地点、日期、数字和计划，不要重复。"
            ),
            Task.MERGE_PERSONALITY: (
                "以下是{date}对话中连续几个部分里用户表现出的性格特点和情绪。请把它们合并成一段简短的总结。"
            ),
            Task.GLOBAL_EVENTS: (
                "以下是多天（{period}）的事件总结。请总结其中的事件和关键信息，按时间顺序写成一段简短的概述，并保留重要事件的日期。"
            ),
            Task.GLOBAL_PORTRAIT: (
                "以下是用户在多天（{period}）中表现出的性格特点和情绪。请对用户的性格给出高度简洁、概括的总结"
                "（只写用户本人，不写其宠物、朋友或家人），然后用一句话说明AI伴侣应该如何回应这位用户。"
            ),
        }
    ),
    headers=MappingProxyType(
        {
            Task.DAILY_EVENTS: "对话{part_note}：",
            Task.DAILY_PERSONALITY: "对话{part_note}：",
            Task.MERGE_EVENTS: "各部分的总结：",
            Task.MERGE_PERSONALITY: "各部分的性格与情绪：",
            Task.GLOBAL_EVENTS: "每日事件总结：",
            Task.GLOBAL_PORTRAIT: "每日的性格特点和情绪：",
        }
    ),
    cues=MappingProxyType(
        {
            Task.DAILY_EVENTS: "现在请用中文写一段简短的话，总结这段对话中的事件和关键信息。",
            Task.DAILY_PERSONALITY: "现在请用中文，用两三句话描述用户的性格特点和情绪。",
            Task.MERGE_EVENTS: "现在请用中文写一段简短的话，把这些总结合并起来。",
            Task.MERGE_PERSONALITY: "现在请用中文，用两三句话描述用户当天的性格特点和情绪。",
            Task.GLOBAL_EVENTS: "现在请用中文写一段简短的概述，总结这些天的事件和关键信息。",
            Task.GLOBAL_PORTRAIT: "现在请用中文对用户的性格给出高度简洁的总结，再用一句话说明AI伴侣应该如何回应这位用户。",
        }
    ),
    retry_note="请用自己的话概括，不要照抄上面的内容。",
    retry_notes=MappingProxyType(
        {
            "voice": "请用第三人称描述用户，以“用户”开头，不要对用户说话。",
            "pet": "请描述用户本人，以“用户”开头；用户的宠物不是用户。",
            "echo": "不要重复这些要求，只写总结。",
            "copy": "请用自己的话概括，不要照抄上面的内容。",
        }
    ),
    user_label=WORDS["zh"].user,
    ai_label=WORDS["zh"].ai,
    part_note="（第{part}部分，共{parts}部分）",
    part_label="第{part}部分",
    period="{first}至{last}",
    item="{label}：{text}",
    label_prefixes=_rx(
        r"^以下是[^：:\n]{0,40}[：:]\s*",
        r"^[*#\s]*(?:每日|当天|全局|用户)?(?:事件)?(?:总结|摘要|概述|性格总结|性格|画像|用户画像)[*\s]*[：:]\s*",
    ),
    line_labels=re.compile(r"^(?:\d{4}-\d{2}-\d{2}(?:至\d{4}-\d{2}-\d{2})?|第\d+部分)\s*[:：]\s*"),
    junk_markers=(
        "作为一个ai语言模型",
        "作为一个人工智能",
        "作为ai语言模型",
        "抱歉，我无法",
        "对不起，我不能",
    ),
    cjk_share=(0.3, 1.0),
    voice_start=re.compile(r"^\s*(?:我(?!们的用户)|哇|哦|听起来|谢谢|你|亲爱的|你好)"),
    you_words=re.compile("你|您"),
    pet_words=re.compile("猫|狗|宠物|鹦鹉|仓鼠|兔子|金鱼|乌龟"),
    user_words=re.compile("用户|他|她"),
)

#: The per-language table. Add a language by adding a pack here (and to ``Language`` in config).
LANGUAGES: Mapping[str, LanguagePack] = MappingProxyType({"en": _EN, "zh": _ZH})


def language_pack(language: str) -> LanguagePack:
    """The pack for ``language`` (``en`` or ``zh``; ``cn`` is accepted as the original code's name)."""
    return pick(LANGUAGES, "zh" if language == "cn" else language, "summary prompts")
