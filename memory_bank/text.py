"""Text handling shared by retrieval and validation: CJK-aware tokens, dates named in queries,
user-name checks.

Tokens (:func:`tokenize`), after NFKC normalisation (full-width "Ｂａｒｔ１２" is "Bart12") and
lower-casing:

* Latin (and other non-CJK) words are lightly stemmed and stripped of stop words;
* CJK runs are split at words without content (:data:`ZH_STOP_WORDS`: "什么", "记得", ...), then
  give character unigrams (function characters such as "的", "了" left out) and bigrams (those
  made only of function characters left out): the usual way to index Chinese without a word
  segmenter, so "博物馆" matches "去博物馆看展";
* numbers are tokens of their own, zero padding stripped ("05" is "5"), decimals kept whole.

A Latin name, a number and Chinese glued together ("Bart在2023年圣诞节跳舞") split at every
change of script: "bart", "2023", then the Chinese tokens, so a name matches wherever it occurs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import itertools
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet

from memory_bank.errors import InvalidInputError

#: The CJK letters (ideographs, kana, hangul) as a regex character-class body: the one definition
#: the tokenizer and the summaries' language checks share.
CJK_CHARS = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
CJK_RE = re.compile(rf"[{CJK_CHARS}]")
# A CJK run, a number, or a run of letters (the last excludes CJK and digits, so scripts split).
_TOKEN_RE = re.compile(rf"[{CJK_CHARS}]+|\d+(?:,\d{{3}})*(?:\.\d+)?|[^\W\d_{CJK_CHARS}]+", re.UNICODE)

_EN_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "from",
        "by",
        "about",
        "as",
        "into",
        "like",
        "through",
        "after",
        "over",
        "between",
        "out",
        "against",
        "during",
        "without",
        "before",
        "under",
        "around",
        "among",
        "is",
        "am",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "have",
        "has",
        "had",
        "do",
        "does",
        "did",
        "doing",
        "i",
        "me",
        "my",
        "myself",
        "we",
        "our",
        "ours",
        "you",
        "your",
        "yours",
        "he",
        "him",
        "his",
        "she",
        "her",
        "hers",
        "it",
        "its",
        "they",
        "them",
        "their",
        "what",
        "which",
        "who",
        "whom",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "when",
        "where",
        "why",
        "how",
        "all",
        "any",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "some",
        "such",
        "no",
        "nor",
        "not",
        "only",
        "own",
        "same",
        "so",
        "than",
        "too",
        "very",
        "can",
        "will",
        "just",
        "should",
        "now",
        "then",
        "once",
        "again",
        "also",
        "would",
        "could",
        "may",
        "might",
        "must",
        "shall",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
        "y",
        "o",
        "don",
        "didn",
        "doesn",
        "let",
        "us",
        "okay",
        "ok",
        "yes",
        "hi",
        "hello",
        "please",
        "thank",
        "thanks",
        "really",
        "oh",
        "well",
        "do",
        "remember",
        "recall",
        "tell",
        "told",
        "said",
        "say",
        "mention",
        "mentioned",
        "ever",
        "once",
        "before",
        "ago",
        "day",
        "days",
        "time",
        "th",
        "nd",
        "rd",
    ]
)
_ZH_STOP = frozenset("的了是我你他她它们在有和就不也都要会吗呢吧啊呀哦嗯这那么个一些什么怎么为还过")
#: Chinese words that carry no content, the counterparts of English stop words ("what",
#: "remember", "tell", "before"). A CJK run is split at them before its n-grams are taken, so
#: neither they nor the bigrams across their edges ("们之" in "我们之前") become tokens.
ZH_STOP_WORDS = frozenset(
    [
        "什么",
        "怎么",
        "为什么",
        "怎么样",
        "我们",
        "你们",
        "他们",
        "她们",
        "它们",
        "咱们",
        "这个",
        "那个",
        "一个",
        "一下",
        "还是",
        "就是",
        "可以",
        "知道",
        "记得",
        "还记得",
        "时候",
        "告诉",
        "提到",
        "说过",
        "以前",
        "之前",
        "的话",
        "是不是",
        "有没有",
        "没有",
        "一起",
        "觉得",
        "怎样",
        "哪里",
        "哪个",
        "多少",
        "请问",
        "谢谢",
        "你好",
        "好的",
        "来着",
        "对了",
        "是的",
    ]
)
_ZH_STOP_RE = re.compile("|".join(sorted(ZH_STOP_WORDS, key=len, reverse=True)))


#: The version of what :func:`tokenize` and :func:`is_question` make of a text. Stores persist
#: each partition's lexical index (:mod:`memory_bank.lexical_snapshot`) under this version and
#: rebuild it when it differs: change it with any change to tokens, stop words, stemming or
#: question detection, or searches after a restart would read the old tokens.
TOKENIZER_VERSION = "3"  # 2: Traditional Chinese folded to Simplified; 3: grouped numbers joined


def _stem(word: str) -> str:
    """A tiny suffix stripper: enough to match plurals and -ing/-ed forms in chat text."""
    for suffix, min_len in (("ing", 5), ("ies", 5), ("ed", 4), ("es", 5), ("s", 4)):
        if len(word) >= min_len and word.endswith(suffix):
            if suffix == "ies":
                return word[:-3] + "y"
            return word[: -len(suffix)]
    return word


@functools.lru_cache(maxsize=1 << 17)
def _word_token(word: str) -> str | None:
    """The index token of a non-CJK word, ``None`` for a stop word (cached: words repeat, and
    rebuilding a partition tokenises every memory)."""
    return None if word in _EN_STOP else _stem(word)


#: Digit groups written with single spaces or hyphens between them: a phone, card or account
#: number as people space it ("139 0000 1234", "07700-900461").
_DIGIT_GROUPS = re.compile(r"(?<![\d.,])\d+(?:[ -]\d+)+(?![\d.,]*\d)")
#: Fewer digits than this in all are not one number (a range "10-12", a score "3 2").
_GROUPED_MIN_DIGITS = 6


def tokenize(text: str) -> list[str]:
    """Index tokens of ``text`` (English and CJK; see the module docstring). A number written in
    spaced or hyphenated groups also gives the token of its digits written together, so
    "139 0000 1234" and "13900001234" find each other."""
    tokens: list[str] = []
    text = unicodedata.normalize("NFKC", text).lower()
    for run in _TOKEN_RE.findall(text):
        if not run[0].isdigit() and not CJK_RE.match(run):
            token = _word_token(run)
            if token is not None:
                tokens.append(token)
        elif run[0].isdigit():
            tokens.append(_number_token(run))
        else:
            tokens.extend(_cjk_tokens(run))
    if " " in text or "-" in text:
        for found in _DIGIT_GROUPS.finditer(text):
            digits = re.sub(r"[ -]", "", found.group())
            if len(digits) >= _GROUPED_MIN_DIGITS:
                tokens.append(_number_token(digits))
    return tokens


@functools.lru_cache(maxsize=1)
def _to_simplified() -> Callable[[str], str]:
    """OpenCC's Traditional-to-Simplified conversion (phrase-aware: 乾隆 stays, 乾了 becomes 干了)."""
    import opencc

    return opencc.OpenCC("t2s").convert


