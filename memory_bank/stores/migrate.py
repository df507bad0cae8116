"""Copying one store into another, in either direction, and verifying the copy.

:func:`migrate` copies every user, memory (every field) and stored embedding from one store to
another (SQLite to PostgreSQL, back, or between two of a kind) and checks that the destination
holds exactly what was read from the source.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memory_bank.errors import InvalidInputError, StoreError
from memory_bank.records import Memory, MemoryKind
from memory_bank.stores import open_storage
from memory_bank.stores.base import Storage, UserRecord

logger = logging.getLogger(__name__)


def stored_embeddings(storage: Storage, user_id: int) -> dict[int, tuple[str, np.ndarray]]:
    """Every stored vector of a user's memories, archived ones included: ``rowid -> (encoder,
    vector)`` (inside an open ``snapshot()``, from the same consistent state)."""
    return storage.embeddings(user_id)


def _fingerprint(memories: list[Memory], vectors: list[tuple[str, np.ndarray] | None]) -> str:
    """A digest of every field of every memory (rowids aside) and of its stored vector."""
    h = hashlib.sha256()
    for m, v in sorted(zip(memories, vectors, strict=True), key=lambda p: p[0].memory_id):
        fields = dataclasses.asdict(m)
        fields.pop("rowid")
        fields["kind"] = m.kind.value
        h.update(repr(sorted(fields.items())).encode())
        if v is not None:
            h.update(v[0].encode() + b"\0" + np.ascontiguousarray(v[1], dtype=np.float32).tobytes())
        h.update(b"\x1e")
    return h.hexdigest()


def _tally(memories: list[Memory], vectors: dict[int, tuple[str, np.ndarray]]) -> dict[str, Any]:
    kinds = {k.value: 0 for k in MemoryKind}
    for m in memories:
        kinds[m.kind.value] += 1
    return {
        "memories": kinds,
        "archived": sum(m.archived for m in memories),
        "embeddings": sum(1 for m in memories if m.rowid in vectors),
        "fingerprint": _fingerprint(memories, [vectors.get(m.rowid or 0) for m in memories]),
    }


@contextmanager
def _opened(store: Storage | str | Path, *, create: bool) -> Iterator[Storage]:
    if isinstance(store, Storage):
        yield store
        return
    opened = open_storage(store, create=create)
    try:
        yield opened
    finally:
        opened.close()


def _progress_bar(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total, desc="migrating", unit="memory", disable=None if enabled else True, file=sys.stderr
    )


def migrate(
    src: Storage | str | Path,
    dst: Storage | str | Path,
    progress: bool = True,
    *,
    replace: bool = False,
    batch_size: int = 1000,
    on_user: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Copy every user, memory (context, extra, strength, recall date, archived and stale flags
    included) and stored embedding from ``src`` to ``dst`` (stores or their URLs/directories).

    Each user is read in one snapshot and written in batches; vectors are copied as stored, never
    re-embedded. A user that already exists in ``dst`` is an error unless ``replace=True`` (then
    it is deleted there first), so rerunning an interrupted migration needs ``replace=True``.
    At the end every user is read back from ``dst`` and compared with what was read from
    ``src``: counts per kind, archived, embeddings, and a digest of every field and vector.
    A mismatch raises :class:`StoreError`. Stop writers to ``src`` while it runs (or accept that
    their writes are not copied; the final total check reports it).

    Returns ``{"users": n, "memories": {kind: n}, "archived": n, "embeddings": n}``.
    """
    if batch_size < 1:
        raise InvalidInputError(f"batch_size must be at least 1, got {batch_size}")
    with _opened(src, create=False) as source, _opened(dst, create=True) as target:
        return _migrate(source, target, progress, replace, batch_size, on_user)


def _check_encoders(src: Storage, dst: Storage) -> None:
    """A store searches with one encoder: vectors of another copied in are never found (its
    ``check`` says ok). Refused before anything is written; into a store that holds no vectors
    yet, the source's encoder record comes along."""
    from memory_bank import encoder_identity as identity

    src_enc = identity.recorded(src.meta()) or identity.from_vectors(src.vector_encoders())
    held = dst.vector_encoders()
    if src_enc is None:
        return
    if not held:
        record = {identity.NAME_KEY: src_enc.name, identity.DIM_KEY: str(src_enc.dim)}
        dst.set_meta({**record, identity.PROBE_KEY: src_enc.fingerprint or ""}, replace=True)
        return
    dst_enc = identity.recorded(dst.meta()) or identity.from_vectors(held)
    if dst_enc is not None and (dst_enc.name, dst_enc.dim) != (src_enc.name, src_enc.dim):
        raise InvalidInputError(
            f"the destination's memories are embedded with {identity.describe(dst_enc)} and the "
            f"source's with {identity.describe(src_enc)}: a store searches with one encoder, so the "
            "copied ones would never be found; re-embed one of the two first ('memorybank reembed "
            "--store ... --encoder ...'), or migrate into an empty store"
        )


