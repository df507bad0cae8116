"""MemoryBank as middleware for ``langchain.agents.create_agent``.

Importing this module imports ``langchain.agents``; :mod:`memory_bank.langchain` only does so when
:class:`MemoryBankMiddleware` is first used.

Correct under checkpoints and retries:

* each user message is stored before the model is asked, and its reply added at the end of the
  run: a failed model call, a stream the caller stops reading or a cancelled run loses no message
  (adding a reply blanks no summary: no words are replaced), and a run whose message another
  middleware summarised away during its tool loop still gets its reply stored;
* each turn is stored with a memory id derived from the human message's id (``lc:<id>``), so a
  replayed checkpoint, a retried run or a resent message never stores it twice; a message edited
  in place (the same id) or a regenerated reply replaces the stored turn, unless the stored turn was
  changed since the middleware wrote it (a user's edit in a memory view is never undone);
* every user message since the previous reply is stored: two messages before one reply, or a
  message whose run failed before the next one was answered (each without a reply but the last),
  where the middleware is bound to one user; with the user given per call, only the call's own
  (in a shared thread an earlier message may be another user's). A summary another middleware
  put in the thread is not a user message; another thread's message with the same id is stored
  beside the first, never over it, and edited there; without a thread (an app that sends the
  history itself, numbering messages per conversation) a conversation is told apart by its earlier
  user messages, and its first message by its words: a used id after another history is a new
  message (the first message of a conversation edited in place is stored beside the old words);
* an agent whose answer is not a plain AI message (structured output, a ``return_direct``
  tool) has that answer stored as the reply; without any answer the user's message is stored
  alone, with a warning, never dropped;
* the memory block is rebuilt from the bank for each turn and added to the model request only:
  it is never written into the agent's state, so no checkpoint keeps a copy of a memory that is
  later deleted or forgotten;
* memories the thread already shows (its user messages by id, or as a message with the reply
  that follows it) are left out of the block; a message asked again in a new conversation still
  gets the earlier answer.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import run_in_executor
from langgraph.runtime import Runtime
from typing_extensions import NotRequired

from memory_bank.bank import MemoryBank
from memory_bank.errors import InvalidInputError, MemoryDeletedError
from memory_bank.langchain.context import context_user
from memory_bank.langchain.documents import require_user
from memory_bank.langchain.prompts import format_memories, memory_block
from memory_bank.records import Memory
from memory_bank.stores.base import REPLAY_OF

if TYPE_CHECKING:
    from memory_bank.summaries.scheduler import RolloverScheduler

logger = logging.getLogger(__name__)

#: Memory blocks kept per middleware (one per recent human message), so a tool loop recalls once.
_BLOCK_CACHE_SIZE = 256


def last_turn(messages: Sequence[BaseMessage]) -> tuple[str, str | None]:
    """(the last user message, the final reply after it or ``None``) in an agent's messages.

    The reply is the last AI message after the user's that calls no tool; tool calls and
    tool results in between are the agent's work, not the conversation.
    """
    human, reply = _last_exchange(messages)
    return (human.text if human is not None else ""), reply


def _last_exchange(messages: Sequence[BaseMessage]) -> tuple[HumanMessage | None, str | None]:
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, HumanMessage):
            replies = [
                m
                for m in messages[i + 1 :]
                if isinstance(m, AIMessage) and not m.tool_calls and m.text.strip()
            ]
            return message, (replies[-1].text if replies else None)
    return None, None


def _exchange(messages: Sequence[BaseMessage]) -> tuple[list[HumanMessage], str | None]:
    """The user messages of the last exchange and its reply: the final reply (see
    :func:`_last_exchange`) and every user message after the reply before it, oldest first."""
    human, reply = _last_exchange(messages)
    if human is None:
        return [], None
    at = max(i for i, m in enumerate(messages) if m is human)
    humans = [human]
    for message in reversed(messages[:at]):
        if isinstance(message, AIMessage) and not message.tool_calls and message.text.strip():
            break  # the previous exchange's reply
        if isinstance(message, HumanMessage):
            humans.append(message)
    return humans[::-1], reply


def _shown_pairs(messages: Sequence[BaseMessage]) -> set[tuple[str, str]]:
    """(user message, reply) of each exchange ``messages`` show with its reply: a memory of
    the same words and reply adds nothing to the thread. A message without a reply yet (the one
    being answered) shows no answer, so a memory holding one is not left out for its words."""
    pairs = set()
    for i, message in enumerate(messages):
        if isinstance(message, HumanMessage) and message.text.strip() and not _from_middleware(message):
            _, reply = _last_exchange([message, *_until_next_human(messages[i + 1 :])])
            if reply is not None:
                pairs.add((str(message.text), reply))
    return pairs


def _shown_here(memory: Memory, thread: str | None) -> bool:
    """Whether ``memory``, a turn stored under the id of a message this thread shows, is that
    message: said in this thread (or thread-less, where a conversation has no other name), not
    another thread's message that happens to share its id (clients that number per thread)."""
    stored_in = memory.extra.get(_THREAD)
    if thread is None:
        return stored_in is None or str(stored_in).startswith("said:")
    return stored_in is None or stored_in == thread


