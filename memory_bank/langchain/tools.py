"""Memory tools for LangChain agents: search, save and forget one user's memories.

>>> tools = memory_tools(bank, user="Emily")                          # doctest: +SKIP
>>> agent = create_agent(model, tools=tools)                          # doctest: +SKIP
>>> tools = memory_tools(bank)   # the user from context={"user_id": ...}  # doctest: +SKIP

The user is never an argument the model fills in: it is bound by the caller (``user=``) or read
from the agent's runtime context under ``context_key`` (set by the application per call). A
saved memory is a dated memory of the user's, retrieved, summarised and forgotten like a chat
turn; inside an agent its id comes from the tool call's id, so a retried call saves it once.
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from memory_bank.bank import MemoryBank
from memory_bank.errors import InvalidInputError, MemoryBankError, MemoryDeletedError, MemoryNotFoundError
from memory_bank.langchain.context import context_user
from memory_bank.langchain.documents import require_user
from memory_bank.records import Memory, SearchResult
from memory_bank.stores.base import REPLAY_OF

if TYPE_CHECKING:
    from memory_bank.summaries.scheduler import RolloverScheduler

logger = logging.getLogger(__name__)


def format_results(results: list[SearchResult]) -> str:
    """One line per memory for a model to read: ``[date] (id) text``."""
    if not results:
        return "No memories found."
    return "\n".join(
        f"[{r.memory.date}] ({r.memory.memory_id}) {' '.join(r.memory.text.split())}" for r in results
    )


class _Binding:
    """Resolves the bank and the user of one tool call."""

    def __init__(self, bank: MemoryBank | None, user: str | None, context_key: str | None) -> None:
        if bank is not None and not isinstance(bank, MemoryBank):
            raise InvalidInputError(f"memory_tools needs a MemoryBank, got {type(bank).__name__}")
        self.bank = bank
        self.user = None if user is None else require_user(user, "memory_tools")
        if self.user is not None and context_key:
            raise InvalidInputError(
                "memory_tools takes the user bound (user='<name>') or per call (context_key=...), not "
                "both: the bound user would read and write the memories of every caller"
            )
        if self.user is None and context_key == "":
            raise InvalidInputError(
                "memory_tools needs a user: pass user='<name>', or context_key='user_id' to read it "
                "from the agent's runtime context"
            )
        self.context_key = context_key or "user_id"

    def resolve(self, runtime: ToolRuntime | None) -> tuple[MemoryBank, str]:
        bank = self.bank
        if bank is None:
            from memory_bank.langchain.store import MemoryBankStore

            store = getattr(runtime, "store", None)
            if not isinstance(store, MemoryBankStore):
                raise ToolException(
                    "memory_tools has no bank: build them with memory_tools(bank, ...) or give the "
                    "agent create_agent(..., store=MemoryBankStore(bank))"
                )
            bank = store.bank
        user = self.user if self.user is not None else context_user(runtime, self.context_key, "memory_tools")
        return bank, user


def memory_tools(
    bank: MemoryBank | None,
    user: str | None = None,
    context_key: str | None = None,
    *,
    k: int | None = None,
    reinforce: bool = True,
    summarizer: RolloverScheduler | None = None,
) -> list[BaseTool]:
    """The tools ``search_memory``, ``save_memory`` and ``forget_memory`` for one user.

    Args:
        bank: the memory bank; ``None`` takes the bank behind the agent's
            ``store=MemoryBankStore(bank)``.
        user: the user, fixed; ``None`` reads it from the runtime context under ``context_key``
            (default ``"user_id"``). Giving both is an error.
        k: memories per search (default: the bank's ``retrieval.top_k``).
        reinforce: whether a search recalls what it finds (strength + 1, at most once a day).
        summarizer: writes the day summaries and the global portrait and event summary in the
            background after a save or a deletion (see
            :func:`~memory_bank.summaries.background_summaries`); ``None``: none are made.
    """
    binding = _Binding(bank, user, context_key)
    if k is not None and k < 1:
        raise InvalidInputError(f"k must be at least 1, got {k}")

    def search_memory(query: str, runtime: ToolRuntime = None) -> str:  # type: ignore[assignment]
        """Search the user's long-term memory (earlier conversations, saved notes and day
        summaries) for what is related to the query. Returns one memory per line with its
        date and id."""
        bank_, user_ = binding.resolve(runtime)
        if not query.strip():
            raise ToolException("the query is empty; say what to look for")
        try:
            if not bank_.has_user(user_):
                return "No memories found."
            return format_results(bank_.search(user_, query, k=k, reinforce=reinforce))
        except MemoryBankError as e:  # a query the bank refuses: the model hears why, the run goes on
            raise ToolException(str(e)) from e

    def save_memory(content: str, runtime: ToolRuntime = None) -> str:  # type: ignore[assignment]
        """Save something worth remembering about the user for later conversations (a fact,
        a preference, an event), in one or two plain sentences."""
        bank_, user_ = binding.resolve(runtime)
        call_id = getattr(runtime, "tool_call_id", None)  # set inside an agent
        try:
            # The call's id makes a retried call store nothing twice; the content's digest tells
            # a replay of the call (the user may have edited what it saved since) from a model
            # whose call ids repeat across runs (other content: another memory).
            digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            first = f"tool:{call_id}" if call_id else None
            stamp = {"tool_content": digest, REPLAY_OF: first}
            memory: Memory | None
            try:
                memory = bank_.add_turn(user_, content, "", memory_id=first, extra=stamp, standalone=True)
            except MemoryDeletedError:
                for key in (f"{first}#{digest}", f"{first}#*"):  # *: a deleted turn of no digest
                    if bank_.deleted_on(user_, key) is not None:
                        raise  # this call replayed: the user deleted what it saved
                memory = None  # the id's memory was deleted, and this is other content
            if memory is None or (memory.query != content and memory.extra.get("tool_content") != digest):
                memory = bank_.add_turn(
                    user_, content, "", memory_id=f"{first}:{digest}", extra=stamp, standalone=True
                )
        except MemoryDeletedError as e:  # a replayed call of a memory the user has deleted since
            return f"Not saved: the user deleted this memory ({e.memory_id}) on {e.deleted_on}."
        except MemoryBankError as e:
            raise ToolException(str(e)) from e
        if summarizer is not None:
            summarizer.on_turn(user_, memory.date)  # queues the finished days; never raises
        return f"Saved memory {memory.memory_id}."

    def forget_memory(memory_id: str, runtime: ToolRuntime = None) -> str:  # type: ignore[assignment]
        """Delete one memory of the user for good, by the id that search_memory showed
        (when the user asks to forget something, or it is wrong)."""
        bank_, user_ = binding.resolve(runtime)
        try:
            bank_.delete_memory(user_, memory_id)
        except (MemoryNotFoundError, MemoryBankError) as e:
            raise ToolException(str(e)) from e
        if summarizer is not None:
            summarizer.submit(user_)  # the summaries of that day may quote what was deleted
        return f"Deleted memory {memory_id}."

    return [
        StructuredTool.from_function(f, handle_tool_error=True)
        for f in (search_memory, save_memory, forget_memory)
    ]