@functools.lru_cache(maxsize=1 << 16)
def _cjk_tokens(run: str) -> tuple[str, ...]:
    """Unigrams and bigrams of a CJK run, split at :data:`ZH_STOP_WORDS` (cached: runs repeat).
    Traditional characters are folded to Simplified first, so 我兒子的手機 and 我儿子的手机 share
    their tokens (a question in one script finds memories in the other)."""
    run = _to_simplified()(run)
    out: list[str] = []
    for seg in _ZH_STOP_RE.split(run):
        out.extend(c for c in seg if c not in _ZH_STOP)
        out.extend(a + b for a, b in itertools.pairwise(seg) if not (a in _ZH_STOP and b in _ZH_STOP))
    return tuple(out)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_STEMMED = ("ing", "ies", "ed", "es", "s")  # the endings _stem takes off
#: Shortest word a typo is looked for in: a shorter one is one edit away from too many others.
MEND_MIN_LENGTH = 5


def _one_edit(word: str) -> Iterator[list[str]]:
    """The words one edit away from ``word``, a kind of edit at a time, the likeliest typos
    first: two letters swapped, a letter doubled or extra, a letter mistyped, a letter left out."""
    cut = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    yield [a + b[1] + b[0] + b[2:] for a, b in cut if len(b) > 1 and b[0] != b[1]]
    yield [a + b[1:] for a, b in cut if b]
    yield [a + c + b[1:] for a, b in cut if b for c in _LETTERS if c != b[0]]
    yield [a + c + b for a, b in cut for c in _LETTERS]


