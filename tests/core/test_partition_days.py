"""A partition's first batch indexes days, turns and neighbours in bulk: the result is exactly
what adding the same memories one by one leaves, duplicates, summaries and gaps included, and
appends after a bulk load keep it so."""

from __future__ import annotations

import numpy as np

from memory_bank.index import Partition
from memory_bank.stores import VectorBatch


def _batch(rng: np.random.Generator, n: int, first_rowid: int) -> VectorBatch:
    kinds = ["turn" if x else "daily_summary" for x in rng.random(n) < 0.85]
    dates = [f"2023-0{1 + d // 28}-{1 + d % 28:02d}" for d in rng.integers(0, 40, n)]
    turns = [
        None if k != "turn" or rng.random() < 0.05 else int(t)
        for k, t in zip(kinds, rng.integers(-1, 6, n), strict=True)
    ]
    texts = ["some words here"] * n
    vecs = rng.normal(size=(n, 4)).astype(np.float32)
    return VectorBatch(
        np.arange(first_rowid, first_rowid + n), vecs, texts, kinds, dates, turns, texts, texts
    )


def _state(p: Partition) -> tuple[object, ...]:
    n = len(p)
    held = {
        (d, int(t))
        for k, d, t in zip(p.kinds, p.dates, p.turns, strict=True)
        if k == "turn" and t is not None
    }
    missing = {(d, t + 100) for d, t in held}  # keys nobody holds: none
    last = {key: p._keys.last(key) for key in held | missing}
    many = {key: p._keys.holding(key) for key in held if len(p._keys.holding(key)) > 1}
    months = {d[:7] for d in p.dates}
    on_days = {d: p.positions_on([d]).tolist() for d in p.dates}
    in_months = {m: p.positions_in_months([m]).tolist() for m in months}
    everywhere = p.positions_on(set(p.dates)).tolist()
    return (p._nbrs[:n].tolist(), p._day_ids[:n].tolist(), p._days.as_dict(), p.years(), on_days,
            in_months, everywhere, last, many)  # fmt: skip


def test_bulk_indexing_equals_one_by_one_and_appends_keep_it() -> None:
    for seed in range(20):
        rng = np.random.default_rng(seed)
        first = _batch(rng, 300, 1)
        later = _batch(rng, 40, 301)
        bulk, single = Partition(4), Partition(4)
        bulk.add(first)
        for i in range(len(first.rowids)):
            single.add(VectorBatch(first.rowids[i : i + 1], first.vectors[i : i + 1], first.texts[i : i + 1],
                                   first.kinds[i : i + 1], first.dates[i : i + 1], first.turns[i : i + 1],
                                   first.texts[i : i + 1], first.texts[i : i + 1]))  # fmt: skip
        assert _state(bulk) == _state(single)
        bulk.add(later)
        single.add(later)
        assert _state(bulk) == _state(single)


def test_positions_on_days_and_months_after_a_bulk_load_and_appends() -> None:
    rng = np.random.default_rng(7)
    first, later = _batch(rng, 200, 1), _batch(rng, 30, 201)
    part = Partition(4)
    part.add(first)
    part.add(later)
    dates = first.dates + later.dates
    for day in [*sorted(set(dates))[:5], "1999-01-01"]:
        got = part.positions_on([day, day])
        assert got.dtype == np.int64 and got.tolist() == [i for i, d in enumerate(dates) if d == day]
    two = [*sorted({d[:7] for d in dates})[:2], "1999-01"]
    assert part.positions_in_months(two).tolist() == [i for i, d in enumerate(dates) if d[:7] in two]
    assert part.positions_on([]).tolist() == [] and part.positions_in_months(["1999-01"]).tolist() == []
    assert part.years() == (2023,)
