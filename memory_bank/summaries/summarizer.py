"""The :class:`Summarizer`: making the due summary layers of a user, robustly.

A day's two layers (event summary, personality) are due once the day is over and they are
missing or stale; stale layers of a day with no turns left are deleted. The two global layers
are remade from the dailies whenever those changed (a fingerprint of their sources is stored in
the layer's ``extra``). Material that does not fit the model's context is summarised in chunks
that are then combined, so the instruction is never cut. Every LLM call is retried with backoff;
a layer that still fails is logged, reported and left due for the next run: raw turns are never
touched.
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime as dt
import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.exceptions import OutputParserException

from memory_bank.errors import UserNotFoundError
from memory_bank.llm import context_window, count_tokens
from memory_bank.model_lock import PreemptedError
from memory_bank.records import Memory, MemoryKind
from memory_bank.summaries.chains import (
    COPY,
    build_chain,
    build_prompt,
    copies_material,
    prompt_inputs,
    retry_kind,
)
from memory_bank.summaries.chunking import Chunker, Unit
from memory_bank.summaries.config import SummaryConfig
from memory_bank.summaries.errors import (
    ContextTooSmallError,
    SummaryError,
    SummaryStoppedError,
    SummaryTimeoutError,
)
from memory_bank.summaries.prompts import Task, language_pack
from memory_bank.summaries.state import (
    DAILY_KINDS,
    GLOBAL_KINDS,
    SOURCE_KIND,
    daily_state,
    day_turns,
    due_days,
    fingerprint,
    global_sources,
    layer_due,
    to_date,
)

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from memory_bank.bank import MemoryBank

logger = logging.getLogger(__name__)

#: kind -> (task for the material, task that combines partial answers)
_TASKS = {
    MemoryKind.DAILY_SUMMARY: (Task.DAILY_EVENTS, Task.MERGE_EVENTS),
    MemoryKind.DAILY_PERSONALITY: (Task.DAILY_PERSONALITY, Task.MERGE_PERSONALITY),
    MemoryKind.GLOBAL_SUMMARY: (Task.GLOBAL_EVENTS, Task.GLOBAL_EVENTS),
    MemoryKind.GLOBAL_PORTRAIT: (Task.GLOBAL_PORTRAIT, Task.GLOBAL_PORTRAIT),
}
_TOKENS_PER_MESSAGE = 8  # chat-template tokens around each message


@dataclasses.dataclass
class Failure:
    """A layer that could not be made this run (it stays due)."""

    kind: str
    date: str | None
    error: str


@dataclasses.dataclass
class CallRecord:
    """One LLM call (one attempt) of a run: what it cost and how it ended, so a slow run can be
    read call by call (``scripts/bench_summarize.py`` prints them)."""

    task: str
    attempt: int
    prompt_tokens: int
    output_tokens: int
    seconds: float
    #: ``ok``, ``copy`` (kept only as a last resort) or the error that refused the answer
    outcome: str


@dataclasses.dataclass
class SummaryReport:
    """What one :meth:`Summarizer.summarize_user` run did."""

    user: str
    today: str
    days: list[str] = dataclasses.field(default_factory=list)
    written: list[str] = dataclasses.field(default_factory=list)
    deleted: list[str] = dataclasses.field(default_factory=list)
    failed: list[Failure] = dataclasses.field(default_factory=list)
    changed: list[str] = dataclasses.field(default_factory=list)
    #: tasks whose answer only copied part of their material (kept for want of a better one)
    weak: list[str] = dataclasses.field(default_factory=list)
    calls: int = 0
    seconds: float = 0.0
    #: every LLM call of the run, in order
    attempts: list[CallRecord] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def shorten(text: str, limit: int | None) -> str:
    """``text`` cut to about ``limit`` characters at a sentence end (else a space), marked with "…"."""
    text = " ".join(text.split())
    if not limit or len(text) <= limit:
        return text
    cut = text[:limit]
    ends = [i + 1 for i, ch in enumerate(cut) if ch in ".!?。！？"]
    if ends and ends[-1] >= limit // 3:
        return cut[: ends[-1]] + " …"
    space = cut.rfind(" ")
    return (cut[:space] if space >= limit // 3 else cut).rstrip() + "…"


def combine_reports(reports: Sequence[SummaryReport]) -> SummaryReport:
    """One report for several runs of one user (the finished days, then today and the globals)."""
    out = SummaryReport(user=reports[0].user, today=reports[0].today)
    for r in reports:
        for name in ("days", "written", "deleted", "failed", "changed", "weak", "attempts"):
            getattr(out, name).extend(getattr(r, name))
        out.calls += r.calls
        out.seconds = round(out.seconds + r.seconds, 3)
    return out


class _TokenCount(BaseCallbackHandler):
    """Counts the streamed pieces of one call (one per token with llama.cpp and OpenAI servers),
    and ends the call at once when the summariser is stopped (the error propagates)."""

    raise_error = True

    def __init__(self, stop: threading.Event) -> None:
        self.tokens = 0
        self.stop = stop

    def on_llm_new_token(self, token: Any, **kwargs: Any) -> None:
        self.tokens += 1
        if self.stop.is_set():
            raise SummaryStoppedError("the summariser was stopped")


class _Deadline(BaseCallbackHandler):
    """Stops a streaming call once its time is up (the error propagates: ``raise_error``)."""

    raise_error = True

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def on_llm_new_token(self, token: Any, **kwargs: Any) -> None:
        if time.monotonic() > self.deadline:
            raise SummaryTimeoutError(f"the LLM call ran past {self.seconds:g} s (call_timeout_s)")


def _streamed(chain: Any, inputs: dict[str, str], config: Any) -> str:
    return "".join(chain.stream(inputs, config=config))


def _bounded(call: Callable[[], str], seconds: float | None, stop: threading.Event) -> str:
    """``call()`` on a thread of its own, given up after ``seconds`` (``call_timeout_s``) or
    when the summariser is stopped: :class:`_Deadline` sees only streamed tokens, so a server
    that accepts the call and never answers held the summariser, ``/summarize`` and the app's
    exit for as long as the connection stayed open. A call given up on ends on its own thread
    (a daemon: it never holds the process open)."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["answer"] = call()
        except BaseException as e:  # handed to the caller
            box["error"] = e
        finally:
            done.set()

    # In this thread's context: a background call (model_lock.background_calls) stays one.
    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(run,), name="memorybank-summary-call", daemon=True).start()
    deadline = time.monotonic() + seconds if seconds else None
    while not done.wait(0.05):
        if stop.is_set():
            raise SummaryStoppedError("the summariser was stopped")
        if deadline is not None and time.monotonic() > deadline:
            raise SummaryTimeoutError(f"the LLM call got no answer within {seconds:g} s (call_timeout_s)")
    if "error" in box:
        raise box["error"]
    return str(box["answer"])


