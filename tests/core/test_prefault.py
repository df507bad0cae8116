"""Faulting a new matrix in on another thread never changes what the loading thread writes."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from memory_bank import prefault
from memory_bank.stores.sql import matrix_with_room


def test_rows_written_while_the_helper_faults_them_in_are_kept() -> None:
    rows, dim = 120_000, 384  # 184 MB: above the size a helper starts for
    out = matrix_with_room(rows, dim)
    block = np.arange(4096 * dim, dtype=np.float32).reshape(4096, dim)
    for at in range(0, rows, 4096):  # the load's copies, racing the helper from the other end
        n = min(4096, rows - at)
        out[at : at + n] = block[:n] + at
    helper = prefault.populate(out, rows * dim * 4)  # a second pass over pages already written
    if helper is not None:
        helper.join(timeout=60)
    for at in range(0, rows, 4096):
        n = min(4096, rows - at)
        assert np.array_equal(out[at : at + n], block[:n] + at)


@pytest.mark.skipif(sys.platform != "linux", reason="MADV_POPULATE_WRITE is Linux's")
def test_a_large_buffer_gets_a_helper_and_a_small_one_none() -> None:
    assert prefault.populate(np.empty(1000, dtype=np.float32)) is None
    big = np.empty(prefault.MIN_BYTES // 4, dtype=np.float32)
    helper = prefault.populate(big)  # (a kernel before 5.14 refuses the advice: the helper stops)
    assert helper is not None
    helper.join(timeout=60)
    assert not helper.is_alive()
    big[:] = 1.0
    assert float(big.sum()) == big.size
