"""Why a memory is strong, fading or forgotten: one typed record a memory view can show as is.

:meth:`memory_bank.MemoryBank.explain` (one memory) and
:meth:`memory_bank.MemoryBank.explanations` (all of a user's, in one call) return
:class:`Explanation`: the numbers behind the forgetting decision (strength, recalls, days since
the last recall, the content class and the time scale of the memory's kind, retention today,
the projected day it is forgotten) and :meth:`Explanation.reason`, a short sentence in English
or Chinese ("fading: last recalled 40 days ago, small talk (time scale 2 days) ...").

>>> e = Explanation(memory_id="Ann_2024-01-01_0", kind="turn", archived=False, status="fading",
...     strength=1, recalls=0, anchor="2024-01-01", days_since=40, content_class="small_talk",
...     weight=0.25, kind_scale=1.0, time_scale_days=7.5, retention=0.005, forgets_on="2024-01-24",
...     mode="paper", policy="threshold")
>>> e.reason("en")
'fading: learned 40 days ago, never recalled; small talk (time scale 7.5 days); forgotten on 2024-01-24 unless recalled'
>>> e.reason("zh")
'正在淡忘：40天前记下，从未回忆；闲聊（时间尺度7.5天）；若不再回忆，将于2024-01-24遗忘'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from memory_bank.languages import pick

#: ``off``: forgetting is off or the kind never fades; ``strong``: retention at least
#: :data:`STRONG_RETENTION`; ``fading``: below it; ``forgotten``: by the curve (out of the live
#: tier, still found by the cold tier; restorable); ``hidden``: by the user, never retrieved
#: until restored.
Status = Literal["kept", "strong", "fading", "forgotten", "hidden"]

#: Retention from which a live memory counts as strong rather than fading.
STRONG_RETENTION = 0.5


@dataclasses.dataclass(frozen=True)
class Explanation:
    """One memory's forgetting state (see the module). Dates are ``YYYY-MM-DD``."""

    memory_id: str
    kind: str  #: turn, daily_summary, ...
    archived: bool  #: forgotten: out of retrieval, restorable with ``bank.restore``
    status: Status
    strength: int  #: 1 + the days it was recalled on
    recalls: int  #: strength - 1
    anchor: str  #: the day its forgetting clock counts from: last recall, else when it was learned
    days_since: int  #: whole days from the anchor to "now"
    content_class: str | None  #: small_talk, chat or personal for a turn (memory_bank.salience)
    weight: float  #: the content weight applied to its time scale (1 when content weights are off)
    kind_scale: float  #: its kind's multiplier of tau (forgetting.kind_scales)
    time_scale_days: float  #: tau * kind_scale * weight: the S = 1 time scale of its curve
    retention: float  #: R today, 1.0 when forgetting is off or the kind never fades
    forgets_on: str | None  #: the day it is forgotten unless recalled (None: never)
    mode: str
    policy: str
    hidden: bool = False  #: hidden by the user: never retrieved until restored

    @property
    def recalled(self) -> bool:
        return self.recalls > 0

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready), with the reasons in both languages."""
        return {**dataclasses.asdict(self), "reason": {lang: self.reason(lang) for lang in _WORDS}}

    def reason(self, language: str = "en") -> str:
        """A short human reason for the status, in ``language`` (``en`` or ``zh``)."""
        w = pick(_WORDS, language, "forgetting explanation")
        if self.status == "hidden":
            return f"{w['hidden']}{w['colon']}{w['hidden_why']}"
        if self.status == "kept":
            why = w["never_fades"] if self.mode != "off" else w["off"]
            return f"{w['kept']}{w['colon']}{why}"
        if self.recalled:
            when = w["recalled"].format(n=self.recalls, days=self.days_since)
        else:
            when = w["learned"].format(days=self.days_since)
        what = w["classes"].get(self.content_class or self.kind, w["classes"].get(self.kind, self.kind))
        scale = w["scale"].format(what=what, days=_days(self.time_scale_days))
        parts = [when, scale]
        if self.status == "forgotten":
            parts.append(w["restore"])
        elif self.forgets_on and self.policy == "stochastic":  # a day's pass forgets it by chance
            parts.append(w["odds_turn"].format(day=self.forgets_on))
        elif self.forgets_on:
            parts.append(w["forgets_on"].format(day=self.forgets_on))
        return f"{w[self.status]}{w['colon']}{w['sep'].join(parts)}"


def _days(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".") if x < 10 else f"{x:.0f}"


_WORDS: Mapping[str, dict[str, Any]] = {
    "en": {
        "kept": "kept",
        "strong": "strong",
        "fading": "fading",
        "forgotten": "forgotten",
        "hidden": "hidden",
        "hidden_why": "hidden on purpose, never recalled; restore it to bring it back",
        "colon": ": ",
        "sep": "; ",
        "off": "forgetting is off",
        "never_fades": "summaries of the whole history and daily personality readings never fade",
        "learned": "learned {days} days ago, never recalled",
        "recalled": "recalled on {n} days, last {days} days ago",
        "scale": "{what} (time scale {days} days)",
        "forgets_on": "forgotten on {day} unless recalled",
        "odds_turn": "more likely forgotten than kept by each day's pass from {day} unless recalled",
        "restore": "restore it to bring it back",
        "classes": {
            "small_talk": "small talk",
            "chat": "chat",
            "personal": "about the user's life",
            "turn": "a turn",
            "daily_summary": "a daily summary",
        },
    },
    "zh": {
        "kept": "保留",
        "strong": "牢固",
        "fading": "正在淡忘",
        "forgotten": "已遗忘",
        "hidden": "已隐藏",
        "hidden_why": "被特意隐藏，不会被回忆；可恢复",
        "colon": "：",
        "sep": "；",
        "off": "遗忘已关闭",
        "never_fades": "全局总结和每日性格分析不会淡忘",
        "learned": "{days}天前记下，从未回忆",
        "recalled": "在{n}天里被回忆过，最近一次在{days}天前",
        "scale": "{what}（时间尺度{days}天）",
        "forgets_on": "若不再回忆，将于{day}遗忘",
        "odds_turn": "若不再回忆，从{day}起每天的遗忘更可能忘掉它",
        "restore": "可恢复",
        "classes": {
            "small_talk": "闲聊",
            "chat": "一般对话",
            "personal": "关于用户生活",
            "turn": "对话",
            "daily_summary": "每日总结",
        },
    },
}