def mend(token: str, known: Mapping[str, object] | AbstractSet[str]) -> list[str]:
    """Tokens of ``known`` (an index's vocabulary) that a query token it does not hold was
    probably meant as: a Latin word one typing slip away ("sisetr", "lisbno": the kind of edit
    that finds any, likeliest first), or two known words run together ("mysister"). ``[]`` when
    none is found, or for a number, a CJK token or a word under :data:`MEND_MIN_LENGTH` letters.
    A search looks for a query's unknown words this way (:meth:`LexicalIndex.query`)."""
    if len(token) < MEND_MIN_LENGTH or not token.isascii() or not token.isalpha():
        return []
    keys = known.keys() if isinstance(known, Mapping) else known
    for kind, edits in enumerate(_one_edit(token)):
        # A slip that broke an ending ("hikign") is known by its stem: looked for among the
        # swaps and the extra letters (few), not among the hundreds of other edits.
        stems = {_stem(e) for e in edits if e.endswith(_STEMMED)} if kind < 2 else set()
        found = (keys & set(edits)) | (keys & stems)  # (set operations: an edit a lookup, in C)
        if found:
            return sorted(found)
    for i in range(2, len(token) - 1):  # known words (of three letters or more) and stop words
        words = [w for w in (_word_token(token[:i]), _word_token(token[i:])) if w is not None]
        if words and all(len(w) >= 3 and w in known for w in words):
            return words
    return []


def _number_token(run: str) -> str:
    """A number's token: zero padding stripped ("05" and "5" match), decimals kept whole."""
    head, sep, rest = run.partition(".")
    head = head.replace(",", "")
    return (head.lstrip("0") or "0") + sep + rest


_QUESTION_END = re.compile(r"(?:[?？]|[吗呢嘛][。.！!～~]?)[\s\"'”’)）]*$")


def is_question(text: str | None) -> bool:
    """Whether ``text`` ends as a question ("...?", "...？", "...吗", "...呢")."""
    return bool(text) and _QUESTION_END.search(text.strip()) is not None  # type: ignore[union-attr]


def has_cjk(text: str) -> bool:
    return CJK_RE.search(text) is not None


_MONTH_NAMES = (  # full name first, then abbreviations
    ("january", "jan"),
    ("february", "feb"),
    ("march", "mar"),
    ("april", "apr"),
    ("may",),
    ("june", "jun"),
    ("july", "jul"),
    ("august", "aug"),
    ("september", "sep", "sept"),
    ("october", "oct"),
    ("november", "nov"),
    ("december", "dec"),
)
MONTHS = {m: i + 1 for i, names in enumerate(_MONTH_NAMES) for m in names}
_MONTH_ALT = "|".join(sorted(MONTHS, key=len, reverse=True))
_EN_MONTH_DAY = re.compile(rf"\b({_MONTH_ALT})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s*(\d{{4}}))?", re.I)
_EN_DAY_MONTH = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_ALT})\b(?:,?\s*(\d{{4}}))?", re.I
)
_ISO = re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b")
_ZH_DATE = re.compile(r"(?:(\d{4})\s*年\s*)?(\d{1,2})\s*月\s*(\d{1,2})\s*[日号號]")
_RELATIVE = {
    "today": 0,
    "yesterday": 1,
    "day before yesterday": 2,
    "今天": 0,
    "昨天": 1,
    "前天": 2,
    "大前天": 3,
}
#: (前 ending 目前, 以前, 之前, 提前, 当前... does not begin 前天: "我目前天天加班" is "these days I
#: work late every day"; nor does 今 ending 如今 begin 今天: "如今天气" is "the weather nowadays".
#: 从前天 stays "since the day before yesterday", and 比如今天 / 假如今天 "for example / if today".)
_RELATIVE_RE = re.compile(
    r"day before yesterday|yesterday|today|大前天|(?<![目以之提事当當眼先])前天|昨天"
    r"|(?<!^如)(?<![^比假例譬]如)今天",
    re.I,
)


# The letters other than A-Z that re.I matches to ASCII ones (İ, ı, ſ, K).
_FOLDS_TO_ASCII = frozenset("\u0130\u0131\u017f\u212a")


def _month(name: str) -> int:
    """The number of a month name the patterns matched (re.I also matches "Auguſt", "Aprİl")."""
    return MONTHS[name.casefold().replace("\u0131", "i").replace("i\u0307", "i")]


def _may_name_a_relative_day(text: str) -> bool:
    """False only when ``_RELATIVE_RE`` cannot match (a substring test, ten times cheaper)."""
    if "天" in text or not _FOLDS_TO_ASCII.isdisjoint(text):
        return True
    low = text.lower()
    return "today" in low or "yesterday" in low


