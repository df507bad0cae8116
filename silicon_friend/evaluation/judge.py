"""An LLM judge for the paper's answer metrics (§4.2), with fixed, versioned prompts.

The paper's metrics were scored by people; here any chat model scores them (an OpenAI-compatible
model in practice), one metric per call, answering with a bare number so that small models can
follow:

* retrieval accuracy (0/1): do the retrieved memories hold what the reference answer needs?
* response correctness (0/0.5/1): is the reply right, against the reference answer?
* contextual coherence (0/0.5/1): is the reply natural and on topic (not whether it is right)?
* ranking: the replies of every system compared in one run, best first (score = 1/rank).

The prompts are identified by :data:`JUDGE_VERSION` and their hash (:func:`prompt_hash`), which
go into every results file; changing a prompt means a new version. Both languages say the same.
Judge calls use temperature 0.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memory_bank.languages import pick

logger = logging.getLogger(__name__)

JUDGE_VERSION = "judge-v1"


@dataclasses.dataclass(frozen=True)
class JudgePrompts:
    system: str
    retrieval: str
    correctness: str
    coherence: str
    ranking: str
    no_memories: str
    retry: str


PROMPTS: dict[str, JudgePrompts] = {
    "en": JudgePrompts(
        system=(
            "You are a strict and fair evaluator of a companion chatbot that remembers its past "
            "conversations with a user. Follow the rubric exactly. Reply with the score only."
        ),
        retrieval=(
            "The user asked the chatbot a question about their past conversations.\n"
            "Question: {question}\nReference answer: {answer}\n"
            "Memories the chatbot retrieved:\n{memories}\n\n"
            "Do the retrieved memories contain the information needed for the reference answer? "
            "Reply 1 if yes, 0 if no. Reply with the number only."
        ),
        correctness=(
            "The user asked the chatbot a question about their past conversations.\n"
            "Question: {question}\nReference answer: {answer}\nChatbot's reply: {response}\n\n"
            "Score the reply's correctness against the reference answer: 1 = correct and complete; "
            "0.5 = partly correct or incomplete; 0 = wrong, invented, or no answer. "
            "Reply with 0, 0.5 or 1 only."
        ),
        coherence=(
            "The user said to the chatbot: {question}\nChatbot's reply: {response}\n\n"
            "Score the reply's contextual coherence, not its factual correctness: 1 = natural, fluent "
            "and consistent with what the user said; 0.5 = understandable but partly off topic, awkward "
            "or inconsistent; 0 = incoherent, irrelevant or broken. Reply with 0, 0.5 or 1 only."
        ),
        ranking=(
            "The user asked several chatbots the same question about their past conversations.\n"
            "Question: {question}\nReference answer: {answer}\n\nReplies:\n{replies}\n\n"
            "Rank the replies from best to worst: correct use of the user's history first, then "
            "coherence. Reply with the letters only, best first, separated by '>' (e.g. B > A > C)."
        ),
        no_memories="(none)",
        retry="Reply with the score only: {choices}.",
    ),
    "zh": JudgePrompts(
        system=(
            "你是一名严格、公正的评审，评估一个能记住与用户过往对话的陪伴型聊天机器人。"
            "请严格按照评分标准打分，只回复分数。"
        ),
        retrieval=(
            "用户向聊天机器人询问了过去对话中的事情。\n"
            "问题：{question}\n参考答案：{answer}\n"
            "聊天机器人检索到的记忆：\n{memories}\n\n"
            "这些记忆是否包含得出参考答案所需的信息？是则回复 1，否则回复 0。只回复数字。"
        ),
        correctness=(
            "用户向聊天机器人询问了过去对话中的事情。\n"
            "问题：{question}\n参考答案：{answer}\n聊天机器人的回复：{response}\n\n"
            "对照参考答案给回复的正确性打分：1 = 正确且完整；0.5 = 部分正确或不完整；"
            "0 = 错误、编造或没有回答。只回复 0、0.5 或 1。"
        ),
        coherence=(
            "用户对聊天机器人说：{question}\n聊天机器人的回复：{response}\n\n"
            "给回复的上下文连贯性打分（不评判事实是否正确）：1 = 自然、流畅，与用户所说一致；"
            "0.5 = 能看懂，但部分离题、生硬或前后不一致；0 = 不连贯、答非所问或无法理解。"
            "只回复 0、0.5 或 1。"
        ),
        ranking=(
            "用户向几个聊天机器人问了同一个关于过去对话的问题。\n"
            "问题：{question}\n参考答案：{answer}\n\n回复：\n{replies}\n\n"
            "请把这些回复从好到差排序：首先看是否正确利用了用户的历史，其次看连贯性。"
            "只回复字母，最好的在前，用“>”分隔（例如 B > A > C）。"
        ),
        no_memories="（无）",
        retry="只回复分数：{choices}。",
    ),
}


def prompts_for(language: str) -> JudgePrompts:
    return pick(PROMPTS, language, "judge prompts")


def prompt_hash() -> str:
    """A short hash of every judge prompt (both languages): changes whenever a prompt does."""
    blob = json.dumps(
        {k: dataclasses.asdict(v) for k, v in PROMPTS.items()}, ensure_ascii=False, sort_keys=True
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


_SCORE = re.compile(r"(?<![\d.])(0?\.5|1(?:\.0+)?|0(?:\.0+)?)(?![\d.])")


def parse_score(text: str, allowed: Sequence[float]) -> float | None:
    """The first score in ``text`` that is one of ``allowed`` (``"0.5"``, ``".5"``, ``"1.0"``...)."""
    for m in _SCORE.finditer(text or ""):
        value = float(m.group(1))
        if value in allowed:
            return value
    return None


def parse_ranking(text: str, n: int) -> list[int] | None:
    """``"B > A > C"`` -> ``[1, 0, 2]`` (indexes, best first); ``None`` unless all ``n`` appear."""
    letters = [chr(ord("A") + i) for i in range(n)]
    order: list[int] = []
    for ch in re.findall(r"\b([A-Z])\b", (text or "").upper()):
        if ch in letters and letters.index(ch) not in order:
            order.append(letters.index(ch))
    return order if len(order) == n else None


def ranks_from_scores(scores: Sequence[tuple[float, ...]]) -> list[int]:
    """Competition ranks (1 = best; ties share a rank) from per-system score tuples."""
    return [1 + sum(1 for other in scores if other > mine) for mine in scores]


Invoke = Callable[[list[dict[str, str]]], str]


@dataclasses.dataclass
class Judgement:
    score: float | None
    raw: str
    calls: int


class Judge:
    """Scores with ``invoke(messages) -> text`` (see :func:`chat_invoker`), in one language."""

    def __init__(self, invoke: Invoke, language: str = "en") -> None:
        self.invoke = invoke
        self.language = language
        self.p = prompts_for(language)
        self.failures = 0

    def _score(self, prompt: str, allowed: Sequence[float]) -> Judgement:
        messages = [{"role": "system", "content": self.p.system}, {"role": "user", "content": prompt}]
        raw = self.invoke(messages)
        score = parse_score(raw, allowed)
        calls = 1
        if score is None:  # one reminder, then give up on this item
            choices = " / ".join(f"{a:g}" for a in allowed)
            messages += [
                {"role": "assistant", "content": raw},
                {"role": "user", "content": self.p.retry.format(choices=choices)},
            ]
            raw2 = self.invoke(messages)
            score, raw, calls = parse_score(raw2, allowed), f"{raw}\n---\n{raw2}", 2
        if score is None:
            self.failures += 1
            logger.warning("judge gave no usable score: %r", raw[:200])
        return Judgement(score, raw, calls)

    def retrieval(self, question: str, answer: str, memories: Sequence[str]) -> Judgement:
        text = "\n".join(f"- {m}" for m in memories) or self.p.no_memories
        return self._score(
            self.p.retrieval.format(question=question, answer=answer, memories=text), (0.0, 1.0)
        )

    def correctness(self, question: str, answer: str, response: str) -> Judgement:
        prompt = self.p.correctness.format(question=question, answer=answer, response=response)
        return self._score(prompt, (0.0, 0.5, 1.0))

    def coherence(self, question: str, response: str) -> Judgement:
        return self._score(self.p.coherence.format(question=question, response=response), (0.0, 0.5, 1.0))

    def ranking(self, question: str, answer: str, responses: Sequence[str]) -> tuple[list[int] | None, str]:
        """Indexes of ``responses`` best first, or ``None`` if the judge's answer is unusable."""
        replies = "\n".join(f"[{chr(ord('A') + i)}] {r}" for i, r in enumerate(responses))
        messages = [
            {"role": "system", "content": self.p.system},
            {
                "role": "user",
                "content": self.p.ranking.format(question=question, answer=answer, replies=replies),
            },
        ]
        raw = self.invoke(messages)
        return parse_ranking(raw, len(responses)), raw


def chat_invoker(chat_model: Any, *, max_tokens: int = 24) -> Invoke:
    """``messages -> text`` for a LangChain chat model, at temperature 0."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    roles = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    params: dict[str, Any] = {"temperature": 0.0, "max_tokens": max_tokens}
    extra = getattr(chat_model, "extra_body", None)
    if isinstance(extra, Mapping) and "max_tokens" in extra:  # llama_cpp.server reads it from here
        params["extra_body"] = {**extra, "max_tokens": max_tokens}

    def invoke(messages: list[dict[str, str]]) -> str:
        out = chat_model.invoke([roles[m["role"]](content=m["content"]) for m in messages], **params)
        content = getattr(out, "content", out)
        if isinstance(content, list):
            return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
        return str(content)

    return invoke
