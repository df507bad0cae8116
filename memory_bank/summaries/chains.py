"""The summary chains: ``prompt | chat model | parser`` (LCEL), one per :class:`Task`.

The parser, :class:`SummaryParser`, cleans what small models add around a summary (labels,
fences, repeated sentences, an unfinished last sentence) and rejects junk: empty or tiny answers,
refusals, echoes of the prompt or the dialog, and answers in the wrong language. A rejected
answer raises ``OutputParserException``, which the summariser retries.

>>> from langchain_core.language_models import FakeListChatModel
>>> chain = build_chain(Task.DAILY_EVENTS, FakeListChatModel(responses=["Summary: Emily adopted a cat."]))
>>> chain.invoke({"date": "2023-05-04", "content": "User: I adopted a cat.\\nAI: Lovely!"})
'Emily adopted a cat.'
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from langchain_core.exceptions import OutputParserException
from langchain_core.output_parsers import BaseOutputParser
from langchain_core.prompts import ChatPromptTemplate

from memory_bank.summaries.prompts import LanguagePack, Task, language_pack
from memory_bank.text import CJK_RE

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import Runnable

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
_LIST_MARK = re.compile(r"^(?:\d{1,2}[.)、]|[-*•])\s*")
_TRAILING_MARK = re.compile(r"\n\s*(?:\d{1,2}[.)、]|[-*•])\s*$")
_MARKDOWN = re.compile(r"\*\*|__|^#+\s*", re.M)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
#: A reasoning model's thoughts: closed, cut off before their end (the answer never came), or
#: closed without their opening tag (some servers strip it from the output).
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)|\A.*?</think>", re.DOTALL)
_TERMINAL = tuple(".!?。！？…\"'”’)）")


def build_prompt(task: Task, language: str = "en") -> ChatPromptTemplate:
    """The chat prompt of ``task``: one human message with instruction, material and closing cue."""
    pack = language_pack(language)
    prompt = ChatPromptTemplate.from_messages([("human", pack.human_template(task))])
    optional = {k: "" for k in ("date", "period", "part_note", "retry_note") if k in prompt.input_variables}
    return prompt.partial(**optional)


def prompt_inputs(**values: str) -> dict[str, str]:
    """Every template variable, defaulting to empty, so one input dict serves any task."""
    return {"date": "", "period": "", "part_note": "", "content": "", "retry_note": "", **values}


class SummaryParser(BaseOutputParser[str]):
    """Turns a chat answer into a clean summary, or raises ``OutputParserException`` for junk."""

    language: str = "en"
    task: Task = Task.DAILY_EVENTS
    max_chars: int = 2000
    min_words: int = 3

    @property
    def _type(self) -> str:
        return "memorybank_summary"

    def parse(self, text: str) -> str:
        pack = language_pack(self.language)
        cleaned = clean_summary(text, pack, self.max_chars)
        problem = junk_reason(cleaned, pack, self.task, self.min_words)
        if problem:
            raise OutputParserException(f"unusable {self.task.value} answer ({problem}): {text[:200]!r}")
        return cleaned


def build_chain(
    task: Task,
    chat_model: BaseChatModel,
    language: str = "en",
    *,
    max_chars: int = 2000,
    min_words: int = 3,
) -> Runnable[dict[str, Any], str]:
    """``prompt | chat_model | parser`` for ``task``; input: :func:`prompt_inputs`, output: text."""
    parser = SummaryParser(language=language, task=task, max_chars=max_chars, min_words=min_words)
    return build_prompt(task, language) | chat_model | parser


def build_chains(
    chat_model: BaseChatModel, language: str = "en", **kwargs: Any
) -> dict[Task, Runnable[dict[str, Any], str]]:
    """One chain per task: daily events, daily personality, their merges, global events, portrait."""
    return {task: build_chain(task, chat_model, language, **kwargs) for task in Task}


# -- cleaning and checks ----------------------------------------------------------------------
def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def _strip_labels(text: str, pack: LanguagePack) -> str:
    for _ in range(3):
        before = text
        for rx in pack.label_prefixes:
            text = rx.sub("", text, count=1).lstrip()
        text = text.strip().strip("\"'“”「」").strip()
        if text == before:
            break
    return text


def _sentences(line: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(line) if s.strip()]


def clean_summary(text: str, pack: LanguagePack, max_chars: int = 2000) -> str:
    """Strip labels, fences and repeats; drop an unfinished last sentence; cap the length."""
    text = _FENCE.sub("", _THINK.sub("", text).strip()).strip()
    text = _strip_labels(_MARKDOWN.sub("", text), pack)
    headers = {_normal(h.split("{")[0]).rstrip(":：") for h in pack.headers.values()}
    joiner = "" if pack.code == "zh" else " "
    seen: set[str] = set()
    lines: list[str] = []
    for raw in text.splitlines():
        line = pack.line_labels.sub("", raw.strip())
        if _normal(line).rstrip(":：") in headers:
            continue  # a copied "Dialogue:" / "Daily event summaries:" header
        mark = _LIST_MARK.match(line)
        prefix = mark.group(0) if mark else ""
        kept = []
        for sentence in _sentences(line[len(prefix) :]):
            key = re.sub(r"\W+", " ", sentence).strip().casefold()
            if not key or key in seen:
                continue  # small models loop: keep the first copy only
            seen.add(key)
            kept.append(sentence.strip())
        if kept:
            lines.append(prefix + joiner.join(kept))
    text = "\n".join(lines).strip()
    parts = _sentences(text)
    if len(parts) > 1 and not text.endswith(_TERMINAL):
        text = text[: text.rfind(parts[-1])].rstrip()  # cut off mid-sentence at max_tokens
        text = _TRAILING_MARK.sub("", text).rstrip()  # and the list number it started with
    if text.endswith((":", "：")):  # an introduction whose content was cut off
        last = _sentences(text.splitlines()[-1])[-1]
        text = text[: text.rfind(last)].rstrip()
    if len(text) > max_chars:
        cut = text[:max_chars]
        ends = [m.end() for m in re.finditer(r"[.!?。！？]", cut)]
        text = cut[: ends[-1]] if ends and ends[-1] > max_chars // 2 else cut.rstrip() + "…"
    return text


def copies_material(answer: str, material: str) -> bool:
    """True if ``answer`` is a verbatim copy of one line of a material that has several (one
    day's summary out of many, one line of a dialogue): a summary of a part, not of the whole."""
    lines = [_normal(line) for line in material.splitlines() if line.strip()]
    head = _normal(answer)
    return len(lines) >= 2 and len(head) >= 30 and any(head in line for line in lines)


#: Why an answer is refused (the text is in the parser's error), by the kind of retry note that
#: tells the model what to do instead (``LanguagePack.retry_notes``).
VOICE = "speaks in the companion's voice to the user, not about them"
PET = "describes the user's pet, not the user"
ECHO_INSTRUCTION = "echoes the instruction"
ECHO_DIALOGUE = "echoes the dialogue"
COPY = "copies part of the material"
_RETRY_KINDS = {VOICE: "voice", PET: "pet", ECHO_INSTRUCTION: "echo", ECHO_DIALOGUE: "copy", COPY: "copy"}


def retry_kind(error: BaseException | str | None) -> str | None:
    """The kind of retry note for a refused answer (``voice``, ``pet``, ``echo``, ``copy``), or
    ``None`` for other failures (the generic note)."""
    text = str(error or "")
    return next((kind for reason, kind in _RETRY_KINDS.items() if reason in text), None)


def junk_reason(text: str, pack: LanguagePack, task: Task, min_words: int = 3) -> str | None:
    """Why ``text`` is not a usable summary, or ``None`` if it is."""
    if not text.strip():
        return "empty"
    cjk = len(CJK_RE.findall(text))
    words = len(_WORD.findall(CJK_RE.sub(" ", text)))
    if words + cjk / 2 < min_words:
        return "too short"
    folded = text.casefold()
    if any(marker in folded for marker in pack.junk_markers):
        return "a refusal or boilerplate"
    # Ideographs against words of other scripts, a word counted as two ideographs (about a
    # Chinese word): a Chinese summary naming Kubernetes and PostgreSQL is still Chinese.
    share = cjk / max(1, cjk + 2 * words)
    low, high = pack.cjk_share
    if share < low or share > high:
        return f"not in the expected language ({pack.code})"
    if any(clause in folded for clause in _instruction_clauses(pack, task)):
        return ECHO_INSTRUCTION
    speaker = re.compile(rf"^\s*(?:{re.escape(pack.user_label)}|{re.escape(pack.ai_label)})\s*[:：]", re.M)
    if len(speaker.findall(text)) >= 2:
        return ECHO_DIALOGUE
    if pack.voice_start.match(text) or len(pack.you_words.findall(text)) >= 2:
        return VOICE
    if task in _PERSONALITY_TASKS:
        first = _sentences(text.splitlines()[0])[0]
        if pack.pet_words.search(first) and not pack.user_words.search(first):
            return PET
    return None


def _instruction_clauses(pack: LanguagePack, task: Task) -> tuple[str, ...]:
    """The clauses of ``task``'s instruction and closing cue long enough that a summary never
    says them by chance (folded): an answer holding one copied the prompt (a small model wrote
    "用户提到的宠物、朋友或家人不是用户。", the instruction's last clause, as the user's portrait).
    Placeholders split clauses; Chinese clauses count from 12 characters, others from 32 (a user
    may well ask for "one short paragraph", 写成一段简短的话, and a faithful summary says so)."""
    out = []
    for text in (pack.instructions[task], pack.cues[task]):
        for clause in re.split(r"\{[^}]*\}|[。！？；：!?;:\n]|[.,](?:\s|$)|，", text):
            clause = clause.strip().casefold()
            if len(clause) >= (12 if CJK_RE.search(clause) else 32):
                out.append(clause)
    return tuple(out)


#: Tasks whose answer describes the user themself (a pet the user mentions must not become it).
_PERSONALITY_TASKS = frozenset({Task.DAILY_PERSONALITY, Task.MERGE_PERSONALITY, Task.GLOBAL_PORTRAIT})