# -- days and weeks counted back from today ("last Tuesday", "two weeks ago", "上周三", "三天前")
_WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_EN_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2,
}  # fmt: skip
_EN_NUMBER = "|".join(sorted((re.escape(w) for w in _EN_NUMBERS), key=len, reverse=True))
_ZH_DIGITS = {
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "兩": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_ZH_NUMBER = r"\d{1,3}|[一二两兩三四五六七八九十]{1,3}"
_ZH_WEEK = r"(?:星期|礼拜|禮拜|周|週)"
#: A weekday after 星期/礼拜 (天 and 日 are Sunday) or after 周 (日 only: 周天 is rare, and 这周天气
#: is "this week's weather"); 一 not when it starts a word (上周一起去 is "went together last week").
_ZH_WEEKDAY = (
    r"(?:(?:星期|礼拜|禮拜)(?P<zh_wd>[一二三四五六日天1-7])|(?:周|週)(?P<zh_wd2>[一二三四五六日1-7]))"
    r"(?![起直样樣下些点點共定般切同手])"
)
#: "last" of "the/my/our... last week of June", "the last night of our trip": an ordinal, not a day.
_EN_NOT_AFTER = "".join(f"(?<!{w} )" for w in ("the", "my", "our", "his", "her", "its", "your", "their"))
_EN_NOT_OF = r"(?!\s+of\b)"
#: 上 ending a word (晚上月亮, 马上周末, 网上周杰伦, 身上, 路上): not "last".
_ZH_NOT_AFTER = r"(?<![晚早马馬网網线線楼樓身台路街车車班世海地面山桌床墙牆头頭脸臉心手])"
#: 周 starting a word (这周围, 周边, 周年, 周岁): not "week".
_ZH_NOT_WEEK_WORD = r"(?![围圍边邊到年岁歲期刊全转轉游遊密折长長])"
_BACK = re.compile(
    "|".join(
        [
            rf"\b(?P<en_n>{_EN_NUMBER}|\d{{1,3}})\s+(?P<en_unit>day|week|month)s?\s+ago\b",
            rf"{_EN_NOT_AFTER}\b(?:last|this\s+past)\s+(?P<en_wd>{'|'.join(_WEEKDAYS_EN)})\b{_EN_NOT_OF}",
            rf"{_EN_NOT_AFTER}\b(?:last|this\s+past)\s+(?P<en_weekend>weekend)\b{_EN_NOT_OF}",
            rf"{_EN_NOT_AFTER}\blast\s+(?P<en_week>week)\b{_EN_NOT_OF}",
            rf"{_EN_NOT_AFTER}\blast\s+(?P<en_month>month)\b{_EN_NOT_OF}",
            r"\b(?P<en_tonight>this\s+morning|this\s+afternoon|this\s+evening|tonight|earlier\s+today)\b",
            rf"{_EN_NOT_AFTER}\b(?P<en_last_night>last\s+night)\b{_EN_NOT_OF}",
            rf"(?P<zh_n>{_ZH_NUMBER})\s*(?:(?P<zh_day>[天日])|[个個]?\s*(?P<zh_wk>{_ZH_WEEK})|[个個]\s*(?P<zh_mo>月))\s*(?:以)?前",
            rf"{_ZH_NOT_AFTER}(?P<zh_rel>上上|上|这|這|本)\s*[个個]?\s*"
            rf"(?:{_ZH_WEEKDAY}|(?P<zh_weekend>{_ZH_WEEK}末)|(?P<zh_week>{_ZH_WEEK}){_ZH_NOT_WEEK_WORD})",
            rf"{_ZH_NOT_AFTER}(?P<zh_last_mo>上上|上)\s*[个個]?\s*月(?:\s*(?P<zh_mo_day>\d{{1,2}})\s*[日号號])?",
            r"(?P<zh_part>今早|今晚|今夜|昨晚|昨夜|昨日|(?<![目以之提事当當眼从從先])前晚(?!上))",
        ]
    ),
    re.I,
)
_ZH_PARTS = {"今早": 0, "今晚": 0, "今夜": 0, "昨晚": 1, "昨夜": 1, "昨日": 1, "前晚": 2}


def _may_count_back(text: str) -> bool:
    """False only when no pattern of ``_BACK`` can match (a substring test, far cheaper)."""
    if any(c in text for c in "前上这這本今昨") or not _FOLDS_TO_ASCII.isdisjoint(text):
        return True
    low = text.lower()
    return any(w in low for w in ("ago", "last", "past", "this", "tonight", "earlier"))


def _zh_number(text: str) -> int:
    """``"3"``, ``"三"``, ``"十二"``, ``"二十"``, ``"两"``: the number (0 where it is not one)."""
    if text.isdigit():
        return int(text)
    if "十" not in text:
        return _ZH_DIGITS.get(text, 0) if len(text) == 1 else 0
    tens, _, ones = text.partition("十")
    if (
        len(tens) > 1
        or len(ones) > 1
        or (tens and tens not in _ZH_DIGITS)
        or (ones and ones not in _ZH_DIGITS)
    ):
        return 0
    return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[ones] if ones else 0)


