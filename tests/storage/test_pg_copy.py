"""The binary COPY reader: tuples of a known field count, one per message, and a clear refusal
(``ValueError``) of anything else, which sends the PostgreSQL store to its other read path."""

from __future__ import annotations

import struct

import pytest

from memory_bank.stores._pg_copy import SIGNATURE, tuples

HEADER = SIGNATURE + struct.pack(">ii", 0, 0)
END = struct.pack(">h", -1)


def _tuple(*fields: bytes | None) -> bytes:
    out = struct.pack(">h", len(fields))
    for f in fields:
        out += struct.pack(">i", -1) if f is None else struct.pack(">i", len(f)) + f
    return out


def _read(messages: list[bytes], fields: int) -> list[list[bytes]]:
    return [[bytes(f) for f in t] for t in tuples((memoryview(m) for m in messages), fields)]


def test_tuples_one_per_message_with_the_header_in_the_first() -> None:
    first = _tuple(struct.pack(">q", 7), "日记".encode(), b"")
    second = _tuple(struct.pack(">q", 8), b"x" * 5000, b"\x00\x01")
    assert _read([HEADER + first, second, END], 3) == [
        [struct.pack(">q", 7), "日记".encode(), b""],
        [struct.pack(">q", 8), b"x" * 5000, b"\x00\x01"],
    ]
    assert _read([HEADER + END], 3) == []  # no rows: the header and the end in one message
    extension = SIGNATURE + struct.pack(">ii", 0, 4) + b"abcd"
    assert _read([extension + _tuple(b"a"), END], 1) == [[b"a"]]  # an extension area is skipped


@pytest.mark.parametrize(
    ("messages", "why"),
    [
        ([HEADER + _tuple(b"a", None), END], "NULL"),
        ([HEADER + _tuple(b"a"), END], "1 fields, not 2"),
        ([HEADER + _tuple(b"a", b"b") + _tuple(b"c", b"d"), END], "not one tuple"),
        ([HEADER + _tuple(b"a", b"b")[:-1], END], "truncated"),
        ([HEADER + _tuple(b"a", b"b")], "without its end"),
        ([HEADER + END, _tuple(b"a", b"b")], "after the end"),
        ([b"PGCOPY\n\xff\r\n\x01" + struct.pack(">ii", 0, 0) + END], "not a binary COPY"),
        ([SIGNATURE + struct.pack(">ii", 1 << 16, 0) + END], "not a binary COPY"),  # a critical flag
        ([b"PGCOPY"], "too short"),
    ],
)
def test_anything_else_is_refused(messages: list[bytes], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        _read(messages, 2)
