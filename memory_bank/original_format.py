"""Import and export of the original MemoryBank memory file, without loss.

The format (one JSON object for all users)::

    {user_key: {"name": str,
                "history": {"YYYY-MM-DD": [{"query": str, "response": str, ...}, ...]},
                "summary": {"YYYY-MM-DD": {"content": str, ...} | str},
                "personality": {"YYYY-MM-DD": str},
                "overall_history": str, "overall_personality": str,
                "meta_information": {...}}}

With forgetting on, turns and daily summaries also carry ``memory_strength``, ``memory_id`` and
``last_recall_date``. Older files hold a turn as ``[query, response]`` and a summary as a plain
string; user keys may have stray spaces. Everything this package does not interpret (unknown
keys, the shape of each record, which optional fields were present, empty days) is kept in the
records' ``extra`` so that import -> export gives back the same data.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_bank.errors import InvalidInputError, MemoryBankError, MemoryFileError
from memory_bank.records import MAX_STRENGTH, Memory, MemoryKind, misplaced_layer_id, turn_text
from memory_bank.salience import content_weight
from memory_bank.text import (
    canonical_day,
    check_text,
    check_unicode,
    parse_day,
    parse_time,
    user_key,
    validate_user,
)

if TYPE_CHECKING:
    from memory_bank.bank import MemoryBank

logger = logging.getLogger(__name__)

_FORGET_KEYS = ("memory_strength", "memory_id", "last_recall_date")
#: This package's state flags, written only when set: ``archived`` (forgotten by the curve, still
#: consulted by the cold tier) and ``hidden`` (hidden by the user, never retrieved until restored).
_STATE_KEYS = ("archived", "hidden")
#: A daily layer's flag this package adds, written when set: ``stale`` (its day changed since it
#: was written: the summariser makes it again). An empty layer is read as stale.
_LAYER_KEYS = ("stale",)
#: A turn's fields this package adds, written when set: ``timestamp`` (when it was said, ISO 8601)
#: and ``weight`` (its content weight, which scales its forgetting: see :mod:`memory_bank.salience`).
_TURN_KEYS = ("timestamp", "weight")
#: The largest content weight a file may give (the package's own are 0.25-2).
MAX_WEIGHT = 100.0
_KNOWN_USER_KEYS = (
    "name",
    "history",
    "summary",
    "personality",
    "overall_history",
    "overall_personality",
    "meta_information",
)


#: Deepest nesting of JSON accepted in a memory file (the format itself needs five levels).
MAX_DEPTH = 64


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise MemoryFileError(
                f"key {key!r} appears twice in one object; JSON readers would keep only one of "
                "them and lose the other's memories: merge or rename them"
            )
        seen[key] = value
    return seen


def parse_memory_json(text: str, source: str) -> Any:
    """Parse memory-file JSON, refusing duplicate keys and nesting deeper than :data:`MAX_DEPTH`."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except MemoryFileError as e:
        raise MemoryFileError(f"{source}: {e}") from e
    except RecursionError as e:
        raise MemoryFileError(
            f"{source}: JSON nested too deeply to read (more than {MAX_DEPTH} levels); "
            "a memory file needs five"
        ) from e
    except json.JSONDecodeError as e:
        raise MemoryFileError(
            f"memory file {source!r} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
        ) from e
    except ValueError as e:  # a number too long to read as one (Python's digit limit)
        raise MemoryFileError(f"memory file {source!r} holds a value that cannot be read: {e}") from e