def _minus_months(day: dt.date, n: int) -> tuple[int, int]:
    """The (year, month) ``n`` months before ``day``'s."""
    index = day.year * 12 + day.month - 1 - n
    return index // 12, index % 12 + 1


def _count_back(g: dict[str, str], now: dt.date) -> tuple[list[dt.date], list[tuple[int, int]]]:
    """The days and months one match of ``_BACK`` (its groups ``g``, "" where unmatched) names,
    counted back from ``now``."""
    days: list[dt.date] = []
    months: list[tuple[int, int]] = []
    monday = now - dt.timedelta(days=now.weekday())
    if g["en_n"] or g["zh_n"]:
        n = _EN_NUMBERS.get(" ".join(g["en_n"].lower().split())) if g["en_n"] else None
        n = n if n is not None else _zh_number(g["zh_n"] or g["en_n"])
        unit = (g["en_unit"] or "").lower()
        if n <= 0 or n > 400:
            return days, months
        if unit == "day" or g["zh_day"]:
            days.append(now - dt.timedelta(days=n))
        elif unit == "week" or g["zh_wk"]:
            spread = 1 if n == 1 else 2
            days += [now - dt.timedelta(days=7 * n + d) for d in range(-spread, spread + 1)]
        elif n <= 120:
            months.append(_minus_months(now, n))
    elif g["en_wd"]:
        back = (now.weekday() - _WEEKDAYS_EN.index(g["en_wd"].lower())) % 7 or 7
        day = now - dt.timedelta(days=back)
        days += [day, day - dt.timedelta(days=7)] if day >= monday else [day]
    elif g["en_weekend"] or g["zh_weekend"]:
        weeks = 2 if g["zh_rel"] == "上上" else 1
        if g["zh_rel"] in ("这", "這", "本"):
            weeks = 0
        sat = monday - dt.timedelta(days=7 * weeks - 5)
        days += [d for d in (sat, sat + dt.timedelta(days=1)) if d <= now]
    elif g["en_week"] or g["zh_week"]:
        weeks = {"上上": 2, "上": 1}.get(g["zh_rel"] or "上", 0)
        start = monday - dt.timedelta(days=7 * weeks)
        days += [d for d in (start + dt.timedelta(days=i) for i in range(7)) if d <= now]
    elif g["zh_wd"] or g["zh_wd2"]:  # a weekday of last week, of the week before, of this week
        mark = g["zh_wd"] or g["zh_wd2"]
        index = 6 if mark in "日天7" else int(mark) - 1 if mark.isdigit() else "一二三四五六".index(mark)
        weeks = {"上上": 2, "上": 1}.get(g["zh_rel"], 0)
        day = monday - dt.timedelta(days=7 * weeks - index)
        if day <= now:
            days.append(day)
    elif g["en_month"]:
        months.append(_minus_months(now, 1))
    elif g["zh_last_mo"]:
        year, month = _minus_months(now, 2 if g["zh_last_mo"] == "上上" else 1)
        if g["zh_mo_day"]:
            with contextlib.suppress(ValueError):
                days.append(dt.date(year, month, int(g["zh_mo_day"])))
        else:
            months.append((year, month))
    elif g["en_tonight"]:
        days.append(now)
    elif g["en_last_night"]:
        days.append(now - dt.timedelta(days=1))
    elif g["zh_part"]:
        days.append(now - dt.timedelta(days=_ZH_PARTS[g["zh_part"]]))
    return days, months


def counted_back(
    text: str, now: dt.date, *, years: tuple[int, ...] = ()
) -> tuple[list[dt.date], list[tuple[int, int]], list[tuple[int, int]]]:
    """What ``text`` names by counting back from ``now``: days ("last Tuesday", "three days ago",
    "two weeks ago", "last weekend", "上周三", "三天前", "两个星期前", "上週末", "昨晚"), months
    ("last month", "3 months ago", "上个月") and the spans of ``text`` that said them.

    "last Tuesday" is the latest Tuesday before today, and the one a week earlier as well when
    that latest one is in this week (people mean either); 上周三 is last week's Wednesday. A
    week ago is a day either side of seven days back, two weeks or more two days either side.
    Nothing is counted back when ``text`` names a calendar date (resolved against ``years``):
    "what did Joanna finish last Friday, as she said on 23 January?" asks about what was said on
    the 23rd, and last Friday's memories would only crowd it.
    """
    days: list[dt.date] = []
    months: list[tuple[int, int]] = []
    spans: list[tuple[int, int]] = []
    if not _may_count_back(text) or dates_in(text, years=years):  # (no now: nothing counted there)
        return days, months, spans
    for m in _BACK.finditer(text):
        try:
            named = _count_back({k: v or "" for k, v in m.groupdict().items()}, now)
        except OverflowError:  # before year 1
            continue
        if named[0] or named[1]:
            days += named[0]
            months += named[1]
            spans.append(m.span())
    return days, months, spans


