"""MemoryBank as a LangGraph :class:`~langgraph.store.base.BaseStore`.

``create_agent(..., store=MemoryBankStore(bank))``, LangGraph graphs and LangMem's memory tools
read and write long-term memory through a ``BaseStore``. This one keeps it in a
:class:`~memory_bank.MemoryBank`: one isolation rule, hybrid retrieval, forgetting and
reinforcement as everywhere else.

Mapping:

* **namespace -> user**: ``("memories", user)`` (LangMem's default ``("memories",
  "{langgraph_user_id}")``) or ``(user,)`` name the bank user ``user``; any other shape is an
  :class:`~memory_bank.errors.InvalidInputError` unless ``namespace_user=`` maps it. A search
  prefix must name one user too: no call reads "all users". :meth:`list_namespaces` lists
  one namespace per bank user, ``("memories", user)`` (or ``user_namespace(user)``).
* **key -> memory id**: a ``put`` of a new key stores a memory with that id (today, in the
  user's dialog history, so the day's summaries cover it); a ``put`` of an existing key
  updates it in place (re-embedded, strength kept); ``delete`` deletes it and scrubs the day's
  summaries. The user's chat turns and daily summaries are items too (their keys are their
  memory ids; their value is ``{text_field: text, "kind": ..., "date": ...}``).
* **value -> text**: the value's ``text_field`` (default ``content``; a dict there, as LangMem
  stores schema-shaped memories, is embedded as JSON) is what is embedded and retrieved; with
  ``index=[fields]`` those top-level fields are. MemoryBank retrieves every memory, so
  ``index=False`` still stores a searchable memory. The value itself comes back unchanged.
* **search**: with ``query``, the bank's hybrid ranking (scores in ``SearchItem.score``); without,
  the user's items newest first. ``filter`` matches value fields (equality, nested dicts,
  ``$eq $ne $gt $gte $lt $lte``); ``limit``/``offset`` page the result.
* **TTL -> forgetting**: memories expire by the Ebbinghaus curve of the bank's ``forgetting``
  config, not by a fixed time to live: forgotten memories disappear from ``get`` and ``search``
  (archived, restorable by the bank). ``refresh_on_read`` maps onto reinforcement: a search
  with a query recalls what it returns (strength + 1, at most once a day), unless
  ``TTLConfig(refresh_on_read=False)``, ``reinforce=False`` or ``refresh_ttl=False`` on the call.
  A fixed ``ttl`` (per item or ``default_ttl``) has no meaning here and is an error naming the fix.

Example::

    from langchain.agents import create_agent
    from memory_bank import MemoryBank
    from memory_bank.langchain import MemoryBankStore

    store = MemoryBankStore(MemoryBank.open("./memories"))
    store.put(("memories", "Emily"), "cat", {"content": "Emily's cat is called Miso."})
    store.search(("memories", "Emily"), query="what is my cat called?", limit=3)
    agent = create_agent(model, tools=[...], store=store)
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import run_in_executor
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from memory_bank.bank import MemoryBank
from memory_bank.errors import InvalidInputError
from memory_bank.records import RETRIEVABLE_KINDS, Memory, MemoryKind
from memory_bank.text import validate_user

if TYPE_CHECKING:
    from memory_bank.summaries.scheduler import RolloverScheduler

logger = logging.getLogger(__name__)

Namespace = tuple[str, ...]

#: Where a memory written through the store keeps its LangGraph value and times (``extra``).
STORE_EXTRA = "langgraph_store"

#: The namespace prefix LangMem and LangGraph examples use for per-user memories.
MEMORIES = "memories"


def default_namespace_user(namespace: Namespace) -> str:
    """``("memories", user)`` or ``(user,)`` -> ``user``; anything else is an error."""
    if len(namespace) == 2 and namespace[0] == MEMORIES:
        return namespace[1]
    if len(namespace) == 1 and namespace[0] != MEMORIES:
        return namespace[0]
    raise InvalidInputError(
        f"MemoryBankStore cannot tell which user namespace {namespace!r} belongs to: use "
        f"('{MEMORIES}', '<user>') or ('<user>',), or give MemoryBankStore(namespace_user=...) a mapping"
    )


def default_user_namespace(user: str) -> Namespace:
    return (MEMORIES, user)


def _compare(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: operators, nested dicts, lists compared whole."""
    if isinstance(wanted, dict):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, op, arg) for op, arg in wanted.items())
        return isinstance(value, dict) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(_compare(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(value), float(arg)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise InvalidInputError(f"unsupported filter operator {op!r}; use $eq, $ne, $gt, $gte, $lt or $lte")


def _matches(namespace: Namespace, condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = (
        namespace[: len(path)]
        if condition.match_type == "prefix"
        else namespace[len(namespace) - len(path) :]
    )
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


def _utc(value: str | None, fallback: str) -> dt.datetime:
    text = value or fallback
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        when = dt.datetime.fromisoformat(fallback[:10])
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)


class MemoryBankStore(BaseStore):
    """A LangGraph ``BaseStore`` over a :class:`~memory_bank.MemoryBank` (see the module docs
    for how namespaces, keys, values, search and TTL map onto the bank).

    Args:
        bank: the memory bank.
        text_field: the value field that is embedded and retrieved (default ``content``).
        namespace_user: maps a namespace (or search prefix) to a bank user; the default takes
            ``("memories", user)`` or ``(user,)``.
        user_namespace: the namespace :meth:`list_namespaces` shows for a user (default
            ``("memories", user)``); give it with ``namespace_user``.
        reinforce: whether a search with a query recalls what it returns (default: yes, as
            the bank's retriever does; ``ttl`` may set it through ``refresh_on_read``).
        ttl: a LangGraph ``TTLConfig``; only ``refresh_on_read`` applies (forgetting replaces
            a fixed time to live).
        summarizer: writes the day summaries and the global portrait and event summary in the
            background after a new item or a deletion (see
            :func:`~memory_bank.summaries.background_summaries`); ``None``: none are made.
    """

    supports_ttl = True  # so that a ttl reaches batch() and gets a clear answer there

    def __init__(
        self,
        bank: MemoryBank,
        *,
        text_field: str = "content",
        namespace_user: Callable[[Namespace], str] | None = None,
        user_namespace: Callable[[str], Namespace] | None = None,
        reinforce: bool | None = None,
        ttl: TTLConfig | None = None,
        summarizer: RolloverScheduler | None = None,
    ) -> None:
        if not isinstance(bank, MemoryBank):
            raise InvalidInputError(f"MemoryBankStore needs a MemoryBank, got {type(bank).__name__}")
        if not isinstance(text_field, str) or not text_field:
            raise InvalidInputError(f"text_field must name a value field, got {text_field!r}")
        if ttl and ttl.get("default_ttl") is not None:
            raise InvalidInputError(
                "MemoryBankStore forgets by the Ebbinghaus curve, not a fixed TTL: drop default_ttl "
                "and set forgetting in the bank's config (forgetting.mode, forgetting.tau)"
            )
        self.bank = bank
        self.text_field = text_field
        self.namespace_user = namespace_user or default_namespace_user
        self.user_namespace = user_namespace or default_user_namespace
        self.ttl_config = ttl
        self.summarizer = summarizer
        refresh = (ttl or {}).get("refresh_on_read", True)
        self.reinforce = bool(refresh) if reinforce is None else reinforce

    # -- BaseStore ----------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; a put is seen by the operations after it."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise InvalidInputError(f"MemoryBankStore cannot run operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (the bank's calls are blocking)."""
        return await run_in_executor(None, self.batch, list(ops))

    # -- operations ---------------------------------------------------------------------------
    def user_of(self, namespace: Namespace) -> str:
        """The bank user that ``namespace`` belongs to (an error if it names none)."""
        return validate_user(self.namespace_user(tuple(namespace)))

    def _get(self, op: GetOp) -> Item | None:
        user = self.user_of(op.namespace)
        memory = self._memory(user, op.key)
        return None if memory is None else self._item(memory, tuple(op.namespace))

    def _put(self, op: PutOp) -> None:
        if op.ttl is not None:
            raise InvalidInputError(
                "MemoryBankStore forgets by the Ebbinghaus curve, not a fixed TTL: put without ttl "
                "and set forgetting in the bank's config"
            )
        user = self.user_of(op.namespace)
        key = op.key
        if not isinstance(key, str) or not key.strip():
            raise InvalidInputError(f"a store key must be a non-empty string, got {key!r}")
        # The key's memory as stored, forgotten ones too: a put or a delete reaches an item the
        # curve forgot (get no longer shows it, but its text is still kept).
        existing = self._stored(user, key)
        if existing is not None and existing.kind is not MemoryKind.TURN:  # store items are turns
            raise InvalidInputError(
                f"store key {key!r} is the id of the user's {existing.kind.value.replace('_', ' ')}; "
                "choose another key"
            )
        if op.value is None:
            if existing is not None:
                # A key the store made may be put again; a turn another adapter stored (a chat
                # turn, a tool's save) is retired as any delete retires it: a replay of it is
                # refused, not stored again.
                own = STORE_EXTRA in existing.extra
                self.bank.delete_memory(user, key, retire=not own)
                if self.summarizer is not None:
                    self.summarizer.submit(user)  # that day's summaries may quote the item
            return
        if not isinstance(op.value, dict):
            raise InvalidInputError(f"a store value must be a dict, got {type(op.value).__name__}")
        text = self._text(op.value, op.index)
        now = self.bank.clock().isoformat(timespec="microseconds")
        meta = {"value": op.value, "updated_at": now}
        if existing is None:
            memory = self.bank.add_turn(
                user,
                text,
                "",
                memory_id=key,
                extra={STORE_EXTRA: {**meta, "created_at": now}},
                revive_deleted=True,  # a put after a delete (or after the user's forget) is a new item
            )
            if self.summarizer is not None:
                self.summarizer.on_turn(user, memory.date)  # queues the finished days; never raises
            return
        previous = existing.extra.get(STORE_EXTRA) or {}
        created = previous.get("created_at") or existing.timestamp or existing.date
        extra = {**existing.extra, STORE_EXTRA: {**meta, "created_at": created}}
        self.bank.update_memory(user, key, text=text if text != existing.text else None, extra=extra)
        if text == existing.text and previous.get("value") != op.value:
            self.bank.storage.scrub()  # a field removed or changed: its old value leaves the files too
        if existing.archived and not existing.hidden:  # forgotten, written again: back in get and
            self.bank.restore(user, [key])  # search, its clock restarted (one the user hid stays hidden)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        user = self.user_of(prefix)
        if not self.bank.has_user(user) or op.limit <= 0:
            return []
        wanted = op.offset + op.limit
        if op.query is not None and not isinstance(op.query, str):
            raise InvalidInputError(f"a search query must be a string, got {type(op.query).__name__}")
        if op.query and op.query.strip():
            scored = self._ranked(user, op.query, wanted if not op.filter else None)
        else:
            items = self.bank.storage.memories(
                self.bank.user(user).id, kinds=RETRIEVABLE_KINDS, include_archived=False
            )
            newest = sorted(items, key=lambda m: (self._times(m)[1], m.rowid or 0), reverse=True)
            scored = [(m, None) for m in newest]  # type: ignore[misc]
        if op.filter:
            scored = [(m, s) for m, s in scored if self._match(m, op.filter)]
        page = scored[op.offset : wanted]
        if op.query and op.query.strip() and page and self.reinforce and op.refresh_ttl:
            memories = [m for m, _ in page]
            self.bank.reinforce(user, [m.memory_id for m in memories], _memories=memories)
        return [self._search_item(m, prefix, s) for m, s in page]

    def _ranked(self, user: str, query: str, wanted: int | None) -> list[tuple[Memory, float]]:
        """The user's live memories ranked for ``query``: the first ``wanted`` (``None``: all).
        A forgotten item is gone from get and search, but the cold tier still ranks it: the
        bank is asked for more until enough live ones are found or there are no more."""
        k = max(self._count(user), 1) if wanted is None else wanted + 16
        while True:
            found = self.bank.search(user, query, k=k)
            live = [(r.memory, float(r.score)) for r in found if not r.memory.archived]
            if (wanted is not None and len(live) >= wanted) or len(found) < k or wanted is None:
                return live
            k *= 2

    def _list_namespaces(self, op: ListNamespacesOp) -> list[Namespace]:
        namespaces = [tuple(self.user_namespace(u)) for u in self.bank.users()]
        if op.match_conditions:
            namespaces = [ns for ns in namespaces if all(_matches(ns, c) for c in op.match_conditions)]
        if op.max_depth is not None:
            namespaces = [ns[: op.max_depth] for ns in namespaces]
        return sorted(set(namespaces))[op.offset : op.offset + op.limit]

    # -- helpers ------------------------------------------------------------------------------
    def _stored(self, user: str, key: str) -> Memory | None:
        """The user's memory with id ``key``, whatever its kind, forgotten or not."""
        if not self.bank.has_user(user):
            return None
        return self.bank.storage.get_memory(self.bank.user(user).id, key)  # an index lookup

    def _memory(self, user: str, key: str) -> Memory | None:
        memory = self._stored(user, key)
        if memory is None or memory.archived or memory.kind not in RETRIEVABLE_KINDS:
            return None
        return memory

    def _count(self, user: str) -> int:
        """The user's searchable memories, forgotten ones included."""
        rec = self.bank.user(user)
        return len(self.bank.storage.memories(rec.id, kinds=RETRIEVABLE_KINDS, include_archived=True))

    def _text(self, value: dict[str, Any], index: Any) -> str:
        fields = list(index) if isinstance(index, (list, tuple)) and index else [self.text_field]
        parts = []
        for name in fields:
            field = value.get(name)
            if isinstance(field, str):
                parts.append(field)
            elif field is not None:
                parts.append(_json(field, f"the store value's {name!r} field"))
        text = "\n".join(p for p in parts if p.strip())
        if not text.strip():
            text = _json(value, "the store value")
        if not text.strip() or text == "{}":
            raise InvalidInputError(
                f"the store value has no text to remember: give it a {self.text_field!r} field"
            )
        return text

    def value(self, memory: Memory) -> dict[str, Any]:
        """The item value of a memory: what was put, else its text, kind and date."""
        stored = memory.extra.get(STORE_EXTRA)
        if isinstance(stored, dict) and isinstance(stored.get("value"), dict):
            return dict(stored["value"])
        return {self.text_field: memory.text, "kind": memory.kind.value, "date": memory.date}

    @staticmethod
    def _times(memory: Memory) -> tuple[dt.datetime, dt.datetime]:
        stored = memory.extra.get(STORE_EXTRA) or {}
        fallback = memory.timestamp or memory.date
        created = _utc(stored.get("created_at"), fallback)
        return created, _utc(stored.get("updated_at"), created.isoformat())

    def _match(self, memory: Memory, wanted: dict[str, Any]) -> bool:
        if not isinstance(wanted, dict):
            raise InvalidInputError(
                f"a search filter must be a dict of field: value, got {type(wanted).__name__}"
            )
        value = self.value(memory)
        return all(_compare(value.get(k), v) for k, v in wanted.items())

    def _item(self, memory: Memory, namespace: Namespace) -> Item:
        created, updated = self._times(memory)
        return Item(
            value=self.value(memory),
            key=memory.memory_id,
            namespace=namespace,
            created_at=created,
            updated_at=updated,
        )

    def _search_item(self, memory: Memory, namespace: Namespace, score: float | None) -> SearchItem:
        created, updated = self._times(memory)
        return SearchItem(
            namespace=namespace,
            key=memory.memory_id,
            value=self.value(memory),
            created_at=created,
            updated_at=updated,
            score=score,
        )


def _json(value: Any, what: str) -> str:
    """``value`` as JSON text; a value JSON cannot hold (a date, a set, bytes) is a clear error."""
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as e:
        raise InvalidInputError(
            f"{what} is not JSON ({e}); store strings, numbers, lists and dicts"
        ) from None