def _model_label(model: object) -> str:
    for attr in ("model_name", "model", "model_path"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return Path(value).name if attr == "model_path" else value
    return type(model).__name__


class Summarizer:
    """Makes a user's daily and global summary layers with any LangChain chat model.

    Args:
        bank: the :class:`~memory_bank.MemoryBank` to read turns from and store layers in.
        chat_model: any ``BaseChatModel`` (see :func:`memory_bank.llm.build_chat_model`).
        language: ``en`` or ``zh`` (prompts and output); default: the config's, else the bank's.
        config: a :class:`SummaryConfig`.
        sleep: waits between retries (inject a no-op in tests).

    Example::

        summarizer = Summarizer(bank, build_chat_model("llamacpp"), language="en")
        report = summarizer.summarize_user("Emily")        # every finished day, then the globals
        bank.profile("Emily")["global_portrait"]
    """

    def __init__(
        self,
        bank: MemoryBank,
        chat_model: BaseChatModel,
        language: str | None = None,
        *,
        config: SummaryConfig | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.bank = bank
        self.chat_model = chat_model
        self.config = config or SummaryConfig()
        self.language = language or self.config.language or bank.config.language
        self.pack = language_pack(self.language)
        self.chains = {
            task: build_chain(
                task,
                chat_model.bind(max_tokens=self.answer_tokens(task)),  # type: ignore[arg-type]
                self.pack.code,
                max_chars=self.config.max_summary_chars,
                min_words=self.config.min_words,
            )
            for task in Task
        }
        self._sleep = sleep
        self._chunker = Chunker(self._tokens)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        #: set by :meth:`stop`: calls end at their next token, no new one starts
        self.stopped = threading.Event()

    def stop(self) -> None:
        """Stop making summaries (at shutdown): the call under way ends at its next token,
        every layer written so far is kept and the rest stay due for the next run."""
        self.stopped.set()

    # -- what is due --------------------------------------------------------------------------
    def due_days(self, user: str, today: dt.date | dt.datetime | str | None = None) -> list[str]:
        """Finished days (before ``today``, default the bank's clock) whose daily layers are
        missing or stale, oldest first. Unknown users have none."""
        return due_days(self.bank, user, today)

    # -- running ------------------------------------------------------------------------------
    def _user_lock(self, name: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(name, threading.Lock())

    def summarize_user(
        self,
        user: str,
        now: dt.date | dt.datetime | str | None = None,
        *,
        progress: Callable[[int], None] | None = None,
    ) -> SummaryReport:
        """Make every due daily layer of ``user`` (days before ``now``), then update the globals.

        Idempotent: done layers are skipped. Failures are in the report, never raised (except
        for an unknown user). ``progress(1)`` is called after each day and after the globals.
        """
        rec = self.bank.user(user)  # raises UserNotFoundError
        name = rec.name
        today = to_date(now, self.bank.clock)
        report = SummaryReport(user=name, today=today.isoformat())
        started = time.monotonic()
        with self._user_lock(name):
            turns, layers = daily_state(self.bank, name)
            if turns.user_id != rec.id:  # deleted and made anew since: another person's memories
                raise UserNotFoundError(f"user {name!r} was deleted while their summaries were being made")
            for (_kind, day), layer in sorted(layers.items(), key=lambda kv: (kv[0][1], kv[0][0].value)):
                if layer.stale and day not in turns:  # its day has no turns left: nothing to summarise
                    self.bank.delete_memory(name, layer.memory_id)
                    report.deleted.append(layer.memory_id)
            for day in sorted(turns):
                if day >= report.today:
                    continue
                kinds = [k for k in DAILY_KINDS if layer_due(layers.get((k, day)))]
                if kinds:
                    self._still(name, rec.id)
                    self._summarize_day(name, rec.id, day, turns[day], kinds, report)
                    if progress:
                        progress(1)
            self._summarize_globals(
                name, rec.id, report, dailies_changed=bool(report.written or report.deleted)
            )
            if progress:
                progress(1)
        report.seconds = round(time.monotonic() - started, 3)
        log = logger.warning if report.failed else logger.info
        log(
            "summaries of %r up to %s: %d layers written, %d deleted, %d failed, %d LLM calls in %.1f s",
            name, report.today, len(report.written), len(report.deleted), len(report.failed),
            report.calls, report.seconds,
        )  # fmt: skip
        return report

    def summarize_day(self, user: str, date: str, *, force: bool = True) -> SummaryReport:
        """(Re)make the daily layers of one day now, whether or not the day is over."""
        rec = self.bank.user(user)
        name = rec.name
        report = SummaryReport(user=name, today=self.bank.clock().date().isoformat())
        with self._user_lock(name):
            turns, layers = daily_state(self.bank, name)
            if date in turns and turns.user_id == rec.id:
                kinds = [k for k in DAILY_KINDS if force or layer_due(layers.get((k, date)))]
                self._summarize_day(name, rec.id, date, turns[date], kinds, report)
        return report

    def summarize_globals(self, user: str, *, force: bool = False) -> SummaryReport:
        """Update the global event summary and portrait from the daily layers."""
        rec = self.bank.user(user)
        report = SummaryReport(user=rec.name, today=self.bank.clock().date().isoformat())
        with self._user_lock(rec.name):
            self._summarize_globals(rec.name, rec.id, report, dailies_changed=force)
        return report

    # -- daily layers ---------------------------------------------------------------------------
    def _turn_text(self, m: Memory) -> str:
        when = ""
        if m.timestamp and "T" in m.timestamp:
            when = f"[{m.timestamp.split('T', 1)[1][:5]}] "
        text = when + self.pack.item.format(
            label=self.pack.user_label, text=m.query if m.query is not None else m.text
        )
        if m.response:
            reply = shorten(m.response, self.config.max_reply_chars)
            text += "\n" + self.pack.item.format(label=self.pack.ai_label, text=reply)
        return text

    def _summarize_day(
        self,
        user: str,
        user_id: int,
        day: str,
        turns: list[Memory],
        kinds: Sequence[MemoryKind],
        report: SummaryReport,
    ) -> None:
        """Make the ``kinds`` of ``day`` from its ``turns``, for the user record ``user_id``.

        Each layer is written bound to the user record it was made for (a user deleted meanwhile
        gets nothing, nor does the next one of that name). A turn of the day deleted, edited or
        added between the check before the write and the write itself would be overwritten by a
        layer made without it, marked done: the turns are read again after the write, and a
        layer they no longer match is blanked, as the deletion would have blanked it."""
        if not turns:  # every turn of the day gone: nothing to summarise
            return
        source = fingerprint([(m.memory_id, m.text) for m in turns])
        units = [Unit(str(m.turn), str(m.turn), self._turn_text(m)) for m in turns]
        made = 0
        for kind in kinds:
            task, merge = _TASKS[kind]
            try:
                text = self._condense(task, merge, units, {"date": day}, report)
            except SummaryStoppedError:
                raise
            except Exception as e:  # reported and retried next run; chat goes on
                logger.warning("could not make the %s of %r for %s: %s", kind.value, user, day, e)
                report.failed.append(Failure(kind.value, day, f"{type(e).__name__}: {e}"))
                continue
            if self._day_source(user_id, day) != source:
                logger.info("turns of %r on %s changed while summarising; left for the next run", user, day)
                report.changed.append(f"{kind.value}:{day}")
                continue
            extra = {"source": source, "turns": len(turns), "model": _model_label(self.chat_model)}
            memory = self.bank.set_layer(user, kind, text, date=day, extra=extra, user_id=user_id)
            if self._day_source(user_id, day) != source:  # changed between the check and the write
                logger.info("turns of %r on %s changed as the %s was stored; blanked", user, day, kind.value)
                self.bank.storage.blank_layers(user_id, [day])
                report.changed.append(f"{kind.value}:{day}")
                continue
            report.written.append(memory.memory_id)
            made += 1
        if made == len(kinds):
            report.days.append(day)

    def _still(self, user: str, user_id: int) -> None:
        """Raise :class:`UserNotFoundError` unless ``user`` still names the record ``user_id``:
        a user forgotten during the run (and perhaps begun again) gets nothing more from it."""
        rec = self.bank.find_user(user)
        if rec is None or rec.id != user_id:
            raise UserNotFoundError(f"user {user!r} was deleted while their summaries were being made")

    def _day_source(self, user_id: int, day: str) -> str:
        return fingerprint([(m.memory_id, m.text) for m in day_turns(self.bank, user_id, day)])

    def _global_source(self, user_id: int, kind: MemoryKind) -> str:
        dailies = self.bank.storage.memories(user_id, [SOURCE_KIND[kind]], include_archived=True)
        return fingerprint(global_sources(dailies))

    # -- global layers ---------------------------------------------------------------------------
    def _summarize_globals(
        self, user: str, user_id: int, report: SummaryReport, *, dailies_changed: bool
    ) -> None:
        """Make the global layers that are due from the daily ones, for the user record
        ``user_id``; as for a day's (see :meth:`_summarize_day`), a layer whose sources changed
        as it was written is blanked."""
        self._still(user, user_id)
        for kind in GLOBAL_KINDS:
            rows = self.bank.storage.memories(user_id, [SOURCE_KIND[kind], kind], include_archived=True)
            existing = next((m for m in rows if m.kind is kind), None)
            if existing is not None and existing.hidden:  # hidden by the user: not remade until restored
                continue
            sources = global_sources([m for m in rows if m.kind is SOURCE_KIND[kind]])
            source = fingerprint(sources)
            if not sources:
                if existing is not None and existing.stale:  # made from content that is gone
                    self.bank.delete_memory(user, existing.memory_id)
                    report.deleted.append(existing.memory_id)
                continue
            stored = existing.extra.get("source") if existing is not None else None
            due = (
                existing is None
                or existing.stale
                or (stored is not None and stored != source)
                or (stored is None and dailies_changed)
            )
            if not due:
                continue
            task, merge = _TASKS[kind]
            first, last = sources[0][0], sources[-1][0]
            units = [Unit(d, d, self.pack.item.format(label=d, text=t)) for d, t in sources]
            variables = {"period": self.pack.period.format(first=first, last=last)}
            try:
                text = self._condense(task, merge, units, variables, report)
            except SummaryStoppedError:
                raise
            except Exception as e:  # reported and retried next run
                logger.warning("could not make the %s of %r: %s", kind.value, user, e)
                report.failed.append(Failure(kind.value, None, f"{type(e).__name__}: {e}"))
                continue
            if self._global_source(user_id, kind) != source:
                report.changed.append(kind.value)
                continue
            extra = {"source": source, "days": len(sources), "model": _model_label(self.chat_model)}
            memory = self.bank.set_layer(user, kind, text, date=last, extra=extra, user_id=user_id)
            if self._global_source(user_id, kind) != source:  # changed between the check and the write
                logger.info("the daily layers of %r changed as the %s was stored; blanked", user, kind.value)
                self.bank.storage.blank_layers(user_id, [])
                report.changed.append(kind.value)
                continue
            report.written.append(memory.memory_id)

    # -- fitting the context ---------------------------------------------------------------------
    def _tokens(self, text: str) -> int:
        return count_tokens(self.chat_model, text)

    def _output_tokens(self) -> int:
        """Tokens of one answer: the configured or the model's, at most ``max_output_tokens``."""
        value = self.config.output_tokens or getattr(self.chat_model, "max_tokens", None)
        tokens = value if isinstance(value, int) and value > 0 else self.config.default_output_tokens
        cap = self.config.max_output_tokens
        return min(tokens, cap) if cap else tokens

    def answer_tokens(self, task: Task) -> int:
        """The answer cap of ``task``: its ``task_output_tokens`` entry, at most :meth:`_output_tokens`.
        Fewer output tokens are most of a small model's time, and a summary needs few."""
        cap = self.config.task_output_tokens.get(task.value)  # type: ignore[call-overload]
        tokens = self._output_tokens()
        return min(tokens, cap) if cap else tokens

    def budget(self, task: Task, variables: dict[str, str]) -> int:
        """Tokens left for the material of one ``task`` call: the context minus the answer, the
        prompt around the material and a safety margin."""
        context = self.config.context_tokens or context_window(
            self.chat_model, self.config.default_context_tokens
        )
        sample = prompt_inputs(
            **{
                **variables,
                "part_note": self.pack.part_note.format(part=10, parts=10),
                "retry_note": max([self.pack.retry_note, *self.pack.retry_notes.values()], key=len),
            }
        )
        messages = build_prompt(task, self.pack.code).format_messages(**sample)
        overhead = sum(self._tokens(str(m.content)) + _TOKENS_PER_MESSAGE for m in messages)
        room = int(context or 0) - self.answer_tokens(task) - overhead - self.config.safety_tokens
        cap = self.config.max_input_tokens
        return min(room, cap) if cap else room

    def _condense(
        self,
        task: Task,
        merge: Task,
        units: list[Unit],
        variables: dict[str, str],
        report: SummaryReport,
        depth: int = 0,
    ) -> str:
        """One call if the material fits, else summarise chunks and combine them (recursively)."""
        budget = self.budget(task, variables)
        content = "\n".join(u.text for u in units)
        if self._tokens(content) <= budget:
            return self._call(task, prompt_inputs(**variables, content=content), report)
        if budget < 2 * (self.answer_tokens(merge) + 16):  # two partial answers must fit to combine
            raise ContextTooSmallError(
                f"the model's context leaves only {budget} tokens for the material of {task.value}; "
                "use a model with a larger context (n_ctx / context_tokens) or lower max_tokens"
            )
        if depth >= self.config.max_depth:
            raise SummaryError(f"the material is still too long after {depth} combine rounds (max_depth)")
        chunks = self._chunker.pack(units, budget)
        partials = []
        for i, chunk in enumerate(chunks, 1):
            values = dict(variables, content="\n".join(u.text for u in chunk))
            if task in (Task.GLOBAL_EVENTS, Task.GLOBAL_PORTRAIT):
                label = self.pack.period.format(first=chunk[0].first, last=chunk[-1].last)
                values["period"] = label
            else:
                values["part_note"] = self.pack.part_note.format(part=i, parts=len(chunks))
                label = self.pack.part_label.format(part=i)
            answer = self._call(task, prompt_inputs(**values), report)
            partials.append(
                Unit(chunk[0].first, chunk[-1].last, self.pack.item.format(label=label, text=answer))
            )
        logger.info("%s: material split into %d chunks (budget %d tokens)", task.value, len(chunks), budget)
        return self._condense(merge, merge, partials, variables, report, depth + 1)

    def _prompt_tokens(self, task: Task, inputs: dict[str, str]) -> int:
        messages = build_prompt(task, self.pack.code).format_messages(**inputs)
        return sum(self._tokens(str(m.content)) + _TOKENS_PER_MESSAGE for m in messages)

    # -- one LLM call, retried -------------------------------------------------------------------
    def _call(self, task: Task, inputs: dict[str, str], report: SummaryReport) -> str:
        """One answer for ``task``, retried with backoff on errors, timeouts and junk. An answer
        that merely copies part of the material is retried too, but kept as a last resort. A
        background call that gave way to a chat reply (:class:`PreemptedError`) is redone as
        the same attempt once the model is free."""
        attempts = self.config.max_attempts
        error: Exception | None = None
        fallback: str | None = None
        attempt = 0
        while attempt < attempts:
            attempt += 1
            if self.stopped.is_set():
                raise SummaryStoppedError("the summariser was stopped")
            counter = _TokenCount(self.stopped)
            callbacks: list[BaseCallbackHandler] = [counter]
            if self.config.call_timeout_s:
                callbacks.append(_Deadline(self.config.call_timeout_s))
            config: Any = {"callbacks": callbacks, "run_name": f"memorybank.{task.value}"}
            report.calls += 1
            if attempt > 1:  # say what was wrong: the same prompt again mostly gets the same answer
                inputs = {
                    **inputs,
                    "retry_note": self.pack.retry_notes.get(retry_kind(error) or "", self.pack.retry_note),
                }
            started = time.monotonic()
            outcome = "ok"
            try:
                # stream(), not invoke(): every model that can stream does, so the deadline
                # callback sees tokens and can stop a runaway call; the parser yields once.
                answer = _bounded(
                    functools.partial(_streamed, self.chains[task], inputs, config),
                    self.config.call_timeout_s,
                    self.stopped,
                )
                if not copies_material(answer, inputs["content"]):
                    return answer
                fallback, outcome = answer, "copy"
                error = OutputParserException(f"the answer {COPY}: {answer[:120]!r}")
            except PreemptedError:
                outcome = "preempted"
            except SummaryStoppedError:
                outcome = "stopped"
                raise
            except Exception as e:  # timeouts, API errors and junk are all retried
                error = e
                outcome = f"{type(e).__name__}: {str(e)[:160]}"
            finally:
                report.attempts.append(
                    CallRecord(
                        task=task.value,
                        attempt=attempt,
                        prompt_tokens=self._prompt_tokens(task, inputs),
                        output_tokens=counter.tokens,
                        seconds=round(time.monotonic() - started, 3),
                        outcome=outcome,
                    )
                )
            if outcome == "preempted":  # not a failed attempt: the model waits for the reply to finish
                attempt -= 1
                continue
            logger.info(
                "%s attempt %d/%d failed: %s: %s", task.value, attempt, attempts, type(error).__name__, error
            )
            if isinstance(error, SummaryTimeoutError):  # the same call would run out again: later
                break
            if attempt < attempts and not isinstance(error, OutputParserException):
                # back off for API and server errors only; a junk answer is retried at once
                self._sleep(min(self.config.max_backoff_s, self.config.backoff_s * 2 ** (attempt - 1)))
        if fallback is not None:
            logger.warning("%s: every answer copied part of the material; keeping the last copy", task.value)
            report.weak.append(task.value)
            return fallback
        if isinstance(error, OutputParserException):  # every answer refused: say why, no LangChain links
            why = re.sub(r"\s*For troubleshooting, visit: \S+", "", str(error)).strip()
            raise SummaryError(
                f"{task.value} failed after {attempt} attempt(s): the model's answers were not usable ({why})"
            ) from error
        raise SummaryError(
            f"{task.value} failed after {attempt} attempt(s): {type(error).__name__}: {error}"
        ) from error


def summarizer_from_config(bank: MemoryBank, config: SummaryConfig) -> Summarizer:
    """A :class:`Summarizer` with the chat model ``config.llm`` names (its context window
    taken from the spec when the config sets none): what ``memorybank summarize`` and
    ``memorybank mcp --llm`` use."""
    chat_model, config = summary_model(config)
    return Summarizer(bank, chat_model, config.language, config=config)


def summary_model(config: SummaryConfig) -> tuple[Any, SummaryConfig]:
    """The chat model ``config.llm`` names, with ``config`` completed from its spec (the context
    window, when the config sets none). Its requests time out at ``call_timeout_s`` when the
    spec sets no shorter timeout: a call the summariser gives up at its deadline does not hold
    its connection and thread for the client's default ten minutes."""
    from memory_bank.llm import build_chat_model, parse_llm_spec

    spec = parse_llm_spec(config.llm)
    if spec.n_ctx and not config.context_tokens:
        config = config.model_copy(update={"context_tokens": spec.n_ctx})
    limit = config.call_timeout_s
    if limit and (spec.timeout is None or spec.timeout > limit):
        spec = spec.model_copy(update={"timeout": float(limit)})
    return build_chat_model(spec), config
