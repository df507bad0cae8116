"""Memories as LangChain :class:`~langchain_core.documents.Document` objects.

The retriever and the forgetting loader both hand memories to LangChain as documents: the page
content is the memory text, and the metadata carries what a chain or a vector store may filter or
show on (who, which kind, which day, how strong, how well retained).
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from memory_bank.errors import InvalidInputError
from memory_bank.records import Memory, SearchResult
from memory_bank.text import validate_user


def memory_metadata(
    memory: Memory, *, score: float | None = None, retention: float | None = None
) -> dict[str, Any]:
    """The metadata of a memory document (``score`` only for search results)."""
    meta: dict[str, Any] = {
        "memory_id": memory.memory_id,
        "user": memory.user,
        "kind": memory.kind.value,
        "date": memory.date,
        "turn": memory.turn,
        "strength": memory.strength,
        "last_recall_date": memory.last_recall_date,
        "timestamp": memory.timestamp,
    }
    if score is not None:
        meta["score"] = round(float(score), 6)
    if retention is not None:
        meta["retention"] = round(float(retention), 6)
    return meta


def memory_document(
    memory: Memory, *, score: float | None = None, retention: float | None = None
) -> Document:
    """A :class:`Document` for one memory; its ``id`` is the memory id."""
    return Document(
        id=memory.memory_id,
        page_content=memory.text,
        metadata=memory_metadata(memory, score=score, retention=retention),
    )


def result_document(result: SearchResult) -> Document:
    """A :class:`Document` for one search result (score and retention in the metadata)."""
    return memory_document(result.memory, score=result.score, retention=result.retention)


def require_user(user: object, owner: str) -> str:
    """``user`` if it names a user; otherwise an error saying that ``owner`` needs one.

    Every adapter is bound to one user: ``None`` or an empty name is an error, never "all users".
    """
    if user is None:
        raise InvalidInputError(
            f"{owner} needs the user whose memories it reads and writes; pass user='<name>'"
        )
    try:
        return validate_user(user)
    except InvalidInputError as e:
        raise InvalidInputError(f"{owner}: {e}") from e
