"""What the background summariser is doing, as one line of the page (EN/ZH).

The web app never waits for summaries: they are written on the library's background worker
(:class:`memory_bank.summaries.RolloverScheduler`) as days complete, when a user with
unsummarised days signs in (right after an import) and when "Summarize Memory Bank" is pressed.
A timer asks for :func:`summary_line` every few seconds and the page redraws only when the
state's ``version`` changed; a run that ends with failures also raises a toast once
(:func:`failure_toast`), so a failed call is shown where the user looks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from silicon_friend.web.safe_text import inert_markdown

if TYPE_CHECKING:
    from silicon_friend.web.texts import UITexts

#: Seconds between the page's checks of the background state.
POLL_SECONDS = 2.0
#: Characters of a failure's error shown in the line.
ERROR_CHARS = 160


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def reason(error: str, t: UITexts) -> str:
    """Why a layer failed, in words a user reads (a refused answer's kind, a timeout), else the
    error itself, shortened."""
    from memory_bank.summaries.chains import retry_kind

    kind = "timeout" if "SummaryTimeoutError" in error else retry_kind(error)
    return t.summary_reasons.get(kind or "", _short(error))


def _first_failure(report: Any, t: UITexts) -> str:
    f = report.failed[0]
    kind = t.kinds.get(f.kind, f.kind)
    return inert_markdown(f"{kind} {f.date or ''}".strip() + ": " + reason(f.error, t))


def summary_line(status: Any, t: UITexts) -> str:
    """The state as one Markdown line in ``t``'s language ("" when nothing was asked yet)."""
    if status is None or status.state == "idle":
        return ""
    if status.state == "queued":
        return t.summary_queued
    if status.state == "running":
        return t.summary_running.format(done=status.done, total=max(status.total, 1))
    if status.state == "error":
        return t.summary_error.format(error=inert_markdown(_short(status.error or "")))
    report = status.report
    if report is not None and report.failed:
        return t.summary_some_failed.format(n=len(report.failed), first=_first_failure(report, t))
    if report is not None and report.written:
        return t.summary_done.format(n=len(report.written), seconds=f"{report.seconds:.0f}")
    return t.summary_up_to_date


def failure_toast(status: Any, t: UITexts) -> str | None:
    """The toast for a run that just ended with failures (or broke), else ``None``."""
    if status is None:
        return None
    if status.state == "error" or (
        status.state == "done" and status.report is not None and status.report.failed
    ):
        return summary_line(status, t).removeprefix("⚠️ ")
    return None
