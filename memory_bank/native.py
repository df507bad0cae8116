"""The compiled kernels (``memory_bank/_native.c``, which ``setup.py`` builds), or ``None`` each
where the install had no C compiler; every caller then takes its NumPy path, which gives the
same results bit for bit (tests/bench/test_native.py holds them to that).

The extension is loaded by name rather than imported from the package so that this module does
not import ``memory_bank``'s ``__init__`` (and with it the whole library) at import time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

_module: Any
try:
    _module = importlib.import_module("memory_bank._native")
except ImportError:  # pragma: no cover - an install without a C compiler
    _module = None

#: ``scan_runs(acc, lengths, c0, c1, runs, k1p1, out_positions, out_scores) -> count``: BM25's
#: posting scan: ``acc`` set to 0, then for each ``(pos, tf, w)`` of ``runs`` in order,
#: ``acc[pos] += tf * w * k1p1 / (lengths[pos] * c1 + c0 + tf)`` in float32, one posting at a
#: time (positions int32 or int64, frequencies float32 or uint16); the best positive scores are
#: written into the outputs as ``top_positive`` writes them.
scan_runs: Callable[..., int] | None = getattr(_module, "scan_runs", None)
#: ``postings_misfit(starts, pos, tf, n) -> str | None``: why CSR postings are unsound (a row not
#: ascending, a position outside ``[0, n)``, a frequency not positive), or ``None``.
postings_misfit: Callable[..., str | None] | None = getattr(_module, "postings_misfit", None)
#: ``top_positive(scores, out_positions, out_scores) -> count``: the best positive float32
#: scores, best first, ties to the earlier index, written into the two outputs.
top_positive: Callable[..., int] | None = getattr(_module, "top_positive", None)
#: ``echo_share(user_starts, user_ids, positions, query_ids, out)``: per position, the share of
#: the query's ids among its user words (float64): :func:`memory_bank.index.numpy_echo_share`.
echo_share: Callable[..., None] | None = getattr(_module, "echo_share", None)
#: ``day_evidence(days, scores, top, out)``: per entry, the mean of the ``top`` best scores of its
#: day (float64): :func:`memory_bank.retrieval.stages.numpy_day_evidence`.
day_evidence: Callable[..., None] | None = getattr(_module, "day_evidence", None)
#: ``neighbour_lift(scored, ranked_at, prev, next, scores, w_prev, w_next, out)``: the neighbour
#: lift stage: :meth:`memory_bank.retrieval.stages.NeighbourLift.numpy_apply`.
neighbour_lift: Callable[..., None] | None = getattr(_module, "neighbour_lift", None)
