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
* ``off``: retention is always 1 and nothing is forgotten.

The default is ``paper`` with the selective setting of :data:`memory_bank.config.SELECTIVE_FORGETTING`.

>>> round(retention(1, 1), 4)
0.3679
>>> retention(3, 2, mode="off")
1.0
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Mapping, Sequence
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
    elapsed_days: np.ndarray,
    strength: np.ndarray,
    *,
    mode: ForgettingMode = "paper",
    tau: float | np.ndarray = 1.0,
) -> np.ndarray:
    """Vectorised retention for arrays of elapsed days and strengths (same shape); ``tau`` is
    one time scale or one per memory (see :func:`time_scales`).

    Negative elapsed times (a memory dated after "now", e.g. while replaying history) count as 0.
    """
    t = np.maximum(np.asarray(elapsed_days, dtype=np.float64), 0.0)
    s = np.maximum(np.asarray(strength, dtype=np.float64), 1.0)
    if mode == "off":
        return np.ones_like(t)
    if mode == "paper":
        scale = np.asarray(tau, dtype=np.float64)
        if np.any(scale <= 0):
            raise ValueError(f"forgetting time scale tau must be > 0 days, got {np.min(scale)}")
        return np.exp(-t / (scale * s))
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
    # NumPy's seed words are non-negative: a negative seed or a day before 1970 wraps (the
    # same words as before for every seed and day that were accepted).
    return np.random.default_rng([seed % 2**64, zlib.crc32(user.encode()), day_number(day) % 2**32])


_EPOCH = dt.date(1970, 1, 1)


def day_number(date: str | dt.date) -> int:
    """Days since 1970-01-01 for a ``YYYY-MM-DD`` string or a date."""
    d = dt.date.fromisoformat(date[:10]) if isinstance(date, str) else date
    return (d - _EPOCH).days


def elapsed_days(anchors: Sequence[str], now: str | dt.date) -> np.ndarray:
    """Whole calendar days from each anchor date (``YYYY-MM-DD``) to ``now``."""
    today = day_number(now)
    return np.fromiter((today - day_number(a) for a in anchors), dtype=np.float64, count=len(anchors))


# -- selective forgetting: time scales per kind and per content weight --------------------------
def time_scales(
    tau: float,
    kinds: Sequence[str] | None = None,
    weights: np.ndarray | None = None,
    *,
    kind_scales: Mapping[str, float] | None = None,
) -> np.ndarray | float:
    """Each memory's time scale in days: ``tau * kind_scale[kind] * weight``.

    ``kind_scales`` maps a kind (``"turn"``, ``"daily_summary"``) to a multiplier of ``tau`` (1
    when absent): a day's summary can outlive the turns it condenses. ``weights`` is each
    memory's content weight, set when it was written (see :mod:`memory_bank.salience`): small
    talk fades faster than what the user told about their life. With neither, ``tau`` itself.

    >>> time_scales(30.0, ["turn", "daily_summary"], np.array([0.25, 1.0]),
    ...             kind_scales={"daily_summary": 4.0}).tolist()
    [7.5, 120.0]
    """
    if not kind_scales and weights is None:
        return float(tau)
    n = len(kinds) if kinds is not None else len(weights) if weights is not None else 0
    out = np.full(n, float(tau))
    if kind_scales and kinds is not None:
        out *= np.fromiter((kind_scales.get(k, 1.0) for k in kinds), dtype=np.float64, count=n)
    if weights is not None:
        out *= np.asarray(weights, dtype=np.float64)
    return out


def forget_after_days(
    strength: float, time_scale: float, *, mode: ForgettingMode = "paper", threshold: float = 0.05
) -> float | None:
    """Whole days after its anchor when a memory's retention first falls below ``threshold``
    (the day a threshold pass archives it; ``None`` when it never does: mode ``off`` or a zero
    threshold). ``R = exp(-t / (tau * S)) < threshold`` once ``t > tau * S * ln(1 / threshold)``.

    >>> forget_after_days(1, 30.0)   # never recalled, tau 30: archived on day 90
    90.0
    """
    if mode == "off" or threshold <= 0:
        return None
    s = max(float(strength), 1.0)
    if threshold >= 1:
        return 1.0
    limit = time_scale * s * np.log(1.0 / threshold) if mode == "paper" else 5.0 * np.log(1.0 / threshold) / s
    return float(np.floor(limit) + 1.0)


def explain(
    *,
    kind: str,
    strength: float,
    anchor: str,
    now: str | dt.date,
    weight: float = 1.0,
    mode: ForgettingMode = "paper",
    tau: float = 1.0,
    kind_scales: Mapping[str, float] | None = None,
    policy: ForgettingPolicy = "threshold",
    threshold: float = 0.05,
) -> dict[str, object]:
    """Why a memory is strong or fading, as plain data a UI can show.

    ``recalls`` (strength - 1: each recall adds one), the memory's time scale (``tau`` times its
    kind's scale times its content weight), its retention today, and the projected day a
    threshold pass archives it if it is not recalled again (``forgets_on``; ``None`` when
    forgetting is off). Under the stochastic policy ``forgets_on`` is the day its retention falls
    below 0.5, after which it is more likely forgotten than kept.

    >>> e = explain(kind="turn", strength=2, anchor="2024-01-01", now="2024-01-31", tau=30)
    >>> e["recalls"], e["time_scale_days"], round(e["retention"], 3), e["forgets_on"]
    (1, 30.0, 0.607, '2024-06-29')
    """
    scale = float(time_scales(tau, [kind], np.asarray([weight]), kind_scales=kind_scales)[0])  # type: ignore[index]
    elapsed = day_number(now) - day_number(anchor)
    r = float(retention_array(np.asarray([elapsed]), np.asarray([strength]), mode=mode, tau=scale)[0])
    cut = threshold if policy == "threshold" else 0.5
    after = forget_after_days(strength, scale, mode=mode, threshold=cut)
    forgets_on = None
    if after is not None:
        try:
            forgets_on = (dt.date.fromisoformat(anchor[:10]) + dt.timedelta(days=int(after))).isoformat()
        except OverflowError:  # after 9999-12-31: never, on any calendar this can write
            forgets_on = None
    return {
        "kind": kind,
        "strength": int(strength),
        "recalls": max(int(strength) - 1, 0),
        "anchor": anchor[:10],
        "weight": float(weight),
        "kind_scale": float((kind_scales or {}).get(kind, 1.0)),
        "time_scale_days": scale,
        "retention": r,
        "forgets_on": forgets_on,
        "mode": mode,
        "policy": policy,
    }