#: What every calendar-date pattern needs (the same digits as their ``\d``): most queries have none.
_ANY_DIGIT = re.compile(r"\d")


def dates_in(
    text: str, *, now: dt.date | None = None, years: tuple[int, ...] = (), count_back: bool = True
) -> list[dt.date]:
    """Calendar days named in ``text``: "May 4th", "4 May 2023", "2023-05-04", "5月4日", "昨天",
    and (``count_back``) "last Tuesday", "two weeks ago", "上周三" (see :func:`counted_back`).

    A date without a year is resolved against ``years`` (the years the user's memories span,
    latest first) or else ``now``'s year; relative words ("yesterday", "昨天") need ``now``.
    Impossible dates (February 30th) are ignored.
    """
    found: list[dt.date] = []
    default_years = years or ((now.year,) if now else ())

    def add(year: int | None, month: int, day: int) -> None:
        for y in [year] if year else default_years:
            with contextlib.suppress(ValueError):
                found.append(dt.date(y, month, day))

    patterns = _ANY_DIGIT.search(text) is not None
    for m in _ISO.finditer(text) if patterns else ():
        add(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    for m in _EN_MONTH_DAY.finditer(text) if patterns else ():
        add(int(m.group(3)) if m.group(3) else None, _month(m.group(1)), int(m.group(2)))
    for m in _EN_DAY_MONTH.finditer(text) if patterns else ():
        add(int(m.group(3)) if m.group(3) else None, _month(m.group(2)), int(m.group(1)))
    for m in _ZH_DATE.finditer(text) if patterns else ():
        add(int(m.group(1)) if m.group(1) else None, int(m.group(2)), int(m.group(3)))
    if now is not None and _may_name_a_relative_day(text):
        for m in _RELATIVE_RE.finditer(text):
            with contextlib.suppress(OverflowError):  # "yesterday" on the first day of year 1
                found.append(now - dt.timedelta(days=_RELATIVE[m.group(0).lower()]))
    if now is not None and count_back:
        found += counted_back(text, now, years=years)[0]
    return list(dict.fromkeys(found))


_FULL_MONTHS = "|".join(names[0] for names in _MONTH_NAMES)


def _may_name_a_month(text: str) -> bool:
    """False only when no pattern of :func:`months_in` can match: each needs a full month name
    or 月, and most queries have neither (a substring test is ten times cheaper than the patterns)."""
    if "月" in text or not _FOLDS_TO_ASCII.isdisjoint(text):
        return True
    low = text.lower()
    return any(names[0] in low for names in _MONTH_NAMES)


_EN_IN_MONTH = re.compile(
    rf"\b(?:in|during|of|since|by|early|late|mid|end of)\s+({_FULL_MONTHS})\b(?:,?\s*(\d{{4}}))?", re.I
)
_EN_MONTH_YEAR = re.compile(rf"\b({_FULL_MONTHS}),?\s+(\d{{4}})\b", re.I)
_ZH_MONTH = re.compile(r"(?:(\d{4})\s*年\s*)?(\d{1,2})\s*月(?!\s*\d{1,2}\s*[日号號])")


def months_in(text: str, *, years: tuple[int, ...] = (), now: dt.date | None = None) -> set[str]:
    """Months ``text`` names without a day, as ``YYYY-MM``: "in July", "July 2023", "2023年6月",
    and with ``now`` "last month", "3 months ago", "上个月".

    Only full month names count in English, after a preposition or before a year ("I may" is
    not May). A month without a year is resolved against ``years`` (the years the memories span).
    """
    found: set[tuple[int | None, int]] = set()
    if now is not None:
        found.update(counted_back(text, now, years=years)[1])
    if not _may_name_a_month(text):
        return {f"{y:04d}-{month:02d}" for y, month in found if y}
    for m in _EN_IN_MONTH.finditer(text):
        found.add((int(m.group(2)) if m.group(2) else None, _month(m.group(1))))
    for m in _EN_MONTH_YEAR.finditer(text):
        found.add((int(m.group(2)), _month(m.group(1))))
    for m in _ZH_MONTH.finditer(text):
        if 1 <= int(m.group(2)) <= 12:
            found.add((int(m.group(1)) if m.group(1) else None, int(m.group(2))))
    return {f"{y:04d}-{month:02d}" for year, month in found for y in ([year] if year else years)}


MAX_USER_NAME = 200


#: Characters that show as nothing (fillers and blanks that are letters or symbols to Unicode):
#: a name with one of them looks like a name without it.
_INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u2800\u034f\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f")
#: A run of space separators (no-break, ideographic... spaces): one space in a user name. Tabs
#: and line breaks inside a name are control characters, refused.
_SPACES = re.compile(r"[^\S\t\n\r\x0b\x0c\x1c-\x1f\x85\u2028\u2029]+")
#: Joiners, allowed between two visible characters (emoji sequences, Persian and Indic names).
_JOINERS = frozenset("\u200c\u200d")


def validate_user(name: object) -> str:
    """The user name as the store keys it, or :class:`InvalidInputError` saying what is wrong.

    The one rule for user names, applied by every way in (add, search, delete, export, import,
    stats, the web login, the MCP server, the LangChain adapters): Unicode NFC, surrounding
    whitespace stripped and inner runs of whitespace made one space, so names that look the
    same are the same user (``'Kim '`` is ``Kim``; NFD ``Zoë`` is NFC ``Zoë``; a no-break space
    is a space). Refused, because
    they could only make a second user that looks like another: an empty name, control or
    unassigned characters, format characters (zero-width spaces, bidirectional overrides;
    joiners only between two visible characters), characters that show as nothing (U+3164,
    U+2800..., a variation selector after a letter), a name of no letter, digit, punctuation or symbol, a name that starts with a
    combining mark, and names over :data:`MAX_USER_NAME` characters. Names are opaque keys
    otherwise (they never become paths). Users stored under a name that breaks the rule
    (before it existed) stay reachable by their exact name (:meth:`MemoryBank.user`).
    """
    if not isinstance(name, str):
        raise InvalidInputError(f"user name must be a string, got {type(name).__name__}")
    key = _SPACES.sub(" ", unicodedata.normalize("NFC", name).strip())
    if not key:
        raise InvalidInputError("user name is empty; give the name of the person whose memories these are")
    if len(key) > MAX_USER_NAME:
        raise InvalidInputError(f"user name is {len(key)} characters long; the limit is {MAX_USER_NAME}")
    bad = [
        c
        for i, c in enumerate(key)
        if unicodedata.category(c) in ("Cc", "Cs", "Co", "Cn", "Zl", "Zp")  # Zl/Zp: U+2028/2029, line breaks
        or c in _INVISIBLE
        or (unicodedata.category(c) == "Cf" and not (c in _JOINERS and _between_visible(key, i)))
        or (_is_selector(c) and not _selects(key, i))
    ]
    if bad:
        raise InvalidInputError(
            f"user name {name!r} contains invisible, control or invalid characters "
            f"({', '.join(f'U+{ord(c):04X}' for c in bad[:3])}); use visible characters only"
        )
    if unicodedata.category(key[0]) in ("Mn", "Me", "Mc"):
        raise InvalidInputError(f"user name {name!r} starts with a combining mark; start it with a letter")
    if not has_visible(key):
        raise InvalidInputError(
            f"user name {name!r} has no visible letter, digit or symbol; give a name that can be read"
        )
    return key


def _is_selector(c: str) -> bool:
    """A variation selector (U+FE00-FE0F, U+E0100-E01EF): it picks a glyph for the character
    before it, and after a letter shows as nothing."""
    return "\ufe00" <= c <= "\ufe0f" or "\U000e0100" <= c <= "\U000e01ef"


def _selects(text: str, i: int) -> bool:
    """Whether the variation selector ``text[i]`` picks a glyph that shows: after an emoji or
    other symbol (``So``) or a math symbol (``Sm``), a Han ideograph (ideographic variants: the
    only place for U+E0100-E01EF), or a keycap's digit, ``#`` or ``*`` followed by U+20E3; not
    after a letter, a currency sign or a modifier, where it shows as nothing."""
    if i == 0:
        return False
    before = text[i - 1]
    if unicodedata.name(before, "").startswith("CJK"):  # ideographic and standardized variants
        return True
    if text[i] > "\ufe0f":  # U+E0100-E01EF select ideographic variants only
        return False
    if unicodedata.category(before) in ("So", "Sm"):  # emoji and text presentation, math variants
        return True
    return before in "0123456789#*" and text[i + 1 : i + 2] == "\u20e3"


def _between_visible(text: str, i: int) -> bool:
    """Whether ``text[i]`` (a joiner) stands between two visible, non-space characters."""
    return (
        0 < i < len(text) - 1
        and not text[i - 1].isspace()
        and not text[i + 1].isspace()
        and unicodedata.category(text[i - 1])[0] not in "CZ"
        and unicodedata.category(text[i + 1])[0] not in "CZ"
    )


def user_key(name: str) -> str | None:
    """The name :func:`validate_user` makes of ``name``, or ``None`` where it refuses it."""
    try:
        return validate_user(name)
    except InvalidInputError:
        return None


def same_user(a: str, b: str) -> bool:
    """Whether names ``a`` and ``b`` name the same user under the user-name rule: a user stored
    by an older version under a form the rule changes (``"Zoe\u0308"``) is the user the rule's
    form (``"Zo\u00eb"``) finds, and a comparison of the two spellings must say so."""
    return a == b or (user_key(a) or a.strip()) == (user_key(b) or b.strip())


_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_DAY_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]")