def _migrate(
    src: Storage,
    dst: Storage,
    progress: bool,
    replace: bool,
    batch_size: int,
    on_user: Callable[[str], None] | None,
) -> dict[str, Any]:
    _check_encoders(src, dst)
    users = src.list_users()
    clashes = [u.name for u in users if dst.get_user(u.name) is not None]
    if clashes and not replace:
        raise InvalidInputError(
            f"the destination already has {len(clashes)} of these users ({', '.join(map(repr, clashes[:5]))}"
            f"{', ...' if len(clashes) > 5 else ''}); pass replace=True (--replace) to overwrite them"
        )
    dst_was_empty = not dst.list_users()
    before = src.counts()
    totals: dict[str, Any] = {
        "users": 0,
        "memories": {k.value: 0 for k in MemoryKind},
        "archived": 0,
        "embeddings": 0,
    }
    with _progress_bar(sum(before["memories"].values()), progress) as bar:
        for user in users:
            with src.snapshot():
                rec = next((u for u in src.list_users() if u.id == user.id), None)
                if rec is None:  # deleted meanwhile
                    continue
                mems = sorted(src.memories(rec.id), key=lambda m: m.rowid or 0)
                vecs = stored_embeddings(src, rec.id)
            expected = _tally(mems, vecs)
            if len({(encoder, len(vec)) for encoder, vec in vecs.values()}) <= 1:  # the usual case
                new = _copy_whole(dst, rec.name, rec.extra, mems, vecs)
                bar.update(len(mems))
            else:
                new = _copy_in_batches(
                    dst, rec.name, rec.extra, mems, vecs, batch_size, bar, rec.name in clashes
                )
            if rec.last_forget_date:
                dst.set_forget_date(new.id, rec.last_forget_date)
            got_mems = sorted(dst.memories(new.id), key=lambda m: m.rowid or 0)
            got = _tally(got_mems, stored_embeddings(dst, new.id))
            if got != expected:
                problems = [k for k in expected if expected[k] != got[k]]
                raise StoreError(
                    f"verification failed for user {rec.name!r}: {', '.join(problems)} differ "
                    f"(source {[expected[k] for k in problems]}, destination {[got[k] for k in problems]})"
                )
            totals["users"] += 1
            for kind, n in expected["memories"].items():
                totals["memories"][kind] += n
            totals["archived"] += expected["archived"]
            totals["embeddings"] += expected["embeddings"]
            if on_user:
                on_user(rec.name)
    dst.put_retired_ids(src.retired_ids())  # a retry of a deleted turn stays refused in the copy
    after = src.counts()
    if after != before:
        logger.warning("the source changed during the migration; writes made meanwhile may be missing")
    if dst_was_empty:
        final = dst.counts()
        if (final["users"], final["memories"], final["archived"]) != (
            totals["users"],
            totals["memories"],
            totals["archived"],
        ):
            raise StoreError(
                f"verification failed: the destination holds {final} but {totals} were copied; "
                "was it written to during the migration?"
            )
    logger.info("migrated %d users, %d memories", totals["users"], sum(totals["memories"].values()))
    return totals


def _copy_whole(
    dst: Storage,
    name: str,
    extra: dict[str, Any],
    mems: list[Memory],
    vecs: dict[int, tuple[str, np.ndarray]],
) -> UserRecord:
    """Write a user whose vectors come from one encoder in one transaction (replacing any user
    of that name): a migration killed midway leaves the user as it was, or not there, never
    half-copied (memories without their vectors, which a later run or ``check`` would miss)."""
    copies = [dataclasses.replace(m, rowid=None) for m in mems]
    embedded = [i for i, m in enumerate(mems) if m.rowid in vecs]
    encoder = vecs[mems[embedded[0]].rowid or 0][0] if embedded else ""
    vectors = np.stack([vecs[mems[i].rowid or 0][1] for i in embedded]) if embedded else None
    return dst.replace_user(name, extra, copies, embedded, vectors, encoder)


def _copy_in_batches(
    dst: Storage,
    name: str,
    extra: dict[str, Any],
    mems: list[Memory],
    vecs: dict[int, tuple[str, np.ndarray]],
    batch_size: int,
    bar: Any,
    clash: bool,
) -> UserRecord:
    """Write a user whose vectors come from several encoders: the memories, then each
    encoder's vectors, in batches (an interrupted run is rerun with ``replace``)."""
    if clash:
        old = dst.get_user(name)
        if old is not None:
            dst.delete_user(old.id)
    new = dst.ensure_user(name, extra)
    dst.set_user_extra(new.id, extra)
    rowid_map: dict[int, int] = {}
    for start in range(0, len(mems), batch_size):
        chunk = [dataclasses.replace(m, rowid=None) for m in mems[start : start + batch_size]]
        new_ids = dst.add_memories(new.id, chunk, None, "")
        rowid_map.update(zip((m.rowid or 0 for m in mems[start : start + batch_size]), new_ids, strict=True))
        bar.update(len(chunk))
    by_encoder: dict[tuple[str, int], list[tuple[int, np.ndarray]]] = {}
    for old_id, (encoder, vec) in vecs.items():
        if old_id in rowid_map:
            by_encoder.setdefault((encoder, len(vec)), []).append((rowid_map[old_id], vec))
    for (encoder, _dim), items in by_encoder.items():
        for start in range(0, len(items), batch_size):
            part = items[start : start + batch_size]
            dst.put_vectors([r for r, _ in part], np.stack([v for _, v in part]), encoder)
    return new