def _until_next_human(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    return list(itertools.takewhile(lambda m: not isinstance(m, HumanMessage), messages))


#: Where a turn keeps a digest of what this middleware wrote, to tell its own writes from edits,
#: and the thread it was said in.
_WRITTEN = "lc_written"
_THREAD = "lc_thread"


def _thread_id() -> str | None:
    """The LangGraph thread of the running call, if any."""
    try:
        from langgraph.config import get_config

        thread = get_config().get("configurable", {}).get("thread_id")
    except (RuntimeError, ImportError):  # outside a runnable context
        return None
    return None if thread is None else str(thread)


def _from_middleware(message: BaseMessage) -> bool:
    """A message another middleware put in the thread as a user's (LangChain's summary of the
    conversation so far): not something the user said."""
    return message.additional_kwargs.get("lc_source") == "summarization"


def _digest(query: str, response: str) -> str:
    return hashlib.sha256(json.dumps([query, response]).encode("utf-8")).hexdigest()[:16]


def _refuse_if_deleted(
    bank: MemoryBank, user: str, memory_id: str, thread: str | None, *, legacy: bool = False
) -> None:
    """Raise :class:`MemoryDeletedError` when this thread's message ``memory_id`` (in either form)
    was deleted, or a turn of that id that recorded no thread was (then any reuse is a replay);
    ``legacy``: a thread-less call, for which a turn an earlier version stored without a thread
    (retired as ``#None``) counts as this message."""
    keys = [f"{memory_id}#{thread}", f"{memory_id}#*", *([f"{memory_id}#None"] if legacy else [])]
    for key in keys:
        day = bank.deleted_on(user, key)
        if day is not None:
            raise MemoryDeletedError(
                f"turn {memory_id!r} of this thread was deleted on {day}; not stored again",
                memory_id=memory_id,
                deleted_on=day,
            )


def _same_thread(memory: Memory, said: str, thread: str | None) -> bool:
    """Whether the stored ``memory`` is this thread's message (``said``: the thread, or without
    one the conversation's key, see :func:`_conversation_key`); a turn an earlier version stored
    without a thread is a thread-less message's, as it was then (its edits and deletion hold)."""
    stored = memory.extra.get(_THREAD)
    return stored == said or (stored is None and thread is None)


def _said_before(messages: Sequence[BaseMessage], human: BaseMessage) -> list[tuple[str | None, str]]:
    """The ids and words of the user messages before ``human`` in ``messages``."""
    at = next((i for i, m in enumerate(messages) if m is human), len(messages))
    return [(m.id, m.text) for m in messages[:at] if isinstance(m, HumanMessage) and not _from_middleware(m)]


def _conversation_key(before: Sequence[tuple[str | None, str]], text: str) -> str:
    """What stands for a conversation without a LangGraph thread: its user messages before this
    one (a message edited in place keeps it; the same id after another history is another
    conversation's), or for its first message the message's own words."""
    if before:
        return f"said:{_digest(json.dumps(list(before)), '')}"
    return f"said:{_digest(text, '')}"


def _other_answer(state: Any, human: BaseMessage) -> str | None:
    """The agent's answer when it is not a plain AI message: its structured response (as JSON),
    or the result of a ``return_direct`` tool that ended the run; ``None`` without either."""
    structured = state.get("structured_response") if isinstance(state, dict) else None
    if structured is not None:
        if hasattr(structured, "model_dump_json"):
            return str(structured.model_dump_json())
        try:
            return json.dumps(structured, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return str(structured)
    messages = state.get("messages") or [] if isinstance(state, dict) else []
    after = messages[next((i for i, m in enumerate(messages) if m is human), len(messages)) :]
    if after and isinstance(after[-1], ToolMessage) and after[-1].text.strip():
        return after[-1].text
    return None


def turn_memory_id(message: BaseMessage) -> str | None:
    """The memory id a turn is stored under: ``lc:`` + the human message's id (``None``
    without one). LangGraph gives every message in an agent's state an id."""
    return f"lc:{message.id}" if message.id else None


def _with_block(system: SystemMessage | None, block: str) -> SystemMessage:
    if system is None:
        return SystemMessage(content=block)
    content = system.content
    if isinstance(content, str):
        new: str | list[str | dict[Any, Any]] = f"{content}\n\n{block}" if content.strip() else block
    else:
        new = [*content, {"type": "text", "text": block}]
    return system.model_copy(update={"content": new})


#: The agent state's record of the user messages this run stored before its first model call:
#: [message id, words, thread, conversation (thread or key), stored memory id] each. The end of the run
#: adds the reply to them, also when the thread no longer shows them (another middleware
#: summarised them away during the run's tool loop), and the memory block leaves them out.
_STORED = "memorybank_stored"


class MemoryBankState(AgentState[Any]):
    memorybank_stored: NotRequired[Annotated[list[list[Any]], PrivateStateAttr]]


class MemoryBankMiddleware(AgentMiddleware[MemoryBankState, Any]):
    """Long-term memory for agents made with :func:`langchain.agents.create_agent`.

    For each user message it retrieves the ``k`` memories related to it (recalling them,
    unless ``reinforce=False``; at most once a day each) and reads the global user portrait and
    event summary; before every model call of that turn it appends them to the system message.
    The user message is stored before the first model call, and the agent's final reply added
    to it at the end, so the next turn can retrieve both. Works with any chat model.

    The user is bound at construction (``user=``), or read per call from the runtime context
    under ``context_key`` (``agent.invoke(..., context={"user_id": "Emily"})``); a call
    without one is an error, never "all users".

    The bank is ``bank``, or, with ``bank=None``, the bank behind the agent's store
    (``create_agent(store=MemoryBankStore(bank))``), so memory tools reading the store and
    the middleware share one memory. A store over another bank is an error; a store of another
    kind is left to the agent's tools, and a warning says that the middleware does not use it.

    ``summarizer`` (a :class:`~memory_bank.summaries.RolloverScheduler` over a
    :class:`~memory_bank.summaries.Summarizer` with any LangChain chat model) summarises each
    finished day and then the global portrait and event summary in the background, as
    SiliconFriend does, so the block carries a portrait and an event summary for agents too.

    Example::

        from langchain.agents import create_agent
        from memory_bank import MemoryBank
        from memory_bank.langchain import MemoryBankMiddleware

        bank = MemoryBank.open("./memories")
        agent = create_agent(model, middleware=[MemoryBankMiddleware(bank, user="Emily")])
        agent.invoke({"messages": [{"role": "user", "content": "What is my cat called?"}]})
    """

    def __init__(
        self,
        bank: MemoryBank | None = None,
        user: str | None = None,
        *,
        context_key: str | None = None,
        k: int | None = None,
        reinforce: bool = True,
        store_turns: bool = True,
        summarizer: RolloverScheduler | None = None,
    ) -> None:
        if user is None and not context_key:
            raise InvalidInputError(
                "MemoryBankMiddleware needs a user: pass user='<name>', or context_key='user_id' to "
                "read the user from the agent's runtime context"
            )
        if user is not None and context_key:
            raise InvalidInputError(
                "MemoryBankMiddleware takes the user bound (user='<name>') or per call (context_key=...), "
                "not both: the bound user would read and write the memories of every caller"
            )
        if k is not None and k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")
        self.bank = bank
        self.user = None if user is None else require_user(user, "MemoryBankMiddleware")
        self.context_key = context_key
        self.k = k
        self.reinforce = reinforce
        self.store_turns = store_turns
        self.summarizer = summarizer
        self.tools = []
        self._blocks: collections.OrderedDict[tuple[str, str, str, str], tuple[tuple[int, int], str]] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()
        self._warned_store = False

    state_schema = MemoryBankState

    def resolve_user(self, runtime: Runtime[Any] | None) -> str:
        """The user of this call: the bound one, else the one in the runtime context."""
        if self.user is not None:
            return self.user
        return context_user(runtime, self.context_key or "", "MemoryBankMiddleware")

    def resolve_bank(self, runtime: Runtime[Any] | None) -> MemoryBank:
        """The bank of this call: ``bank``, else the one behind the agent's ``store``."""
        from memory_bank.langchain.store import MemoryBankStore

        store = getattr(runtime, "store", None)
        if isinstance(store, MemoryBankStore):
            if self.bank is not None and store.bank is not self.bank:
                raise InvalidInputError(
                    "MemoryBankMiddleware's bank and the agent's MemoryBankStore are different banks; "
                    "build the middleware with MemoryBankMiddleware(None, ...) to use the store's bank"
                )
            return store.bank
        if self.bank is None:
            raise InvalidInputError(
                "MemoryBankMiddleware has no bank: pass MemoryBankMiddleware(bank, ...), or give the "
                "agent create_agent(..., store=MemoryBankStore(bank))"
            )
        if store is not None and not self._warned_store:
            self._warned_store = True
            logger.warning(
                "the agent's store (%s) is not a MemoryBankStore: MemoryBankMiddleware keeps memories "
                "in its bank, and only the agent's tools use that store",
                type(store).__name__,
            )
        return self.bank

    def recall(
        self,
        user: str,
        query: str,
        *,
        bank: MemoryBank | None = None,
        exclude: Sequence[BaseMessage] = (),
        exclude_ids: Collection[str] = (),
    ) -> str:
        """The memory block for ``query``: related memories with dates, portrait, event summary.

        Memories of the turns in ``exclude`` (the thread's messages: by id, or as a user message
        and the reply the thread shows after it) and those of ``exclude_ids`` are left out;
        only the memories shown are recalled."""
        bank = bank if bank is not None else self.resolve_bank(None)
        if not bank.has_user(user):
            return ""
        memories = ""
        if query.strip():
            humans = [m for m in exclude if isinstance(m, HumanMessage)]
            thread_ids = {turn_memory_id(m) for m in humans} - {None}  # this thread's: not another's
            thread = _thread_id()
            shown = _shown_pairs(exclude)
            k = self.k or bank.config.retrieval.top_k
            results = bank.search(user, query, k=k + len(thread_ids) + len(exclude_ids) + len(shown))
            results = [
                r
                for r in results
                if r.memory.memory_id not in exclude_ids
                and not (r.memory.memory_id in thread_ids and _shown_here(r.memory, thread))
                and ((r.memory.query or ""), (r.memory.response or "")) not in shown
            ][:k]
            if self.reinforce and results:
                bank.reinforce(
                    user, [r.memory.memory_id for r in results], _memories=[r.memory for r in results]
                )
            memories = format_memories(results, language=bank.config.language)
        profile = bank.profile(user)
        return memory_block(
            memories,
            profile["global_portrait"],
            profile["global_summary"],
            language=bank.config.language,
        )

    # -- hooks --------------------------------------------------------------------------------
    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        return handler(self._inject(request, self._block(request)))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        block = await run_in_executor(None, self._block, request)
        return await handler(self._inject(request, block))

    def _pending(self, messages: Sequence[BaseMessage]) -> list[tuple[BaseMessage, str | None, str]]:
        """The user messages of the last exchange to store, each with its thread and its
        conversation (the thread, or without one the key :func:`_conversation_key` makes)."""
        humans, _ = _exchange(messages)
        said = [h for h in humans if h.text.strip() and not _from_middleware(h)]
        if self.user is None:
            # The user comes with each call: an earlier message of the exchange (a run that
            # failed) may be another user's in a shared thread, so only this call's is stored.
            said = said[-1:]
        thread = _thread_id()
        if thread is not None:
            return [(h, thread, thread) for h in said]
        return [(h, None, _conversation_key(_said_before(messages, h), h.text)) for h in said]

    def before_agent(self, state: MemoryBankState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Store the run's user messages before the model is asked: a model call that fails, a
        stream the caller stops reading or a cancelled run loses no message (the reply is added
        at the end of the run). A message the bank refuses fails the run here, before the model
        is paid to answer it."""
        if not self.store_turns:
            return None
        pending = self._pending(state["messages"])
        if not pending:
            return {_STORED: []}
        bank, user = self.resolve_bank(runtime), self.resolve_user(runtime)
        stored: list[list[Any]] = []
        memory = None
        for human, thread, said in pending:
            try:
                memory = self._retried(bank, user, human, thread) or self._store(
                    bank, user, human, "", thread, said, early=True
                )
            except MemoryDeletedError as e:  # a replay or regeneration of a turn the user deleted
                logger.info("turn %s was deleted on %s; not stored again", e.memory_id, e.deleted_on)
                continue
            except InvalidInputError as e:
                if human is pending[-1][0]:
                    raise
                logger.warning("an earlier message of the exchange was not stored: %s", e)
                continue
            if memory is not None:
                stored.append([human.id, human.text, thread, said, memory.memory_id])
        if self.summarizer is not None and memory is not None:
            self.summarizer.on_turn(user, memory.date)  # queues the finished days; never raises
        return {_STORED: stored}

    async def abefore_agent(self, state: MemoryBankState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await run_in_executor(None, self.before_agent, state, runtime)

    def after_agent(self, state: MemoryBankState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if not self.store_turns:
            return None
        messages = state["messages"]
        _, reply = _exchange(messages)
        pending = self._pending(messages)
        if not pending:  # summarised away during the run: the messages its start stored
            stored: list[list[Any]] = list(state.get(_STORED) or [])  # type: ignore[call-overload]
            pending = [
                (HumanMessage(content=text, id=mid), thread, said) for mid, text, thread, said, _ in stored
            ]
        if not pending:
            logger.debug("no user message to store")
            return None
        if reply is None:  # structured output, a return_direct tool's result, or no answer at all
            reply = _other_answer(state, pending[-1][0])
            if reply is None:
                logger.warning("the agent gave no answer; the user's message is stored without one")
                reply = ""
        bank, user = self.resolve_bank(runtime), self.resolve_user(runtime)
        # What the run's start stored, by message: finished under the id it was stored by (a
        # thread-less conversation's key may have changed since: a summary folded its messages)
        started = {(r[0], r[1]): r for r in state.get(_STORED) or []}  # type: ignore[attr-defined]
        memory = None
        for human, thread, said in pending:
            last = human is pending[-1][0]
            response = reply if last else ""
            try:
                record = started.get((human.id, human.text))
                memory = (
                    self._finish(bank, user, record[4], human, response) if record else None
                ) or self._store(bank, user, human, response, thread, record[3] if record else said)
            except MemoryDeletedError as e:  # a replay or regeneration of a turn the user deleted
                logger.info("turn %s was deleted on %s; not stored again", e.memory_id, e.deleted_on)
            except InvalidInputError as e:  # (the message was stored before the model was asked)
                logger.warning("the reply could not be stored with its message: %s", e)
        if self.summarizer is not None and memory is not None:
            self.summarizer.on_turn(user, memory.date)  # queues the finished days; never raises
        return None

    @staticmethod
    def _retried(bank: MemoryBank, user: str, human: BaseMessage, thread: str | None) -> Memory | None:
        """The reply-less turn a failed run of this very message stored, when the message comes
        again under another id (an app that sends messages without ids: LangGraph gives each
        run new ones): the user's latest turn of today, with the same words and no reply, as
        this middleware wrote it, in the same thread (or thread-less too). ``None`` otherwise."""
        memory_id = turn_memory_id(human)
        rec = bank.find_user(user)
        if rec is None or memory_id is None or bank.storage.memories_by_ids(rec.id, [memory_id]):
            return None
        last = bank.storage.last_turn(rec.id, bank.clock().date().isoformat())
        if last is None or last.query != human.text or last.response:
            return None
        if last.extra.get(_WRITTEN) != _digest(human.text, "") or not str(last.memory_id).startswith("lc:"):
            return None
        stored_in = last.extra.get(_THREAD)
        same = stored_in == thread if thread is not None else str(stored_in or "").startswith("said:")
        return last if same else None

    @staticmethod
    def _finish(
        bank: MemoryBank, user: str, memory_id: str, human: BaseMessage, response: str
    ) -> Memory | None:
        """The turn the run's start stored as ``memory_id``, given ``response``; ``None`` where it
        is no longer that (deleted, or changed since): then :meth:`_store` decides."""
        rec = bank.find_user(user)
        found = bank.storage.memories_by_ids(rec.id, [memory_id]) if rec is not None else []
        if not found or found[0].query != human.text:
            return None
        memory = found[0]
        if memory.response == response or (not response and memory.response):
            return memory  # done already (a replay), or an earlier message keeps its reply
        if memory.response or memory.extra.get(_WRITTEN) != _digest(human.text, ""):
            return None  # answered before (a regeneration) or edited since: the usual rules
        return bank.complete_turn(
            user, memory.memory_id, response, extra={**memory.extra, _WRITTEN: _digest(human.text, response)}
        )

    @staticmethod
    def _store(
        bank: MemoryBank,
        user: str,
        human: BaseMessage,
        response: str,
        thread: str | None,
        said: str,
        *,
        early: bool = False,
    ) -> Memory | None:
        """Store one user message with its reply under ``lc:<message id>``. The same message
        again (a replay, a retry) stores nothing; edited in place or answered anew in the same
        thread, the stored turn becomes what the thread shows, unless it was changed since
        this middleware wrote it (a user's edit in a memory view is never undone); another
        thread's message with the same id (a client numbering messages per thread) is stored
        beside it under an id of that thread's (``lc:<id>:<thread digest>``), never over it,
        and edited there. Without a thread, the conversation's earlier user messages (``before``:
        their ids and words) stand for it, or for a conversation's first message its own words:
        the same id after another history is another conversation's message. A turn stored
        without either (by an earlier version) is this message, as it was then. An earlier
        message of the exchange (``response`` empty) never empties a reply stored with it.
        ``said``: the thread, or the conversation's key (see :meth:`_pending`). ``early``: the
        message before its reply; ``None`` where it is left to the end of the run."""
        memory_id = turn_memory_id(human)
        stamp = {_WRITTEN: _digest(human.text, response), _THREAD: said}
        if memory_id is None:  # a message without an id: stored as it comes
            return bank.add_turn(user, human.text, response, extra=stamp)
        stamp[REPLAY_OF] = memory_id
        try:
            memory: Memory | None = bank.add_turn(
                user, human.text, response, memory_id=memory_id, extra=stamp
            )
        except MemoryDeletedError:
            memory = None  # this thread's message, deleted (refused below), or another thread's
        if memory is None or not _same_thread(memory, said, thread):
            _refuse_if_deleted(bank, user, memory_id, said, legacy=thread is None)  # a replay, a retry
            # Another thread's message with this id: this thread's own id for it (or the id an
            # earlier version gave this very turn, words and reply digested, on a replay of it).
            earlier = f"{memory_id}:{_digest(human.text, response)}"
            found = bank.storage.memories_by_ids(bank.user(user).id, [earlier]) if bank.has_user(user) else []
            own = f"{memory_id}:{_digest(said, '')}"
            if found and found[0].extra.get(_THREAD) == said:
                memory = found[0]
            elif early and not bank.storage.memories_by_ids(bank.user(user).id, [own]):
                # Before the reply, the id an earlier version gave this turn (its words and
                # reply digested) cannot be looked for: stored at the end of the run instead.
                return None
            else:
                memory = bank.add_turn(user, human.text, response, memory_id=own, extra=stamp)
        if (memory.query, memory.response) == (human.text, response):
            return memory  # stored now, or this very turn again
        if not response and memory.response:
            return memory  # an earlier message of the exchange: its reply stays
        if memory.extra.get(_WRITTEN) != _digest(memory.query or "", memory.response or ""):
            logger.info("turn %s was changed since it was stored; kept as it is", memory.memory_id)
            return memory
        if memory.query == human.text and not memory.response:  # stored before the model was asked
            return bank.complete_turn(user, memory.memory_id, response, extra={**memory.extra, **stamp})
        return bank.update_memory(
            user, memory.memory_id, text=human.text, response=response, extra={**memory.extra, **stamp}
        )

    async def aafter_agent(self, state: MemoryBankState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await run_in_executor(None, self.after_agent, state, runtime)

    # -- internals ----------------------------------------------------------------------------
    def _block(self, request: ModelRequest[Any]) -> str:
        """This turn's memory block: built at the turn's first model call, then reused by the
        calls of its tool loop while the user's memories are unchanged."""
        bank, user = self.resolve_bank(request.runtime), self.resolve_user(request.runtime)
        messages = list((request.state or {}).get("messages") or request.messages)
        human, _ = _last_exchange(messages)
        stored: list[list[Any]] = list((request.state or {}).get(_STORED) or [])  # type: ignore[call-overload]
        if human is None or _from_middleware(human):  # (summarised away: the words the run started with)
            human = HumanMessage(content=stored[-1][1], id=stored[-1][0]) if stored else human
        if human is None:
            return ""
        # The words too: a message edited in place keeps its id; another conversation may reuse it.
        key = (user, _thread_id() or "", turn_memory_id(human) or "", human.text)
        # Recalling changes no vectors: the user's (version, epoch) tells a stale block apart.
        state = bank.storage.user_state(bank.user(user).id) if bank.has_user(user) else (0, 0)
        with self._lock:
            cached = self._blocks.get(key)
            if cached is not None and cached[0] == state:
                self._blocks.move_to_end(key)
                return cached[1]
        block = self.recall(
            user, human.text, bank=bank, exclude=messages, exclude_ids=[r[-1] for r in stored]
        )
        with self._lock:
            self._blocks[key] = (state, block)
            while len(self._blocks) > _BLOCK_CACHE_SIZE:
                self._blocks.popitem(last=False)
        return block

    @staticmethod
    def _inject(request: ModelRequest[Any], block: str) -> ModelRequest[Any]:
        if not block:
            return request
        return request.override(system_message=_with_block(request.system_message, block))
