"""Ebbinghaus forgetting (paper §2.3), as small pure functions.

Retention of a memory is ``R = exp(-t / (tau * S))``: ``t`` is the number of whole calendar days
since the memory was learned or last recalled, ``S`` its strength (an integer starting at 1,
incremented each time it is recalled), ``tau`` a time scale in days (``tau = 1`` is the paper's
curve). A forgetting pass drops each memory either stochastically, with probability ``1 - R``
(the paper), or deterministically, when ``R`` falls below a threshold.

Modes:

* ``paper``: ``exp(-t / (tau * S))``; strong memories fade slower.
* ``original-code``: ``exp(-t / 5 * S)`` = ``exp(-t * S / 5)``, what the authors' code computes
  (strong memories fade *faster*). Only for reproducing old results.
* ``off``: retention is always 1 and nothing is forgotten (the default).

>>> round(retention(1, 1), 4)
0.3679
>>> retention(3, 2, mode="off")
1.0
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np

#: The forgetting curves and drop policies: defined here once; the config, the CLIs and the
#: LangChain loader take their choices from these.
ForgettingMode = Literal["paper", "original-code", "off"]
ForgettingPolicy = Literal["stochastic", "threshold"]
MODES: tuple[str, ...] = get_args(ForgettingMode)
POLICIES: tuple[str, ...] = get_args(ForgettingPolicy)


def retention(
    elapsed_days: float, strength: float, *, mode: ForgettingMode = "paper", tau: float = 1.0
) -> float:
    """Retention of one memory; see :func:`retention_array`."""
    return float(retention_array(np.asarray([elapsed_days]), np.asarray([strength]), mode=mode, tau=tau)[0])


def retention_array(
    elapsed_days: np.ndarray, strength: np.ndarray, *, mode: ForgettingMode = "paper", tau: float = 1.0
) -> np.ndarray:
    """Vectorised retention for arrays of elapsed days and strengths (same shape).

    Negative elapsed times (a memory dated after "now", e.g. while replaying history) count as 0.
    """
    t = np.maximum(np.asarray(elapsed_days, dtype=np.float64), 0.0)
    s = np.maximum(np.asarray(strength, dtype=np.float64), 1.0)
    if mode == "off":
        return np.ones_like(t)
    if mode == "paper":
        if tau <= 0:
            raise ValueError(f"forgetting time scale tau must be > 0 days, got {tau}")
        return np.exp(-t / (tau * s))
    if mode == "original-code":
        return np.exp(-t / 5.0 * s)
    raise ValueError(f"unknown forgetting mode {mode!r}; use one of {', '.join(MODES)}")


def forget_mask(
    retentions: np.ndarray,
    *,
    policy: ForgettingPolicy = "stochastic",
    threshold: float = 0.05,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Boolean mask of the memories a forgetting pass drops.

    ``stochastic`` drops each memory with probability ``1 - R`` using ``rng`` (pass a seeded
    generator for reproducible passes); ``threshold`` drops those with ``R < threshold``.
    """
    r = np.asarray(retentions, dtype=np.float64)
    if policy == "threshold":
        return r < threshold
    if policy == "stochastic":
        gen = rng if rng is not None else np.random.default_rng()
        return gen.random(r.shape) >= r
    raise ValueError(f"unknown forgetting policy {policy!r}; use one of {', '.join(POLICIES)}")


def pass_rng(seed: int | None, user: str, day: str | dt.date) -> np.random.Generator:
    """The generator of a stochastic pass: reproducible per (seed, user, day) when seeded."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng([seed, zlib.crc32(user.encode()), day_number(day)])


_EPOCH = dt.date(1970, 1, 1)


def day_number(date: str | dt.date) -> int:
    """Days since 1970-01-01 for a ``YYYY-MM-DD`` string or a date."""
    d = dt.date.fromisoformat(date[:10]) if isinstance(date, str) else date
    return (d - _EPOCH).days


def elapsed_days(anchors: Sequence[str], now: str | dt.date) -> np.ndarray:
    """Whole calendar days from each anchor date (``YYYY-MM-DD``) to ``now``."""
    today = day_number(now)
    return np.fromiter((today - day_number(a) for a in anchors), dtype=np.float64, count=len(anchors))
