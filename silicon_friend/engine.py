"""The conversation engine: one reply is one LLM call, with MemoryBank around it. No UI code.

For each user message the engine retrieves the related memories, reads the user's global portrait
and event summary, fits them with the recent dialog into the model's context
(:mod:`silicon_friend.budget`), streams the reply, then stores the turn, reinforces the memories
the prompt used, and tells the day-rollover scheduler (which summarises finished days in the
background).

Failures never lose the user's words: if the model raises, times out or returns nothing, the
user's message is still stored, with an empty response (an empty response in the store always
means "no reply was given"), and the turn carries an ``error`` the UI shows.

Example::

    bank = MemoryBank.open("./memorybank_data")
    friend = SiliconFriend(bank, load_model(None), language="en")
    session = friend.start("Emily")
    for piece in friend.stream(session, "I adopted a cat today!"):
        print(piece, end="", flush=True)
    turn = session.turns[-1]        # .response, .error, .memory_id, .memories
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import logging
import threading
from collections.abc import Callable, Generator
from typing import Any

from langchain_core.language_models import BaseChatModel

from memory_bank.bank import MAX_TEXT, MemoryBank
from memory_bank.config import DEFAULT_HISTORY_WINDOW, DEFAULT_TOP_K
from memory_bank.errors import InvalidInputError, MemoryBankError, StoreError
from memory_bank.records import Memory, SearchResult
from memory_bank.retrieval.dialogue import chat_query
from memory_bank.text import check_unicode, has_visible, validate_user
from silicon_friend.budget import FittedPrompt, PromptPlan, fit_prompt
from silicon_friend.echo import strip_echo
from silicon_friend.errors import (
    ModelError,
    NoSessionError,
    PromptTooLongError,
    SessionEndedError,
    SiliconFriendError,
    SummaryFailedError,
)
from silicon_friend.models import (
    LoadedModel,
    call_params,
    clean_text,
    end_at_sentence,
    prepare_model,
    stream_text,
)
from silicon_friend.prompts import prompt_texts
from silicon_friend.reasons import reason

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class ChatSettings:
    """Generation and memory settings of a reply (the web app's sliders).

    ``top_k = 0`` retrieves no memories (a no-memory baseline); ``history_turns`` is the number
    of recent turns of this conversation kept in the prompt. The defaults are the bank config's
    (2 and the original's 7); :func:`silicon_friend.runtime.build_engine` takes them from the
    bank's config.
    """

    temperature: float = 0.7
    top_p: float = 0.9
    max_new_tokens: int = 256
    top_k: int = DEFAULT_TOP_K
    history_turns: int = DEFAULT_HISTORY_WINDOW

    def __post_init__(self) -> None:
        checks = (
            ("temperature", 0.0, 2.0),
            ("top_p", 0.0, 1.0),
            ("max_new_tokens", 1, 8192),
            ("top_k", 0, 50),
            ("history_turns", 0, 100),
        )
        for name, low, high in checks:
            value = getattr(self, name)
            if not isinstance(value, int | float) or not low <= value <= high:
                raise InvalidInputError(f"{name} must be between {low} and {high}, got {value!r}")
        self.max_new_tokens = int(self.max_new_tokens)
        self.top_k = int(self.top_k)
        self.history_turns = int(self.history_turns)

    def replace(self, **changes: Any) -> ChatSettings:
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


#: The mark of a memory the user added by hand (the memory view's "add"), not said in a chat.
ADDED_BY_HAND = "added_by_hand"


@dataclasses.dataclass(frozen=True)
class UsedMemory:
    """A memory the prompt of a reply carried: what the user sees under "memories used"."""

    memory_id: str
    kind: str
    date: str
    text: str
    score: float


@dataclasses.dataclass
class Turn:
    """One exchange of a session; ``error`` is set when no (complete) reply was given.

    ``used`` are the memories the prompt carried (best first); ``memory_id`` is set once the turn
    is committed to the store, and ``reinforced`` counts the used memories whose strength grew.
    A turn of a temporary chat is never stored (``memory_id`` stays ``None``).
    """

    query: str
    timestamp: str
    response: str = ""
    memory_id: str | None = None
    error: str | None = None
    stopped: bool = False
    used: list[UsedMemory] = dataclasses.field(default_factory=list)
    reinforced: int = 0
    temporary: bool = False
    resumed: bool = False  # read back from the store (a reload), not answered in this session
    unsaved: bool = False  # storing it failed: the front ends must not say it was saved
    cut: bool = False  # the reply reached its token cap and was kept up to its last full sentence
    error_before_save: str | None = None  # ``error`` before the failed save added its reason
    refused: bool = False  # unsaved, and the store refuses the turn itself: not tried again

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def marks(self) -> dict[str, Any] | None:
        """What the store keeps with the turn besides its words (a reload says it was stopped)."""
        return {"stopped": True} if self.stopped else None

    @property
    def memories(self) -> list[str]:
        """The ids of the memories the prompt carried."""
        return [m.memory_id for m in self.used]

    @property
    def stored(self) -> bool:
        return self.memory_id is not None


@dataclasses.dataclass
class Session:
    """One user's conversation (one browser tab, one terminal chat).

    ``returning`` says whether the user had memories when the session started. ``turns`` is the
    conversation shown on screen; "New Conversation" empties it but keeps every memory.
    ``temporary`` (a temporary chat, memory paused): replies neither read nor write memories.
    ``ended``: the user was forgotten ("Forget me"); the session answers nothing more, so a
    message still waiting cannot bring the deleted user back.
    """

    user: str
    returning: bool = False
    turns: list[Turn] = dataclasses.field(default_factory=list)
    temporary: bool = False
    ended: bool = False
    cancel: threading.Event = dataclasses.field(default_factory=threading.Event, repr=False, compare=False)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    def __deepcopy__(self, memo: dict[int, Any]) -> Session:
        # Thread primitives cannot be copied; a copy gets fresh ones.
        return Session(self.user, self.returning, copy.deepcopy(self.turns, memo), self.temporary, self.ended)

    def drop_memory(self, memory_id: str) -> None:
        """Forget a deleted memory in this session: its turn leaves the window (the prompt's
        recent turns) and it leaves every reply's "memories used"."""
        with self.lock:
            self.turns = [t for t in self.turns if t.memory_id != memory_id]
            for t in self.turns:
                t.used = [u for u in t.used if u.memory_id != memory_id]

    def apply_edit(self, memory: Memory) -> None:
        """Show an edited memory as it now is: its turn's words become the new ones (the
        prompt's recent turns, a regenerate, the chat on screen) and every "memories used"
        entry of it gives the new text; the old words are kept nowhere in the session."""
        with self.lock:
            for t in self.turns:
                if t.memory_id == memory.memory_id:
                    t.query, t.response = memory.query or memory.text, memory.response or ""
                t.used = [
                    dataclasses.replace(u, text=memory.text) if u.memory_id == memory.memory_id else u
                    for u in t.used
                ]

    def recent(self, n: int, *, temporary: bool = False) -> list[Turn]:
        """The last ``n`` answered turns (failed ones are left out of the prompt). A turn that
        may be remembered (not ``temporary``) is never prompted with a temporary chat's turns:
        their words would reach its reply, and so the store."""
        done = [t for t in self.turns if not t.failed and t.response and (temporary or not t.temporary)]
        return done[-n:] if n > 0 else []


class SiliconFriend:
    """SiliconFriend: a companion chatbot with MemoryBank long-term memory.

    Args:
        bank: the (thread-safe) memory bank, shared by every session.
        model: a :class:`~silicon_friend.models.LoadedModel` or any LangChain chat model.
        language: ``en`` or ``zh``: the prompt table used.
        settings: default :class:`ChatSettings`.
        summarizer / scheduler: from :mod:`memory_bank.summaries` (optional): summarise on request,
            and summarise finished days in the background.
        clock: "now" (default: the bank's clock).
    """

    def __init__(
        self,
        bank: MemoryBank,
        model: LoadedModel | BaseChatModel,
        *,
        language: str = "en",
        settings: ChatSettings | None = None,
        summarizer: Any = None,
        scheduler: Any = None,
        clock: Callable[[], dt.datetime] | None = None,
        first_token_timeout: float = 180.0,
        idle_timeout: float = 60.0,
    ) -> None:
        self.bank = bank
        self.model = model if isinstance(model, LoadedModel) else prepare_model(model)
        self.texts = prompt_texts(language)
        self.language = language
        self.settings = settings or ChatSettings()
        self.summarizer = summarizer
        self.scheduler = scheduler
        self.clock = clock or bank.clock
        self.first_token_timeout = first_token_timeout
        self.idle_timeout = idle_timeout

    @property
    def bot_name(self) -> str:
        return self.texts.bot_name

    # -- sessions -----------------------------------------------------------------------------
    def start(self, user: str) -> Session:
        """Open a session for ``user`` (validated); ``returning`` says whether they have memories."""
        user = validate_user(user)
        returning = False
        found = self.bank.find_user(user)  # one lookup: a user deleted meanwhile is simply new
        if found is not None:
            user = found.name
            returning = self.bank.has_memories(user)
        logger.info("session started for %r (%s)", user, "returning" if returning else "new")
        if returning:
            self.catch_up(user)
        return Session(user=user, returning=returning)

    def catch_up(self, user: str) -> bool:
        """Queue the summaries of ``user``'s finished days that have none yet (history just
        imported, or back after some days) in the background; True if a run was queued.
        Chat goes on meanwhile: on a shared local model its replies go first."""
        if self.scheduler is None or self.summarizer is None:
            return False
        try:
            if not self.summarizer.due_days(user, self.clock()):
                return False
        except MemoryBankError:
            logger.exception("could not check the due summaries of %r", user)
            return False
        return bool(self.scheduler.submit(user, self.clock()))

    def summarize_in_background(self, session: Session) -> bool:
        """"Summarize now" without waiting: every unsummarised day, today included, then the
        global layers, on the background worker (:meth:`summary_status` says how far it is).
        False if one is already queued for the user (it then includes today as well)."""
        if self.scheduler is None:
            raise SiliconFriendError(reason("summaries_off"))
        if not self.bank.has_user(session.user):
            raise InvalidInputError(reason("nothing_to_summarise", user=repr(session.user)))
        return bool(self.scheduler.submit(session.user, self.clock(), include_today=True))

    def summary_status(self, user: str) -> Any:
        """The background summariser's :class:`~memory_bank.summaries.SummaryStatus` for
        ``user``, or ``None`` when summaries are off."""
        return None if self.scheduler is None else self.scheduler.status(user)

    def resume(self, session: Session, turns: int) -> None:
        """Show the user's last ``turns`` stored turns as the conversation (after a page reload
        the chat picks up where it was); they are also the prompt's recent dialog. A note the
        user added by hand in the memory view (:data:`ADDED_BY_HAND`) was not said in the chat:
        it is not shown as a message left without a reply."""
        if turns <= 0 or not self.bank.has_user(session.user):
            return
        said = [m for m in self.bank.history(session.user) if not m.extra.get(ADDED_BY_HAND)]
        stored = said[-turns:]
        with session.lock:
            session.turns = [
                Turn(
                    query=m.query or m.text,
                    timestamp=m.timestamp or m.date,
                    response=m.response or "",
                    memory_id=m.memory_id,
                    resumed=True,
                    stopped=bool(m.extra.get("stopped")),
                )
                for m in stored
            ]

    def new_conversation(self, session: Session) -> None:
        """Empty the on-screen conversation; memories stay. A turn the store could not take is
        stored now if it can be, else it stays on screen, unsaved, to be stored with the next."""
        with session.lock:
            self._save_earlier(session, None)
            if any(turn.stored for turn in session.turns):
                session.returning = True  # the next conversation is not the first (it was told so)
            session.turns[:] = [turn for turn in session.turns if turn.unsaved]

    def store_unsaved(self, session: Session) -> bool:
        """Try once more to store the turns of ``session`` the store could not take (a front end
        about to close); whether every turn is stored now. A conversation whose user asked to
        be forgotten stores nothing (it would bring the user back)."""
        with session.lock:
            if not session.ended:
                self._save_earlier(session, None)
            return not any(turn.unsaved for turn in session.turns)

    def stop(self, session: Session) -> None:
        """Ask a reply being streamed in ``session`` to stop (the part shown so far is kept)."""
        session.cancel.set()

    # -- prompting ----------------------------------------------------------------------------
    def _related(
        self, session: Session, message: str, settings: ChatSettings, window: list[Turn], temporary: bool
    ) -> list[SearchResult]:
        """The memories for ``message``, none of them a turn the prompt's ``window`` already shows.

        The search query is the message, or with the retrieval config's ``chat_context_turns``
        the recent turns and the message as a dialogue (``chat_query``)."""
        if temporary or settings.top_k == 0 or not self.bank.has_user(session.user):
            return []
        skip = {t.memory_id for t in window if t.memory_id}
        turns = self.bank.config.retrieval.chat_context_turns
        query = chat_query(message, [(t.query, t.response) for t in window], turns)
        hits = self.bank.search(session.user, query, k=settings.top_k + len(skip))
        return [h for h in hits if h.memory.memory_id not in skip][: settings.top_k]

    def prepare(self, session: Session, message: str, settings: ChatSettings | None = None) -> FittedPrompt:
        """The prompt for ``message`` in ``session`` (retrieval and budgeting, no LLM call)."""
        return self._prepare(session, message, settings or self.settings, session.temporary)[0]

    def _prepare(
        self, session: Session, message: str, settings: ChatSettings, temporary: bool
    ) -> tuple[FittedPrompt, dict[str, float]]:
        """The prompt and the retrieval score of each memory considered for it (none, and no
        portrait or summary, for a ``temporary`` chat)."""
        window = session.recent(settings.history_turns, temporary=temporary)
        hits = self._related(session, message, settings, window, temporary)
        profile = (
            {"global_portrait": "", "global_summary": ""} if temporary else self.bank.profile(session.user)
        )
        first_time = not session.returning and not any(not t.failed for t in session.turns)
        plan = PromptPlan(
            texts=self.texts,
            user=session.user.strip(),  # imported keys may carry stray spaces (' Jason ')
            today=self.clock().date().isoformat(),
            message=message,
            first_time=first_time,
            memories=[h.memory for h in hits],
            portrait=profile["global_portrait"],
            summary=profile["global_summary"],
            history=[(t.query, t.response) for t in window],
            brief=self.model.decoding.brief,
        )
        cap = self.model.decoding.max_reply_tokens
        fitted = fit_prompt(
            plan,
            context_tokens=self.model.context_tokens,
            max_new_tokens=min(settings.max_new_tokens, cap) if cap else settings.max_new_tokens,
            count=self.model.count_tokens,
        )
        return fitted, {h.memory.memory_id: float(h.score) for h in hits}

    # -- replying -----------------------------------------------------------------------------
    def stream(
        self,
        session: Session,
        message: str,
        settings: ChatSettings | None = None,
        *,
        temporary: bool | None = None,
        cancel: threading.Event | None = None,
    ) -> Generator[str, None, None]:
        """Reply to ``message``, yielding the reply in pieces; the finished :class:`Turn` is
        ``session.turns[-1]`` (stored in the bank, ``error`` set if the model failed).

        Closing the iterator early, or :meth:`stop`, keeps the part generated so far. A message
        too long for the model's context raises :class:`PromptTooLongError` before anything is
        stored (a front end gives the message back to be shortened: Regenerate could not help).
        ``temporary``: the chat mode the message was sent in (default: the session's now).
        ``cancel``: this reply's own stop signal, set before the reply starts as well (default:
        the session's, cleared as the reply starts, which :meth:`stop` sets).
        """
        if session is None:
            raise NoSessionError("say who you are first: enter your name")
        if not isinstance(message, str) or not has_visible(message):  # a lone zero-width space too
            raise InvalidInputError("the message is empty; type something to send")
        message = check_unicode(clean_text(message), "the message")  # undecodable bytes: refused, not lost
        if len(message) > MAX_TEXT:
            raise InvalidInputError(f"the message is {len(message):,} characters; the limit is {MAX_TEXT:,}")
        settings = settings or self.settings
        with session.lock:
            if session.ended:
                raise SessionEndedError("this user's memories were deleted; enter your name to start again")
            if cancel is None:
                cancel = session.cancel
                cancel.clear()
            temporary = session.temporary if temporary is None else temporary
            now = self.clock()
            turn = Turn(query=message, timestamp=now.isoformat(timespec="seconds"), temporary=temporary)
            pieces: list[str] = []
            fitted: FittedPrompt | None = None
            meta: dict[str, Any] = {}
            refused = False
            try:
                fitted, scores = self._prepare(session, message, settings, temporary)
                turn.used = [
                    UsedMemory(m.memory_id, m.kind.value, m.date, m.text, scores.get(m.memory_id, 0.0))
                    for m in fitted.memories
                ]
                session.turns.append(turn)
                params = call_params(
                    self.model.chat_model,
                    temperature=settings.temperature,
                    top_p=settings.top_p,
                    max_tokens=fitted.max_new_tokens,
                    repeat_penalty=self.model.decoding.repeat_penalty,
                )
                if cancel.is_set():  # stopped while the memories were looked up: no model call
                    turn.stopped = True
                    return
                for piece in stream_text(
                    self.model.chat_model,
                    fitted.messages,
                    params=params,
                    cancel=cancel,
                    first_token_timeout=self.first_token_timeout,
                    idle_timeout=self.idle_timeout,
                    meta=meta,
                ):
                    pieces.append(piece)
                    turn.response = "".join(pieces)
                    yield piece
                turn.stopped = cancel.is_set()
            except PromptTooLongError:  # refused before anything is stored: the user shortens it
                refused = True
                raise
            except GeneratorExit:
                turn.stopped = True
                raise
            except ModelError as e:
                turn.error = str(e)
            except MemoryBankError as e:
                turn.error = reason("memory", detail=str(e))
            except Exception as e:  # the chat must survive any backend bug; the log has the trace
                logger.exception("reply failed")
                turn.error = reason("unexpected", detail=f"{type(e).__name__}: {e}")
            finally:
                if not refused:
                    if not session.turns or session.turns[-1] is not turn:
                        session.turns.append(turn)
                    text = "".join(pieces)
                    if meta.get("finish_reason") == "length":  # cut at the token cap: end at a full sentence
                        whole, text = text, end_at_sentence(text)
                        turn.cut = text.strip() != whole.strip()
                    self._finish(session, turn, text, now, fitted)

    def reply(self, session: Session, message: str, settings: ChatSettings | None = None) -> Turn:
        """Like :meth:`stream`, returning the finished turn."""
        for _ in self.stream(session, message, settings):
            pass
        return session.turns[-1]

    def _finish(
        self, session: Session, turn: Turn, text: str, now: dt.datetime, fitted: FittedPrompt | None
    ) -> None:
        turn.response = strip_echo(text, self.texts, session.user.strip())  # a small model's prompt echoes
        if not turn.response and turn.error is None:
            turn.error = reason("stopped") if turn.stopped else reason("empty")
        if turn.error:
            logger.warning("no reply for %r: %s", session.user, turn.error)
            turn.response = ""
        if turn.temporary:  # a temporary chat writes nothing: no turn, no reinforcement, no summary
            return
        # The memories a reply used are reinforced in the commit that stores the turn.
        used = fitted.memories if fitted is not None and not turn.failed else []
        day = now.date().isoformat()
        grows = {m.memory_id for m in used if (m.last_recall_date or "") < day}
        marks = turn.marks
        held_up = self._save_earlier(session, turn)
        if held_up is not None:  # the store refused the earlier turns just now: this one waits
            self._not_saved(turn, held_up)  # with them (one wait, not two), and stays after them
            return
        try:
            try:
                memory = self.bank.add_turn(
                    session.user, turn.query, turn.response, at=now, recalled=used, extra=marks, in_order=True
                )
            except InvalidInputError as e:  # a reply the store refuses: keep the user's words at least
                if not turn.response:
                    raise
                logger.warning("storing the reply failed (%s); storing the message alone", e)
                turn.error, turn.response = reason("reply_not_stored", detail=str(e)), ""
                grows = set()  # no reply, so no memory was used
                memory = self.bank.add_turn(session.user, turn.query, "", at=now, extra=marks, in_order=True)
            turn.reinforced = len(grows)
            turn.memory_id = memory.memory_id  # last: "stored" is only ever shown after the commit
        except MemoryBankError as e:
            logger.exception("could not store the turn of %r", session.user)
            self._not_saved(turn, e, refused=not isinstance(e, StoreError))
            return
        self._schedule(session.user, now.date())

    @staticmethod
    def _not_saved(turn: Turn, e: MemoryBankError, *, refused: bool = False) -> None:
        turn.unsaved, turn.refused, turn.error_before_save = True, refused, turn.error
        turn.error = f"{turn.error + '; ' if turn.error else ''}{reason('not_saved', detail=str(e))}"

    def _save_earlier(self, session: Session, turn: Turn | None) -> StoreError | None:
        """Store, before ``turn``, the turns of ``session`` that could not be stored when they
        were said (a full disk, a store another process held locked past the wait), oldest
        first, each at the time it was said: a passing failure loses no message. While the store
        still fails they stay unsaved, and are tried again with the next turn; the store's
        refusal is returned. A turn the store refuses for what it holds is not tried again, and
        does not hold up the others."""
        for earlier in session.turns:
            if earlier is turn or not earlier.unsaved or earlier.temporary or earlier.refused:
                continue
            at = dt.datetime.fromisoformat(earlier.timestamp)
            try:
                memory = self.bank.add_turn(
                    session.user, earlier.query, earlier.response, at=at, extra=earlier.marks, in_order=True
                )
            except StoreError as e:
                logger.warning("the unsaved turn of %r could not be stored yet: %s", session.user, e)
                return e
            except MemoryBankError as e:
                logger.warning("the store refuses the unsaved turn of %r: %s", session.user, e)
                earlier.refused = True
                continue
            earlier.memory_id, earlier.unsaved, earlier.error = memory.memory_id, False, earlier.error_before_save
            self._schedule(session.user, at.date())
        return None

    def _schedule(self, user: str, day: dt.date) -> None:
        """Tell the day-summary scheduler that ``day`` has a new turn (its failure is logged)."""
        if self.scheduler is not None:
            try:
                self.scheduler.on_turn(user, day)
            except Exception:
                logger.exception("the day-summary scheduler failed")

    def regenerate(
        self,
        session: Session,
        settings: ChatSettings | None = None,
        *,
        temporary: bool | None = None,
        cancel: threading.Event | None = None,
    ) -> Generator[str, None, None]:
        """Answer the last message again: the last turn is removed (from the bank too) and re-asked
        (``temporary``, ``cancel``: as :meth:`stream`). A message too long for the model raises
        :class:`PromptTooLongError` first, and stays."""
        if session.turns:
            self.prepare(session, session.turns[-1].query, settings)
        last = self.remove_last_turn(session)
        if last is None:
            raise InvalidInputError("there is no message to regenerate a reply for")
        return self.stream(session, last.query, settings, temporary=temporary, cancel=cancel)

    def remove_last_turn(self, session: Session) -> Turn | None:
        """Remove the last turn from the conversation and from the user's memories."""
        with session.lock:
            if not session.turns:
                return None
            turn = session.turns.pop()
            if turn.memory_id:
                try:
                    self.bank.delete_memory(session.user, turn.memory_id)
                except MemoryBankError as e:  # already forgotten or deleted elsewhere
                    logger.info("turn %s was already gone: %s", turn.memory_id, e)
            return turn

    # -- memory -------------------------------------------------------------------------------
    def summarize(
        self, session: Session, *, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, str]:
        """Summarise the user's memories now, today included (the background scheduler only
        summarises finished days); returns the global layers.

        ``progress(done, total)`` is called as each step (a day's layers, the global layers,
        today) is done, so a UI can show how far it got. Raises :class:`SiliconFriendError`
        when every summary failed, and :class:`SummaryFailedError` naming what failed when some
        did (what was made is kept; a layer that failed keeps its previous text).
        """
        if self.summarizer is None:
            raise SiliconFriendError(reason("summaries_off"))
        if not self.bank.has_user(session.user):
            raise InvalidInputError(reason("nothing_to_summarise", user=repr(session.user)))
        now = self.clock()
        shift = (self.bank.turn_day(session.user, now) - now.date()).days  # a clock that went back
        now += dt.timedelta(days=shift)
        today = now.date().isoformat()
        has_today = bool(self.bank.history(session.user, date=today))
        total = len(self.summarizer.due_days(session.user, now)) + 1 + (2 if has_today else 0)
        done = [0]

        def step(n: int = 1) -> None:
            done[0] = min(total, done[0] + n)
            if progress is not None:
                progress(done[0], total)

        if progress is not None:
            progress(0, total)
        reports = [self.summarizer.summarize_user(session.user, now, progress=step)]
        if has_today:
            reports.append(self.summarizer.summarize_day(session.user, today, force=False))
            step()
            reports.append(self.summarizer.summarize_globals(session.user))
            step()
        failed = [f for r in reports for f in r.failed]
        if failed and not any(r.written for r in reports):
            raise SiliconFriendError(reason("summary_failed", detail=failed[0].error))
        for f in failed:
            logger.warning("summary %s %s of %r failed: %s", f.kind, f.date or "", session.user, f.error)
        if failed:
            raise SummaryFailedError(
                reason(
                    "some_failed", n=str(len(failed)), detail=f"{failed[0].kind} {failed[0].date or ''}: {failed[0].error}"
                ),
                profile=self.bank.profile(session.user),
            )
        return self.bank.profile(session.user)

    def close(self) -> None:
        """Stop background summaries at once (the bank is closed by its owner): the call under
        way ends at its next token, every summary written is kept and the days not yet done are
        summarised at the next start. Turns are stored before a reply is shown, so none is lost."""
        if self.scheduler is not None:
            self.scheduler.close(wait=False)