def load_memory_file(path: str | Path) -> dict[str, Any]:
    """Read and check a memory file; raises :class:`MemoryFileError` naming the problem."""
    p = Path(path)
    if not p.is_file():
        what = "is not a regular file" if p.exists() else "does not exist"
        raise MemoryFileError(f"memory file {str(p)!r} {what}; give the path of a JSON memory file")
    try:
        text = p.read_bytes().decode("utf-8-sig")
    except OSError as e:
        raise MemoryFileError(f"cannot read memory file {str(p)!r}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise MemoryFileError(f"memory file {str(p)!r} is not UTF-8 text ({e}); save it as UTF-8") from e
    data = parse_memory_json(text, str(p))
    check_memory_data(data, source=str(p))
    return data


def _fail(source: str, where: str, problem: str) -> MemoryFileError:
    return MemoryFileError(f"{source}: {where}: {problem}")


def _check_json_values(value: Any, source: str, where: str, depth: int = 0) -> None:
    """Every string (keys too) of free-form fields must be storable: no lone surrogates, no NUL,
    bounded nesting (they are written back as JSON)."""
    if depth > MAX_DEPTH:
        raise _fail(source, where, f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        try:
            check_unicode(value, "a text")
        except InvalidInputError as e:
            raise _fail(source, where, str(e)) from e
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_json_values(k, source, where, depth + 1)
            _check_json_values(v, source, where, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_json_values(v, source, where, depth + 1)


def _text(value: Any, source: str, where: str, *, allow_empty: bool = True) -> None:
    try:
        check_text(value, where.rsplit(", ", 1)[-1], allow_empty=allow_empty)
    except InvalidInputError as e:
        raise _fail(source, where, str(e)) from e


def check_memory_data(data: Any, *, source: str = "memory file") -> None:
    """Validate loaded memory-file data before anything is written: the structure, every text
    (the limits that :meth:`MemoryBank.add_turn` applies), day keys in the one stored form
    ``YYYY-MM-DD``, strengths and ids. Anything that could fail while writing fails here."""
    if not isinstance(data, dict):
        raise _fail(
            source,
            "top level",
            f"expected an object mapping user names to memories, got {type(data).__name__}",
        )
    for key, user in data.items():
        where = f"user {key!r}"
        try:
            validate_user(key)
        except InvalidInputError as e:
            raise _fail(source, where, str(e)) from e
        if not isinstance(user, dict):
            raise _fail(source, where, f"expected an object, got {type(user).__name__}")
        if user and not any(k in user for k in _KNOWN_USER_KEYS):  # tsconfig.json's compilerOptions
            raise _fail(
                source,
                where,
                "has none of a memory file's fields (history, summary, personality, overall_history, "
                "...); is this a MemoryBank memory file?",
            )
        _check_json_values(user, source, where)
        for field in ("history", "summary", "personality"):
            value = user.get(field, {})
            if not isinstance(value, dict):
                raise _fail(
                    source,
                    f"{where}, {field!r}",
                    f"expected an object keyed by date, got {type(value).__name__}",
                )
            for day in value:
                try:
                    canonical_day(day, "key")
                except InvalidInputError as e:
                    problem = f"key {day!r} is not a date (YYYY-MM-DD)"
                    with contextlib.suppress(InvalidInputError):
                        same = parse_day(day)
                        problem = f"key {day!r} is not in the form YYYY-MM-DD; write it as {same!r}"
                        if same in value:
                            problem += f" (the key {same!r} names the same day: merge the two)"
                    raise _fail(source, f"{where}, {field!r}", problem) from e
        ids: set[str] = set()
        for day, turns in user.get("history", {}).items():
            if not isinstance(turns, list):
                raise _fail(
                    source, f"{where}, history {day}", f"expected a list of turns, got {type(turns).__name__}"
                )
            for i, turn in enumerate(turns):
                _check_turn(turn, source, f"{where}, history {day}, turn {i}", ids, day)
        for field in ("summary", "personality"):
            for day, rec in user.get(field, {}).items():
                at = f"{where}, {field} {day}"
                text = rec.get("content") if isinstance(rec, dict) else rec
                if not isinstance(text, str):
                    raise _fail(source, at, 'expected a string or {"content": string}')
                _text(text, source, f"{at}, content")
                if isinstance(rec, dict):
                    _check_forget_fields(rec, source, at, ids, day)
                    if "stale" in rec and not isinstance(rec["stale"], bool):
                        raise _fail(source, at, f"stale must be true or false, got {rec['stale']!r}")
        for field in ("overall_history", "overall_personality"):
            if field in user and not isinstance(user[field], str | type(None)):
                raise _fail(
                    source, f"{where}, {field!r}", f"expected a string, got {type(user[field]).__name__}"
                )
            if isinstance(user.get(field), str):
                _text(user[field], source, f"{where}, {field}")


def _check_forget_fields(rec: dict[str, Any], source: str, where: str, ids: set[str], day: str) -> None:
    strength = rec.get("memory_strength", 1)
    if not isinstance(strength, int) or isinstance(strength, bool) or not 1 <= strength <= MAX_STRENGTH:
        raise _fail(
            source,
            where,
            f"memory_strength must be a whole number from 1 to {MAX_STRENGTH}, got {strength!r}",
        )
    if rec.get("last_recall_date") is not None:
        try:
            recalled = parse_day(rec["last_recall_date"])
        except InvalidInputError as e:
            raise _fail(source, where, f"last_recall_date {rec['last_recall_date']!r} is not a date") from e
        try:
            learned = parse_day(day)
        except InvalidInputError:  # (the day itself is refused with the history)
            learned = recalled
        if recalled < learned:  # its forgetting clock would count from before it existed
            raise _fail(
                source,
                where,
                f"last_recall_date {recalled} is before the memory's own day {learned}: a memory "
                "is not recalled before it is learned; set it to that day or later, or remove it",
            )
    for flag in ("archived", "hidden"):
        if flag in rec and not isinstance(rec[flag], bool):
            raise _fail(source, where, f"{flag} must be true or false, got {rec[flag]!r}")
    memory_id = rec.get("memory_id")
    if memory_id is not None:
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise _fail(source, where, f"memory_id must be a non-empty string, got {memory_id!r}")
        _text(memory_id, source, f"{where}, memory_id")
        if memory_id in ids:
            raise _fail(
                source, where, f"memory_id {memory_id!r} is used twice for this user; ids must be unique"
            )
        ids.add(memory_id)


def _check_turn(turn: Any, source: str, where: str, ids: set[str], day: str) -> None:
    if isinstance(turn, list):
        if len(turn) != 2 or not all(isinstance(x, str) for x in turn):
            raise _fail(source, where, "a list turn must be [query, response] (two strings)")
        _text(turn[0], source, f"{where}, query")
        _text(turn[1], source, f"{where}, response")
        return
    if not isinstance(turn, dict):
        raise _fail(
            source, where, f'expected {{"query", "response"}} or [query, response], got {type(turn).__name__}'
        )
    for field in ("query", "response"):
        if not isinstance(turn.get(field), str):
            raise _fail(source, where, f"{field!r} must be a string, got {type(turn.get(field)).__name__}")
        _text(turn[field], source, f"{where}, {field}")
    _check_forget_fields(turn, source, where, ids, day)
    if turn.get("timestamp") is not None:
        try:
            parse_time(turn["timestamp"] if isinstance(turn["timestamp"], str) else "?")
        except InvalidInputError as e:
            raise _fail(source, where, f"timestamp {turn['timestamp']!r} is not an ISO 8601 time") from e
    weight = turn.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= MAX_WEIGHT:
        raise _fail(
            source, where, f"weight must be a number above 0 and at most {MAX_WEIGHT:g}, got {weight!r}"
        )


#: Where a record's forgetting and state fields are kept as the file gave them (see :func:`_as_given`).
_GIVEN = "given"


def _split_record(record: dict[str, Any], known: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fields we model, shape info + everything else) for a dict record. The forgetting and
    state fields are also kept as given (``"archived": false``, ``"memory_id": null``), so an
    export writes them back as they were while the memory is as imported."""
    info: dict[str, Any] = {"fields": list(record)}
    other = {k: v for k, v in record.items() if k not in known}
    if other:
        info["other"] = other
    given = {k: record[k] for k in (*_FORGET_KEYS, *_STATE_KEYS, *_TURN_KEYS, *_LAYER_KEYS) if k in record}
    if given:
        info[_GIVEN] = given
    return {k: record[k] for k in known if k in record}, info


#: Where a turn keeps its ``timestamp`` as the file spelled it, when the store's form (to the
#: second, ``+00:00`` for ``Z``) differs: an export gives the file's spelling back while the
#: stored time is still the one it was read as (a recall or an edit of the turn changes no time).
_TIME_AS_GIVEN = "timestamp_as_given"


def _time_of(given: str | None, info: dict[str, Any]) -> str | None:
    """A turn's ``timestamp`` as the store keeps it (to the second, as ``add_turn`` writes it)."""
    if given is None:
        return None
    stored = parse_time(given).isoformat(timespec="seconds")
    if stored != given:
        info[_TIME_AS_GIVEN] = given
    return stored


def user_memories(name: str, user: dict[str, Any]) -> tuple[list[Memory], dict[str, Any]]:
    """Memories and user-level extra for one user of a memory file."""
    mems: list[Memory] = []
    history = user.get("history", {}) or {}
    for day_key, turns in history.items():
        day = parse_day(day_key)
        previous: str | None = None  # the reply this turn answers: indexed with it
        for i, turn in enumerate(turns):
            if isinstance(turn, list):
                fields, info = {"query": turn[0], "response": turn[1]}, {"shape": "list"}
            else:
                fields, info = _split_record(
                    turn, ("query", "response", *_FORGET_KEYS, *_STATE_KEYS, *_TURN_KEYS)
                )
            mems.append(
                Memory(
                    memory_id=fields.get("memory_id") or f"{name}_{day}_{i}",
                    user=name,
                    kind=MemoryKind.TURN,
                    date=day,
                    turn=i,
                    query=fields["query"],
                    response=fields["response"],
                    text=turn_text(fields["query"], fields["response"]),
                    strength=int(fields.get("memory_strength", 1)),
                    last_recall_date=_recall_day(fields, info),
                    archived=bool(fields.get("archived", False) or fields.get("hidden", False)),
                    hidden=bool(fields.get("hidden", False)),
                    extra=info,
                    context=previous,
                    timestamp=_time_of(fields.get("timestamp"), info),
                    # As given; else set as add_turn sets it (the original format has none).
                    weight=float(fields["weight"]) if "weight" in fields else content_weight(fields["query"]),
                )
            )
            previous = fields["response"] or None
    for field, kind, suffix in (
        ("summary", MemoryKind.DAILY_SUMMARY, "summary"),
        ("personality", MemoryKind.DAILY_PERSONALITY, "personality"),
    ):
        for day_key, rec in (user.get(field, {}) or {}).items():
            day = parse_day(day_key)
            if isinstance(rec, dict):
                fields, info = _split_record(rec, ("content", *_FORGET_KEYS, *_STATE_KEYS, *_LAYER_KEYS))
                text = fields.get("content", "")
            else:
                fields, info, text = {}, {"shape": "str"}, rec
            mems.append(
                Memory(
                    memory_id=fields.get("memory_id") or f"{name}_{day}_{suffix}",
                    user=name,
                    kind=kind,
                    date=day,
                    text=text,
                    strength=int(fields.get("memory_strength", 1)),
                    last_recall_date=_recall_day(fields, info),
                    archived=bool(fields.get("archived", False) or fields.get("hidden", False)),
                    hidden=bool(fields.get("hidden", False)),
                    # An empty summary is never a finished one (a deletion blanked it): made again.
                    stale=fields.get("stale") is True or not text.strip(),
                    extra=info,
                )
            )
    user_extra: dict[str, Any] = {
        "field_order": list(user),
        "days": list(history),
        "other": {k: v for k, v in user.items() if k not in _KNOWN_USER_KEYS},
    }
    for key in ("name", "meta_information"):
        if key in user:
            user_extra[key] = user[key]
    for field, kind in (
        ("overall_history", MemoryKind.GLOBAL_SUMMARY),
        ("overall_personality", MemoryKind.GLOBAL_PORTRAIT),
    ):
        value = user.get(field)
        if isinstance(value, str) and value:
            last_day = max(history, default="1970-01-01")
            mems.append(
                Memory(
                    memory_id=f"{name}_{field}", user=name, kind=kind, date=parse_day(last_day), text=value
                )
            )
        elif field in user:
            user_extra[f"{field}_raw"] = value
    return mems, user_extra


def user_digest(key: str, user: dict[str, Any]) -> str:
    """A digest of one user's record in a memory file: a re-run of an import recognises the users
    it already imported (and skips them) by it."""
    canon = json.dumps([key, user], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def import_data(
    bank: MemoryBank,
    data: dict[str, Any],
    *,
    replace: bool = False,
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Import checked memory-file data into ``bank``; returns memories imported per user.

    Each user is written in one transaction (:meth:`MemoryBank.import_user`): after a failure or
    a kill, a user is either wholly imported or untouched, and a replaced user keeps their old
    memories until the new ones are in. A user already in the bank is an error unless
    ``replace=True``, so an import never silently merges two histories; a user imported before
    from the same record (an interrupted import run again) is skipped, so a re-run finishes the
    job without duplicates and without ``replace`` (with ``replace`` it is imported again: the
    file's contents replace whatever changed since). Everything is checked before the first write.
    """
    check_memory_data(data)
    plan = []
    keys: dict[str, str] = {}  # the user-name rule's name -> the file's key
    for key, user in data.items():
        name = validate_user(key)
        if name in keys:
            raise MemoryFileError(
                f"users {keys[name]!r} and {key!r} of the file are one user under the user-name rule "
                "(spaces, Unicode normal form); merge them or rename one"
            )
        keys[name] = key
        digest = user_digest(key, user)
        existing = bank.find_user(key)
        if existing is not None:
            name = existing.name  # a user stored before the rule keeps their exact name
        if existing is not None and not replace and existing.extra.get("import_digest") == digest:
            # (With replace, the user asked for the file's contents back: what was added,
            # edited or deleted since the import is undone, not kept.)
            logger.warning("user %r was already imported from this record; skipped", name)
            continue
        if existing is not None and not replace:
            raise InvalidInputError(
                f"user {name!r} already has memories in this store; pass --replace to overwrite them, "
                "or import into another store"
            )
        mems, extra = user_memories(name, user)
        for m in mems:
            misplaced = misplaced_layer_id(name, m)
            if misplaced is not None:
                raise MemoryFileError(f"user {key!r}: {misplaced}")
        ids = [m.memory_id for m in mems]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise MemoryFileError(
                f"user {key!r}: memory id {dup!r} names two memories (a memory_id field equals the id "
                "of another record); make the memory_id fields unique"
            )
        extra["file_key"] = key
        extra["import_digest"] = digest
        plan.append((name, mems, extra))
    counts: dict[str, int] = {}
    for i, (name, mems, extra) in enumerate(plan):
        try:
            bank.import_user(name, mems, extra, progress=progress, replace=replace)
        except MemoryBankError as e:
            if not counts:
                raise
            # Users are written one by one: say which are in, so the store is not taken for untouched.
            left = [n for n, _, _ in plan[i:]]
            why = str(e).replace(
                "nothing of this change was written", f"nothing of user {name!r} was written"
            )
            message = (
                f"imported {', '.join(map(repr, counts))}, then stopped at user {name!r}: {why}. Not "
                f"imported: {', '.join(map(repr, left))}. Run the same command again to finish it"
            )
            try:
                error = type(e)(message)
            except TypeError:  # an error class that needs more than a message
                error = MemoryBankError(message)
            raise error from e
        counts[name] = len(mems)
    return counts


#: Where a record keeps its ``last_recall_date`` as the file spelled it, when that was not the
#: plain day (`` 2023-05-03 ``, ``2023-05-03T10:00``): the store keeps the day, which every
#: forgetting computation reads (a spelling it could not read stopped every search of the user),
#: and an export gives the file's spelling back while the recall is unchanged.
_RECALL_AS_GIVEN = "last_recall_date_as_given"


def _recall_day(fields: dict[str, Any], info: dict[str, Any]) -> str | None:
    given = fields.get("last_recall_date")
    if given is None:
        return None
    day = parse_day(given)  # checked on reading the file
    if day != given:
        info[_RECALL_AS_GIVEN] = given
    return day


def _recall_as_given(m: Memory) -> str | None:
    given = m.extra.get(_RECALL_AS_GIVEN)
    if isinstance(given, str) and m.last_recall_date is not None:
        with contextlib.suppress(InvalidInputError):
            if parse_day(given) == m.last_recall_date:
                return given
    return m.last_recall_date


def _as_given(m: Memory) -> dict[str, Any] | None:
    """The record's forgetting and state fields as the file gave them, while the memory's state
    is still what importing them made (strength, last recall, archived and hidden); else None."""
    given = m.extra.get(_GIVEN)
    if not isinstance(given, dict):
        return None
    recall = given.get("last_recall_date")
    try:
        day = parse_day(recall) if recall is not None else None
    except InvalidInputError:
        return None
    hidden = bool(given.get("hidden", False))
    imported = (
        given.get("memory_strength", 1),
        day,
        bool(given.get("archived", False)) or hidden,
        hidden,
        given.get("stale") is True,
    )
    now = (m.strength, m.last_recall_date, m.archived, m.hidden, _stale_flag(m))
    return given if imported == now else None


def _stale_flag(m: Memory) -> bool:
    """Whether ``m``'s record carries ``"stale": true``: a daily layer with text that its day's
    changes made stale (an empty one is read as stale without it)."""
    return (
        m.kind in (MemoryKind.DAILY_SUMMARY, MemoryKind.DAILY_PERSONALITY)
        and m.stale
        and bool(m.text.strip())
    )


def _same_time(given: str, stored: str) -> bool:
    try:
        return parse_time(given).isoformat(timespec="seconds") == stored
    except InvalidInputError:
        return False


def _turn_values(m: Memory) -> dict[str, Any]:
    """A turn's :data:`_TURN_KEYS` that are set (none for a summary layer)."""
    if m.kind is not MemoryKind.TURN:
        return {}
    out: dict[str, Any] = {}
    if m.timestamp:
        given = m.extra.get(_TIME_AS_GIVEN)
        same = isinstance(given, str) and _same_time(given, m.timestamp)
        out["timestamp"] = given if same else m.timestamp
    if m.weight != content_weight(m.query if m.query is not None else m.text):  # else import derives it
        out["weight"] = m.weight
    return out


def _record(
    m: Memory,
    base: dict[str, Any],
    forget_default: bool,
    default_shape: str | None = None,
    *,
    default_id: str | None = None,
) -> dict[str, Any] | list[Any] | str:
    """``m`` as a record of the file: as it was imported while nothing changed it, else with
    the fields its state needs. ``default_id`` is the id an import would give the record where
    it stands; a memory whose id differs (a turn after a deleted one moved up a place) carries
    its own, so an export imported again gives every memory the id it had."""
    pin = {"memory_id": m.memory_id} if default_id is not None and m.memory_id != default_id else {}
    shape = m.extra.get("shape", default_shape if "fields" not in m.extra else None)
    fields = m.extra.get("fields")
    if fields is not None and (given := _as_given(m)) is not None:  # as imported: as the file had it
        values = {**base, **m.extra.get("other", {}), **given}
        return {**{k: values[k] for k in fields if k in values}, **pin}
    turn = _turn_values(m)
    stale = _stale_flag(m)
    touched = m.strength != 1 or m.last_recall_date is not None or m.archived or stale
    if shape == "list" and not touched and not turn and not pin:
        return [m.query, m.response]
    if shape == "str" and not touched and not pin:
        return m.text
    forget = {
        "memory_strength": m.strength,
        "memory_id": m.memory_id,
        "last_recall_date": _recall_as_given(m),
    }
    values = {**base, **turn, **forget, **m.extra.get("other", {})}
    if m.archived:
        values["archived"] = True
    if m.hidden:
        values["hidden"] = True
    if stale:
        values["stale"] = True
    states = [k for k in (*_STATE_KEYS, *_LAYER_KEYS) if values.get(k)]
    if fields is None:  # made by this package, or reshaped: write every field
        keys = list(base) + list(turn) + (list(forget) if forget_default or touched else []) + states
    else:
        keys = list(fields)
        if touched:
            keys += [k for k in (*forget, *states) if k in values and k not in keys]
    return {**{k: values[k] for k in keys if k in values}, **pin}


def export_data(bank: MemoryBank, users: list[str] | None = None) -> dict[str, Any]:
    """The bank's memories in the original format (all users, or ``users``)."""
    with bank.storage.snapshot():
        return _export(bank, users)


def _export(bank: MemoryBank, users: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    recs = [bank.user(u) for u in users] if users else bank.storage.list_users()
    for rec in recs:
        extra = rec.extra or {}
        mems = bank.storage.memories(rec.id)
        history: dict[str, list[Any]] = {d: [] for d in extra.get("days", [])}
        summary: dict[str, Any] = {}
        personality: dict[str, Any] = {}
        overall: dict[str, str] = {}
        file_key = extra.get("file_key", rec.name)
        imported_as = user_key(file_key) or rec.name  # the name an import of the file gives
        for m in sorted(mems, key=lambda m: (m.date, m.turn if m.turn is not None else -1, m.rowid or 0)):
            if m.kind is MemoryKind.TURN:
                day = history.setdefault(m.date, [])
                default_id = f"{imported_as}_{m.date}_{len(day)}"
                day.append(
                    _record(
                        m,
                        {"query": m.query, "response": m.response},
                        forget_default=True,
                        default_id=default_id,
                    )
                )
            elif m.kind is MemoryKind.DAILY_SUMMARY:
                default_id = f"{imported_as}_{m.date}_summary"
                summary[m.date] = _record(m, {"content": m.text}, forget_default=True, default_id=default_id)
            elif m.kind is MemoryKind.DAILY_PERSONALITY:
                personality[m.date] = _record(
                    m,
                    {"content": m.text},
                    forget_default=False,
                    default_shape="str",
                    default_id=f"{imported_as}_{m.date}_personality",
                )
            elif m.kind is MemoryKind.GLOBAL_SUMMARY:
                overall["overall_history"] = m.text
            elif m.kind is MemoryKind.GLOBAL_PORTRAIT:
                overall["overall_personality"] = m.text
        values: dict[str, Any] = {
            "name": extra.get("name", rec.name),
            "history": dict(sorted(history.items())) if "days" not in extra else history,
            "summary": summary,
            "personality": personality,
            "overall_history": overall.get("overall_history", extra.get("overall_history_raw", "")),
            "overall_personality": overall.get(
                "overall_personality", extra.get("overall_personality_raw", "")
            ),
            **extra.get("other", {}),
        }
        if "meta_information" in extra:
            values["meta_information"] = extra["meta_information"]
        order = extra.get("field_order")
        if order is None:  # made by this package (an empty record imported keeps its emptiness)
            order = [*_KNOWN_USER_KEYS]
        user_out = {k: values[k] for k in order if k in values}
        for k in ("overall_history", "overall_personality", "summary", "personality", "history"):
            if k not in user_out and (k in overall or (values.get(k))):
                user_out[k] = values[k]
        out[file_key] = user_out
    return out


def _memory_file_shaped(path: Path) -> bool:
    """Whether ``path`` holds JSON a memory file could be: an object of user records (objects
    with the original format's fields, or empty), or an empty list. A settings file
    (``tsconfig.json``) or another program's data is not replaced by an export."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (OSError, ValueError, RecursionError):
        return False
    if data == []:
        return True
    return isinstance(data, dict) and all(
        isinstance(user, dict) and (not user or any(k in user for k in _KNOWN_USER_KEYS))
        for user in data.values()
    )


def json_target(path: str | Path) -> Path:
    """The file a memory file written to ``path`` replaces (a symlink's target: the link is
    kept), or :class:`InvalidInputError` when it must not be written there: a directory, a link
    to nothing, a device or pipe (a renamed temporary file would replace it), an existing file
    that is not an earlier export (empty or a memory file). Nothing is written."""
    import os

    p = Path(path)
    if p.is_symlink():  # a link to the file (latest.json -> backups/x.json): write the file, keep the link
        if not p.exists():
            raise InvalidInputError(
                f"{str(path)!r} is a link to nothing ({os.readlink(p)!r}); give a file name"
            )
        p = Path(os.path.realpath(p))
    if p.is_dir():
        raise InvalidInputError(f"{str(path)!r} is a directory; give a file name for the memory file")
    if p.exists() and not p.is_file():
        raise InvalidInputError(
            f"{str(path)!r} is not a regular file (a device or a pipe); give a file name, or leave "
            "the output out to write to standard output"
        )
    if p.is_file():
        with open(p, "rb") as f:
            head = f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
        what = None
        if head and not head.startswith((b"{", b"[")):
            what = "a database (a memory store?)" if head.startswith(b"SQLite format 3") else "not JSON"
        elif head and not _memory_file_shaped(p):
            what = "JSON that is not a memory file"
        if what is not None:
            raise InvalidInputError(
                f"{str(p)!r} exists and is {what}: it is left as it is; give another file name"
            )
    return p


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write JSON to ``path`` (see :func:`json_target`) through a temporary file and a rename,
    so a crash leaves either the old file or the new one, never half of one."""
    import os
    import tempfile

    from memory_bank.integrity import private_prefix, sweep_leftovers

    p = json_target(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    # The temporary file holds every memory exported: one a killed export left is removed here.
    sweep_leftovers(p.parent, f".{p.name}.export-")
    fd, tmp = tempfile.mkstemp(prefix=private_prefix(f".{p.name}.export-"), dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
