"""Why a reply failed or was not saved, in the chat's language.

The engine records a turn's ``error`` in English (the log reads it); each front end shows it
with :func:`localise`, which recognises the engine's own reasons by their templates here and
says them in Chinese where the chat is Chinese. The store's refusals a chat may meet
(:data:`memory_bank.errors.STORE_REASONS`: a full disk, a lock held too long, a read-only
file...) are said in Chinese too, inside a reason or alone. Technical details inside them (an
exception's text, a file name) are shown as they are.

>>> localise(reason("no_reply", seconds="4"), "zh")
'模型在 4 秒内没有回复（可能正忙或卡住了）'
>>> localise(reason("empty") + "; " + reason("not_saved", detail="disk is full"), "zh")
'模型返回了空回复；这一轮对话无法保存：disk is full'
>>> localise(reason("memory", detail=STORE_REASONS["full"].format(store="'/data/s.db'")), "zh")
"记忆出错：存放记忆库 '/data/s.db' 的磁盘满了，这次的改动一点也没有写入。请腾出一些空间再试"
"""

from __future__ import annotations

import re

from memory_bank.errors import STORE_REASONS

#: Each reason's English and Chinese wording; ``{detail}`` and ``{seconds}`` are filled in.
REASONS: dict[str, tuple[str, str]] = {
    "no_reply": (
        "the model gave no reply within {seconds} s (it may be busy or stuck)",
        "模型在 {seconds} 秒内没有回复（可能正忙或卡住了）",
    ),
    "no_more": (
        "the model gave no more of its reply within {seconds} s (it may be busy or stuck)",
        "模型在 {seconds} 秒内没有继续回复（可能正忙或卡住了）",
    ),
    "failed": ("the model failed: {detail}", "模型出错：{detail}"),
    "cut_off": (
        "the model's reply ended before it was finished (the connection closed early); try again",
        "模型的回复没有说完就中断了（连接提前关闭），请重试",
    ),
    "empty": ("the model returned an empty reply", "模型返回了空回复"),
    "stopped": ("the reply was stopped before the model said anything", "回复在模型开口之前就被停止了"),
    "reply_not_stored": ("the reply could not be stored: {detail}", "回复无法保存：{detail}"),
    "memory": ("memory error: {detail}", "记忆出错：{detail}"),
    "unexpected": ("unexpected error: {detail}", "意外错误：{detail}"),
    "not_saved": ("the turn could not be saved: {detail}", "这一轮对话无法保存：{detail}"),
    "summaries_off": (
        "summaries are off (started with --no-summaries, or memory_bank.summaries is not installed)",
        "总结功能未开启（启动时用了 --no-summaries，或没有安装 memory_bank.summaries）",
    ),
    "nothing_to_summarise": (
        "{user} has no memories to summarise yet; chat first",
        "{user} 还没有可以总结的记忆，先聊几句吧",
    ),
    "summary_failed": ("summarising failed: {detail}", "总结失败：{detail}"),
    # Refusals of a message or a name (the engine's, the budget's and the user-name rule's):
    "too_long": (
        "the message is too long for the model: the prompt needs about {base} tokens and the "
        "model's context holds {context}; send a shorter message",
        "消息太长，模型放不下：提示词大约需要 {base} 个词元，而模型的上下文只有 {context} 个；请发一条短一些的消息",
    ),
    "empty_message": ("the message is empty; type something to send", "消息是空的，请输入内容再发送"),
    "over_limit": ("the message is {n} characters; the limit is {limit}", "消息有 {n} 个字符，上限是 {limit}"),
    "surrogate": (
        "{what} contains a lone surrogate {char} at position {pos} (not valid Unicode); fix the text's encoding",
        "第 {pos} 个位置有无效的字符 {char}（不是有效的 Unicode）；请检查文本的编码",
    ),
    "name_empty": (
        "user name is empty; give the name of the person whose memories these are",
        "名字是空的；请输入这些记忆的主人的名字",
    ),
    "name_long": ("user name is {n} characters long; the limit is {limit}", "名字有 {n} 个字符，上限是 {limit}"),
    "name_invisible": (
        "user name {name} contains invisible, control or invalid characters ({codes}); use visible characters only",
        "名字 {name} 含有看不见的字符、控制字符或无效字符（{codes}）；请只用看得见的字符",
    ),
    "name_combining": (
        "user name {name} starts with a combining mark; start it with a letter",
        "名字 {name} 以组合符号开头；请以字母或汉字开头",
    ),
    "name_unreadable": (
        "user name {name} has no visible letter, digit or symbol; give a name that can be read",
        "名字 {name} 没有看得见的字母、数字或符号；请输入一个能读的名字",
    ),
    # Refusals of a memory's text and of the memory view's filter:
    "text_empty": ("{what} is empty; give some text", "内容是空的，请输入一些文字"),
    "text_long": ("{what} is {n} characters; the limit is {limit}", "内容有 {n} 个字符，上限是 {limit}"),
    "bad_date": (
        "{what} {value} is not a valid date; use YYYY-MM-DD (e.g. 2023-05-04)",
        "{value} 不是有效的日期；请用 YYYY-MM-DD 的格式（例如 2023-05-04）",
    ),
    "date_order": (
        "the date range ends ({end}) before it starts ({start}); swap them",
        "日期范围的结束（{end}）早于开始（{start}）；请把两个日期对调",
    ),
    "some_failed": (
        "{n} of the summaries failed and kept their previous text (first: {detail})",
        "有 {n} 项总结失败，保留了之前的内容（第一项：{detail}）",
    ),
}
_SEPARATOR = {"en": "; ", "zh": "；"}

