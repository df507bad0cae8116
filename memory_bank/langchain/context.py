"""Who an agent call is for: the user bound by the caller, or the one in the runtime context.

The agent adapters (middleware, tools) never let the model name the user: it is fixed when the
adapter is built, or read per call from LangGraph's runtime context (``agent.invoke(...,
context={"user_id": "Emily"})``), a value the application sets and the model cannot change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory_bank.errors import InvalidInputError
from memory_bank.langchain.documents import require_user


def context_user(runtime: Any, key: str, owner: str) -> str:
    """The user named under ``key`` in ``runtime.context`` (a mapping or an object).

    A call without one is an :class:`InvalidInputError` naming the fix, never "all users".
    """
    ctx = getattr(runtime, "context", None)
    value = ctx.get(key) if isinstance(ctx, Mapping) else getattr(ctx, key, None)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InvalidInputError(
            f"{owner} has no user for this call: invoke the agent with "
            f"context={{{key!r}: '<user>'}}, or build it with user='<name>'"
        )
    return require_user(value, owner)