def has_visible(text: str) -> bool:
    """Whether ``text`` shows anything: a letter, digit, punctuation mark or symbol (emoji
    too). Spaces, control and format characters alone (a zero-width space) show nothing, nor
    do the fillers and blanks that Unicode counts as letters or symbols (U+3164, U+2800)."""
    return any(unicodedata.category(c)[0] in "LNPS" and c not in _INVISIBLE for c in text)


def parse_day(value: str, what: str = "date") -> str:
    """Validate a day, ``YYYY-MM-DD``; a full ISO 8601 time (``2023-05-04T18:30``) gives its day.

    Only these forms are accepted: other ISO spellings (``20230504``, ``2023-W18-4``) and times
    that do not exist (``2023-05-04T25:00``) are refused rather than read as some day.
    """
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string like 2023-05-04, got {type(value).__name__}")
    v = value.strip()
    try:
        if _DAY.fullmatch(v):
            return dt.date.fromisoformat(v).isoformat()
        if _DAY_TIME.match(v):
            return dt.datetime.fromisoformat(v).date().isoformat()
    except ValueError:
        pass
    raise InvalidInputError(f"{what} {value!r} is not a valid date; use YYYY-MM-DD (e.g. 2023-05-04)")


def canonical_day(value: str, what: str = "day") -> str:
    """A day key exactly as stored and exported: ``YYYY-MM-DD`` and nothing else.

    Memory files key their days by date; accepting ``2023-05-04T00:00`` beside ``2023-05-04``
    would make two keys of one day, so a key must already be in the canonical form.
    """
    day = parse_day(value, what)
    if value != day:
        raise InvalidInputError(f"{what} {value!r} is not in the form YYYY-MM-DD; write it as {day!r}")
    return day