#: The store's refusals (:data:`memory_bank.errors.STORE_REASONS`, same keys) in Chinese.
STORE_REASONS_ZH: dict[str, str] = {
    "full": "存放记忆库 {store} 的磁盘满了，这次的改动一点也没有写入。请腾出一些空间再试",
    "read_only": "记忆库 {store} 对当前用户是只读的：可以读取，但写入需要对记忆库目录及其文件有写权限",
    "locked": "另一个程序占用记忆库 {store} 超过了 {seconds} 秒的等待时间，这次的改动一点也没有写入。请再试一次，或关闭占用它的程序",
    "not_written": "无法写入记忆库 {store}：{detail}",
    "pg_connect": "无法连接 PostgreSQL 记忆库 {store}：{detail}",
    "pg_read": "读取 PostgreSQL 记忆库 {store} 失败：{detail}",
    "pg_write": "写入 PostgreSQL 记忆库 {store} 失败：{detail}",
    "pg_conflict": "写入 {store} 时反复发生冲突（{detail}），请再试一次",
    "pg_lost": "写入时与 {store} 的连接断开了（{detail}），可能已保存也可能没有：请用同一个记忆 id 重试，不会重复保存",
}


def reason(key: str, **values: str) -> str:
    """The English text of reason ``key`` (what a turn's ``error`` holds)."""
    return REASONS[key][0].format(**values)


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{(\w+)\}", template)
    # Fields before the last are the shortest that fit: a detail (an exception's text) may hold
    # any separator, the names before it rarely do.
    regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts))
    return re.compile(regex, re.S)


_PATTERNS = [(key, _pattern(en)) for key, (en, _zh) in REASONS.items()]
_STORE_PATTERNS = [(key, _pattern(en)) for key, en in STORE_REASONS.items()]
_NOT_SAVED = re.compile(r"(?P<head>.+?); (?P<tail>the turn could not be saved: .+)", re.S)


def localise(error: str, language: str) -> str:
    """``error`` (a turn's, made of :data:`REASONS`) in ``language``; text it does not
    recognise is kept as it is."""
    if language == "en":
        return error
    both = _NOT_SAVED.fullmatch(error)
    if both:  # a failed reply whose message could not be saved either
        return localise(both["head"], language) + _SEPARATOR.get(language, "; ") + localise(both["tail"], language)
    for key, pattern in _PATTERNS:
        found = pattern.fullmatch(error)
        if found:
            values = found.groupdict()
            if "detail" in values:  # often the store's own refusal
                values["detail"] = localise(values["detail"], language)
            return REASONS[key][1].format(**values)
    if language == "zh":
        for key, pattern in _STORE_PATTERNS:
            found = pattern.fullmatch(error)
            if found:
                return STORE_REASONS_ZH[key].format(**found.groupdict())
    return error
