"""A LangChain retriever over one user's memories."""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import run_in_executor
from pydantic import ConfigDict, Field, field_validator

from memory_bank.bank import MemoryBank
from memory_bank.errors import InvalidInputError
from memory_bank.langchain.documents import require_user, result_document
from memory_bank.records import MemoryKind

logger = logging.getLogger(__name__)


#: The ``user`` of a retriever whose user each call gives (``configurable_fields``): a call that
#: gives none is an error, never a search of some user's memories. (``"-"``, which the
#: documentation used before, is read the same way.)
PER_CALL = "<user given per call>"


class MemoryBankRetriever(BaseRetriever):
    """Retrieve one user's memories (dialog turns and daily summaries) for a query.

    Each :class:`~langchain_core.documents.Document` holds the memory text; its metadata has
    ``memory_id``, ``user``, ``kind``, ``date``, ``turn``, ``score``, ``strength``, ``retention``
    (plus ``last_recall_date`` and ``timestamp``). ``k`` may be given at construction or per
    call (``retriever.invoke(query, k=5)``). By default a retrieval is a recall: the returned
    memories are reinforced (strength + 1 at most once a day, the forgetting clock restarts
    today, paper §2.3) unless ``reinforce=False``, e.g. for a retriever that only browses.
    One retriever serves many users: ``MemoryBankRetriever(bank=bank, user=PER_CALL)
    .configurable_fields(user=ConfigurableField(id="user_id"))``, then ``config={"configurable":
    {"user_id": ...}}`` per call (a call without one is an error). A user with no memories yet gets ``[]``. Async calls
    (``ainvoke``, also with ``k``) run the search in a worker thread.

    Example::

        from memory_bank import MemoryBank
        from memory_bank.langchain import MemoryBankRetriever

        bank = MemoryBank.open("./memories")
        retriever = MemoryBankRetriever(bank=bank, user="Emily", k=3)
        for doc in retriever.invoke("What is my cat called?"):
            print(doc.metadata["date"], doc.page_content)
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    bank: MemoryBank
    """The memory bank to search."""
    user: str
    """The one user whose memories are searched (never "all users")."""
    k: int | None = Field(default=None, ge=1)
    """Memories per query; ``None`` uses the bank's ``retrieval.top_k`` (2, as in the paper)."""
    reinforce: bool = True
    """Count a retrieval as a recall (strengthens the returned memories)."""
    kinds: tuple[MemoryKind, ...] | None = None
    """Restrict to these kinds (default: turns and daily summaries, per the bank's config)."""

    @field_validator("user", mode="before")
    @classmethod
    def _check_user(cls, value: object) -> str:
        return value if value == PER_CALL else require_user(value, "MemoryBankRetriever")

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self._search(query, **kwargs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        # The base class's async path drops per-call arguments such as k; search in a thread.
        return await run_in_executor(None, self._search, query, **kwargs)

    def _search(
        self, query: str, k: int | None = None, reinforce: bool | None = None, **kwargs: Any
    ) -> list[Document]:
        if kwargs:
            raise TypeError(
                f"MemoryBankRetriever got unexpected arguments {sorted(kwargs)}; it takes k and reinforce"
            )
        if self.user in (PER_CALL, "-"):  # a placeholder: the call did not say whose memories
            raise InvalidInputError(
                "this retriever's user is set per call and this call named none: invoke it with "
                "config={'configurable': {'user_id': '<name>'}}"
            )
        if not isinstance(query, str):
            raise InvalidInputError(f"a retriever query must be a string, got {type(query).__name__}")
        if not query.strip():
            return []
        if not self.bank.has_user(self.user):
            logger.debug("user %r has no memories yet", self.user)
            return []
        results = self.bank.search(
            self.user,
            query,
            k=k if k is not None else self.k,
            reinforce=self.reinforce if reinforce is None else reinforce,
            kinds=self.kinds,
        )
        return [result_document(r) for r in results]
