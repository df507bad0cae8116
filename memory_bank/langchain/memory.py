"""MemoryBank as a classic LangChain memory (``ConversationChain`` / ``LLMChain`` apps).

Importing this module imports ``langchain_classic``; :mod:`memory_bank.langchain` only does so
when :class:`MemoryBankMemory` is first used.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from memory_bank.bank import MemoryBank
from memory_bank.errors import InvalidInputError
from memory_bank.langchain.documents import require_user
from memory_bank.langchain.prompts import format_memories
from memory_bank.retrieval.dialogue import chat_query
from memory_bank.summaries.scheduler import RolloverScheduler

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class _SessionTurn:
    memory_id: str
    query: str
    response: str


def _as_text(value: Any) -> str:
    """A chain's input or output as text: a message's text, the texts of a list of messages,
    nothing for ``None`` (an empty input is then refused by the bank, not stored as "None")."""
    if value is None:
        return ""
    if isinstance(value, BaseMessage):
        return value.text
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, BaseMessage) for v in value):
        return "\n".join(v.text for v in value)
    return value if isinstance(value, str) else str(value)


class MemoryBankMemory(BaseMemory):
    """Long-term memory for classic chains: the paper's prompt ingredients as memory variables.

    :meth:`load_memory_variables` gives, for the chain's current input:

    * ``history``: the last ``window`` turns of this session (default: the bank's
      ``history_window``, 7 as in the original), as text or, with ``return_messages=True``,
      as messages;
    * ``memories``: the ``k`` memories most related to the input, one per line with its date
      (turns already in ``history`` are left out, so nothing is shown twice);
    * ``user_portrait`` and ``event_summary``: the user's global portrait and event summary.

    :meth:`save_context` stores the turn with the bank's current time; it is retrievable at
    once. :meth:`clear` empties the session window only; the long-term memory stays.

    Example::

        from langchain_classic.chains import ConversationChain
        from memory_bank import MemoryBank
        from memory_bank.langchain import MemoryBankMemory, conversation_prompt

        bank = MemoryBank.open("./memories")
        chain = ConversationChain(
            llm=chat_model,
            memory=MemoryBankMemory(bank=bank, user="Emily"),
            prompt=conversation_prompt(),
        )
        chain.invoke({"input": "Do you remember my cat's name?"})
    """

    bank: MemoryBank
    """The memory bank that stores the turns."""
    user: str
    """The one user this conversation is with (never "all users")."""
    k: int | None = Field(default=None, ge=1)
    """Related memories per input; ``None`` uses the bank's ``retrieval.top_k``."""
    window: int | None = Field(default=None, ge=0)
    """Turns of this session kept as ``history``; ``None`` uses the bank's ``history_window``."""
    reinforce: bool = True
    """Count retrieving a memory for the prompt as a recall (strengthens it)."""
    input_key: str | None = None
    """The chain input holding the user's message (default: the only non-memory input)."""
    output_key: str | None = None
    """The chain output holding the reply (default: the only output)."""
    human_prefix: str = "Human"
    ai_prefix: str = "AI"
    return_messages: bool = False
    """Give ``history`` as a list of messages (for chat prompts) instead of text."""
    history_key: str = "history"
    memories_key: str = "memories"
    portrait_key: str = "user_portrait"
    summary_key: str = "event_summary"
    summarizer: RolloverScheduler | None = None
    """Writes the day summaries and the global portrait and event summary in the background
    after each stored turn, as SiliconFriend does (see
    :func:`~memory_bank.summaries.background_summaries`); ``None``: no summaries are made."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _session: list[_SessionTurn] = PrivateAttr(default_factory=list)

    @field_validator("user", mode="before")
    @classmethod
    def _check_user(cls, value: object) -> str:
        return require_user(value, "MemoryBankMemory")

    @property
    def memory_variables(self) -> list[str]:
        return [self.history_key, self.memories_key, self.portrait_key, self.summary_key]

    @property
    def session(self) -> list[tuple[str, str]]:
        """The (query, response) turns currently in the session window, oldest first."""
        return [(t.query, t.response) for t in self._window_turns()]

    def _window_size(self) -> int:
        return self.bank.config.history_window if self.window is None else self.window

    def _window_turns(self) -> list[_SessionTurn]:
        """The session's last turns as the bank has them now: a turn deleted (or hidden) since,
        or its user forgotten, leaves the window; an edited one shows its new words."""
        n = self._window_size()
        turns = self._session[-n:] if n > 0 else []
        if not turns:
            return []
        if not self.bank.has_user(self.user):
            self._session.clear()
            return []
        stored = self.bank.storage.memories_by_ids(self.bank.user(self.user).id, [t.memory_id for t in turns])
        now = {m.memory_id: m for m in stored if not m.hidden}
        self._session = [
            t
            if t not in turns  # older turns, outside the window, stay as they are
            else _SessionTurn(t.memory_id, now[t.memory_id].query or "", now[t.memory_id].response or "")
            for t in self._session
            if t not in turns or t.memory_id in now
        ]
        return self._session[-n:]

    def _input_text(self, inputs: dict[str, Any]) -> str:
        key = self.input_key
        if key is None:
            keys = [k for k in inputs if k not in (*self.memory_variables, "stop")]
            if len(keys) != 1:
                raise InvalidInputError(
                    f"MemoryBankMemory cannot tell which input is the user's message among {sorted(keys)}; "
                    "set input_key"
                )
            key = keys[0]
        if key not in inputs:
            raise InvalidInputError(f"MemoryBankMemory: the chain inputs have no {key!r}; set input_key")
        return _as_text(inputs[key])

    def _output_text(self, outputs: dict[str, Any]) -> str:
        key = self.output_key
        if key is None:
            if len(outputs) != 1:
                raise InvalidInputError(
                    f"MemoryBankMemory cannot tell which output is the reply among {sorted(outputs)}; "
                    "set output_key"
                )
            key = next(iter(outputs))
        if key not in outputs:
            raise InvalidInputError(f"MemoryBankMemory: the chain outputs have no {key!r}; set output_key")
        return _as_text(outputs[key])

    def _history(self, turns: list[_SessionTurn]) -> str | list[BaseMessage]:
        if self.return_messages:
            messages: list[BaseMessage] = []
            for t in turns:
                messages += [HumanMessage(content=t.query), AIMessage(content=t.response)]
            return messages
        return "\n".join(f"{self.human_prefix}: {t.query}\n{self.ai_prefix}: {t.response}" for t in turns)

    def _memories(self, message: str, turns: list[_SessionTurn]) -> str:
        if not message.strip() or not self.bank.has_user(self.user):
            return ""
        shown = {t.memory_id for t in turns}
        context = self.bank.config.retrieval.chat_context_turns
        query = chat_query(message, [(t.query, t.response) for t in turns], context)
        k = self.k or self.bank.config.retrieval.top_k
        if not shown:
            results = self.bank.search(self.user, query, k=k, reinforce=self.reinforce)
        else:  # over-fetch, drop what the history window already shows, recall only the rest
            results = self.bank.search(self.user, query, k=k + len(shown))
            results = [r for r in results if r.memory.memory_id not in shown][:k]
            if self.reinforce and results:
                self.bank.reinforce(self.user, [r.memory.memory_id for r in results])
        return format_memories(
            results,
            language=self.bank.config.language,
            human_prefix=self.human_prefix,
            ai_prefix=self.ai_prefix,
        )

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The history window, related memories, portrait and event summary for ``inputs``."""
        turns = self._window_turns()
        memories = self._memories(self._input_text(inputs), turns)
        profile = self.bank.profile(self.user)
        return {
            self.history_key: self._history(turns),
            self.memories_key: memories,
            self.portrait_key: profile["global_portrait"],
            self.summary_key: profile["global_summary"],
        }

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Store the turn (input, reply) in the bank, dated now, and add it to the session window."""
        query, response = self._input_text(inputs), self._output_text(outputs)
        memory = self.bank.add_turn(self.user, query, response)
        self._session.append(_SessionTurn(memory.memory_id, query, response))
        del self._session[: max(0, len(self._session) - self._window_size())]
        if self.summarizer is not None:
            self.summarizer.on_turn(self.user, memory.date)  # queues the finished days; never raises
        logger.debug("stored turn %s for %r", memory.memory_id, self.user)

    def clear(self) -> None:
        """Start a new session: empty the history window (the long-term memories stay)."""
        self._session.clear()
