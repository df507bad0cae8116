"""Event summaries and personality portraits (paper §2.1), made by any LangChain chat model.

Per user and day: an event summary and a personality/emotion reading; over all days: a global
event summary and a global portrait that also says how the companion should respond. They are
memory pieces: stored with their date via ``bank.set_layer`` (daily event summaries are indexed
for retrieval and forgotten like turns), read back by ``bank.layer(user, kind, date)`` and, for
the prompt, ``bank.profile(user)`` -> ``{"global_summary", "global_portrait"}``.

API::

    from memory_bank.llm import build_chat_model
    from memory_bank.summaries import RolloverScheduler, Summarizer, SummaryConfig

    summarizer = Summarizer(bank, build_chat_model("llamacpp"), language="en",  # or "zh"
                            config=SummaryConfig(max_attempts=3))
    summarizer.due_days(user, today=None) -> list[str]            # finished days needing layers
    summarizer.summarize_user(user, now=None) -> SummaryReport     # due days, then the globals
    summarizer.summarize_day(user, "2023-05-04"); summarizer.summarize_globals(user)

    scheduler = RolloverScheduler(summarizer)       # one background worker thread
    scheduler = background_summaries(bank, chat_model, "en")  # the same in one call
    scheduler.on_turn(user, turn_date) -> bool      # after each stored turn; queues on a new day
    scheduler.submit(user)                          # e.g. after deleting a memory, or at sign-in
    scheduler.submit(user, include_today=True)      # "summarise now", in the background
    scheduler.status(user) -> SummaryStatus         # idle/queued/running (done of total)/done/error
    scheduler.wait(timeout=None); scheduler.close()  # close(wait=False): stop now, keep what was written

``SummaryReport`` has ``days``, ``written`` / ``deleted`` (memory ids), ``failed`` (kind, date,
error), ``calls``, ``seconds``, ``ok`` and ``attempts`` (every LLM call: task, tokens in and out,
seconds, outcome). Background calls give way to chat replies on a shared local model
(:mod:`memory_bank.model_lock`). Chains on their own: :func:`build_chain` /
:func:`build_chains` (``prompt | chat model | SummaryParser``); prompts: :data:`LANGUAGES`.
CLI: ``memorybank summarize --store DIR [--user U] [--llm SPEC] [--language en|zh] [--now DATE]``.

Importing this package loads no model and calls no LLM.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_bank.summaries.chains import SummaryParser, build_chain, build_chains, build_prompt
    from memory_bank.summaries.config import SummaryConfig, load_summary_config
    from memory_bank.summaries.errors import (
        ContextTooSmallError,
        SummaryError,
        SummaryStoppedError,
        SummaryTimeoutError,
    )
    from memory_bank.summaries.prompts import LANGUAGES, LanguagePack, Task, language_pack
    from memory_bank.summaries.scheduler import RolloverScheduler, SummaryStatus, background_summaries
    from memory_bank.summaries.state import due_days
    from memory_bank.summaries.summarizer import (
        CallRecord,
        Failure,
        Summarizer,
        SummaryReport,
        combine_reports,
        summarizer_from_config,
    )

#: public name -> module; imported on first use, so ``memorybank`` commands that do not
#: summarise (and ``memory_bank.summaries.cli``) do not pay for the LangChain prompt stack.
_EXPORTS = {
    **dict.fromkeys(["SummaryParser", "build_chain", "build_chains", "build_prompt"], "chains"),
    **dict.fromkeys(["SummaryConfig", "load_summary_config"], "config"),
    **dict.fromkeys(
        ["ContextTooSmallError", "SummaryError", "SummaryStoppedError", "SummaryTimeoutError"], "errors"
    ),
    **dict.fromkeys(["LANGUAGES", "LanguagePack", "Task", "language_pack"], "prompts"),
    **dict.fromkeys(["RolloverScheduler", "SummaryStatus", "background_summaries"], "scheduler"),
    **dict.fromkeys(
        ["CallRecord", "Failure", "Summarizer", "SummaryReport", "combine_reports", "summarizer_from_config"],
        "summarizer",
    ),
    "due_days": "state",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "LANGUAGES",
    "CallRecord",
    "ContextTooSmallError",
    "Failure",
    "LanguagePack",
    "RolloverScheduler",
    "Summarizer",
    "SummaryConfig",
    "SummaryError",
    "SummaryParser",
    "SummaryReport",
    "SummaryStatus",
    "SummaryStoppedError",
    "SummaryTimeoutError",
    "Task",
    "background_summaries",
    "build_chain",
    "build_chains",
    "build_prompt",
    "combine_reports",
    "due_days",
    "language_pack",
    "load_summary_config",
    "summarizer_from_config",
]