#: Longest text accepted in one field (characters); longer text is an input error, not a silent cut.
MAX_TEXT = 1_000_000


def check_text(value: object, what: str, *, allow_empty: bool = False) -> str:
    """Return ``value`` if it is storable text, else raise :class:`InvalidInputError` naming the
    problem: not a string, empty (nothing visible), over :data:`MAX_TEXT` characters, a NUL character, or a lone
    surrogate (not Unicode: it cannot be written as UTF-8). Used by every write path alike."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be text, got {type(value).__name__}")
    if not allow_empty and not has_visible(value):  # a zero-width space alone shows nothing
        raise InvalidInputError(f"{what} is empty; give some text")
    if len(value) > MAX_TEXT:
        raise InvalidInputError(f"{what} is {len(value):,} characters; the limit is {MAX_TEXT:,}")
    if "\x00" in value:
        raise InvalidInputError(f"{what} contains a NUL character; remove it")
    check_unicode(value, what)
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_unicode(value: str, what: str) -> str:
    """Refuse a lone surrogate (e.g. JSON's ``"\\ud800"`` or undecodable bytes on a command line)."""
    m = _SURROGATE.search(value)
    if m:
        raise InvalidInputError(
            f"{what} contains a lone surrogate {m.group(0)!r} at position {m.start()} (not valid "
            "Unicode); fix the text's encoding"
        )
    return value


def parse_time(value: str, what: str = "time") -> dt.datetime:
    """Validate an ISO 8601 date or date-time."""
    try:
        return dt.datetime.fromisoformat(value.strip())
    except (ValueError, AttributeError) as e:
        raise InvalidInputError(
            f"{what} {value!r} is not a valid ISO 8601 time; use e.g. 2023-05-04T18:30:00 or 2023-05-04"
        ) from e
