"""Fault in a large new buffer's memory on another thread while the caller fills it.

A restart of a big user copies its vectors into one new matrix (1.5 GB at a million memories
of 384 dimensions). The first write to each page of fresh memory traps into the kernel, which
finds, zeroes and maps a page, or, for the transparent huge pages NumPy asks for, compacts memory
to find 2 MB of it: measured here, 0.4-3.3 s for 1.5 GB in 2 MB pages, 1.5 s in 4 KB pages, all
of it on the thread that fills the matrix, between its reads from the store.

:func:`populate` hands that work to a helper thread: Linux's ``MADV_POPULATE_WRITE`` (5.14+)
faults a range in as writes would, without writing to it, so the helper can run while the
caller writes the same buffer (a page it reaches first is left as it is). The helper works from
the end of the rows to be filled towards their start, meeting the filling thread in between.
Elsewhere (another system, an older kernel) nothing is done and the writes fault as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys
import threading
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

#: ``MADV_POPULATE_WRITE`` from Linux's ``<asm-generic/mman-common.h>``.
MADV_POPULATE_WRITE = 23
#: Buffers smaller than this are filled faster than a thread starts.
MIN_BYTES = 64 << 20
#: Bytes faulted in per call, the last chunk first (pages the filler reached are skipped cheaply).
CHUNK = 32 << 20
_PAGE = 4096

_libc: ctypes.CDLL | None = None
_unsupported = sys.platform != "linux"


def _madvise() -> Any:
    """libc's ``madvise``, or ``None`` where it cannot populate."""
    global _libc, _unsupported
    if _unsupported:
        return None
    if _libc is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        except OSError:
            _unsupported = True
            return None
        libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        libc.madvise.restype = ctypes.c_int
        _libc = libc
    return _libc.madvise


def populate(buf: np.ndarray, nbytes: int | None = None) -> threading.Thread | None:
    """Start faulting in the first ``nbytes`` (default: all) of ``buf``'s memory, a fresh
    C-contiguous array, on a daemon thread that holds ``buf`` until it is done; the thread, or
    ``None`` when the buffer is small or the system cannot."""
    size = buf.nbytes if nbytes is None else min(nbytes, buf.nbytes)
    if size < MIN_BYTES or not buf.flags.c_contiguous or _madvise() is None:
        return None
    thread = threading.Thread(target=_run, args=(buf, size), name="memorybank-prefault", daemon=True)
    thread.start()
    return thread


def _run(buf: np.ndarray, size: int) -> None:
    global _unsupported
    madvise = _madvise()
    if madvise is None:
        return
    start = buf.ctypes.data
    first = start - start % _PAGE  # madvise takes page-aligned addresses
    end = start + size
    hi = end
    while hi > first:
        lo = max(first, hi - CHUNK)
        lo -= lo % _PAGE
        if madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), MADV_POPULATE_WRITE) != 0:
            errno = ctypes.get_errno()
            if errno == 22:  # EINVAL: a kernel without MADV_POPULATE_WRITE
                _unsupported = True
            logger.debug("prefault stopped: errno %d", errno)
            return
        hi = lo
    del buf
