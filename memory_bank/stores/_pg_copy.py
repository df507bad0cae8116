"""Rows of PostgreSQL's binary ``COPY`` format, read without a Python object per value.

A binary ``COPY ... TO STDOUT`` stream is an 11-byte signature, two 32-bit words (flags and
the length of an extension area) and that area, then one tuple after another: a 16-bit field
count and, per field, a 32-bit length (``-1``: NULL) and that many bytes, all big-endian;
``-1`` as the field count ends it. A server sends each tuple in its own message (the header
with the first), which is what :func:`tuples` relies on: a message that is not exactly one
tuple is refused (``ValueError``), and the caller reads the rows another way.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_HEADER = struct.Struct(">11sii")
_COUNT = struct.Struct(">h")
_LENGTH = struct.Struct(">i")
INT8 = struct.Struct(">q")
INT4 = struct.Struct(">i")


def tuples(messages: Iterable[memoryview], fields: int) -> Iterator[list[memoryview]]:
    """The tuples of a binary COPY stream of ``fields`` non-NULL fields each, one per message,
    as views of each field's bytes (valid as long as the message is)."""
    first = True
    ended = False
    for message in messages:
        at = 0
        if first:
            first = False
            if len(message) < _HEADER.size:
                raise ValueError("a binary COPY stream too short for its header")
            signature, flags, extension = _HEADER.unpack_from(message)
            if signature != SIGNATURE or flags & 0xFFFF0000 or extension < 0:
                raise ValueError("not a binary COPY stream this reader knows")
            at = _HEADER.size + extension
        if ended:
            raise ValueError("data after the end of a binary COPY stream")
        if at + _COUNT.size > len(message):
            raise ValueError("a binary COPY message is not one tuple")
        (count,) = _COUNT.unpack_from(message, at)
        at += _COUNT.size
        if count == -1:
            ended = True
            if at != len(message):
                raise ValueError("data after the end of a binary COPY stream")
            continue
        if count != fields:
            raise ValueError(f"a binary COPY tuple of {count} fields, not {fields}")
        out = []
        for _ in range(fields):
            if at + _LENGTH.size > len(message):
                raise ValueError("a binary COPY message is not one tuple")
            (length,) = _LENGTH.unpack_from(message, at)
            at += _LENGTH.size
            if length < 0 or at + length > len(message):
                raise ValueError("a NULL or truncated field in a binary COPY tuple")
            out.append(message[at : at + length])
            at += length
        if at != len(message):
            raise ValueError("a binary COPY message is not one tuple")
        yield out
    if not first and not ended:
        raise ValueError("a binary COPY stream without its end")
