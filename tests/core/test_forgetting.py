"""The forgetting curve and passes: maths, modes, reinforcement, archive vs delete."""

from __future__ import annotations

import datetime as dt
import math
import threading

import numpy as np
import pytest

from memory_bank import forgetting
from memory_bank.config import CALENDAR_ONLY, PAPER_FORGETTING
from memory_bank.records import MemoryKind


def test_paper_curve_matches_exp_minus_t_over_s() -> None:
    assert forgetting.retention(0, 1) == 1.0
    assert forgetting.retention(1, 1) == pytest.approx(math.exp(-1))
    assert forgetting.retention(3, 2) == pytest.approx(math.exp(-1.5))
    # Stronger memories fade slower (the original code got this backwards).
    assert forgetting.retention(5, 3) > forgetting.retention(5, 1)


def test_time_scale_tau_stretches_the_curve() -> None:
    assert forgetting.retention(10, 1, tau=10) == pytest.approx(math.exp(-1))
    assert forgetting.retention(10, 2, tau=5) == pytest.approx(math.exp(-1))
    with pytest.raises(ValueError, match="tau"):
        forgetting.retention(1, 1, tau=0)


def test_original_code_mode_reproduces_its_operator_precedence() -> None:
    # exp(-t / 5 * S) == exp(-t * S / 5): strength makes memories fade faster.
    assert forgetting.retention(5, 2, mode="original-code") == pytest.approx(math.exp(-2))
    assert forgetting.retention(5, 3, mode="original-code") < forgetting.retention(5, 1, mode="original-code")


def test_off_mode_keeps_everything() -> None:
    r = forgetting.retention_array(np.array([0, 10, 1000]), np.array([1, 1, 1]), mode="off")
    assert r.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="unknown forgetting mode"):
        forgetting.retention(1, 1, mode="sometimes")  # type: ignore[arg-type]


def test_future_dated_memories_count_as_fresh() -> None:
    assert forgetting.retention(-3, 1) == 1.0


def test_a_memory_of_the_calendars_last_days_is_explained_not_a_crash() -> None:
    """A day valid for import and add (9999-12-30) made ``explanations()`` raise OverflowError."""
    e = forgetting.explain(kind="turn", strength=1, anchor="9999-12-30", now="9999-12-31", tau=7.0)
    assert e["forgets_on"] is None and 0 < e["retention"] < 1


def test_stochastic_mask_is_reproducible_with_a_seed_and_follows_retention() -> None:
    r = np.full(20_000, 0.3)
    a = forgetting.forget_mask(r, rng=np.random.default_rng(7))
    b = forgetting.forget_mask(r, rng=np.random.default_rng(7))
    assert (a == b).all()
    assert a.mean() == pytest.approx(0.7, abs=0.02)  # dropped with probability 1 - R
    assert not forgetting.forget_mask(np.ones(100), rng=np.random.default_rng(1)).any()


def test_threshold_policy() -> None:
    mask = forgetting.forget_mask(np.array([0.01, 0.05, 0.5]), policy="threshold", threshold=0.05)
    assert mask.tolist() == [True, False, False]


def test_elapsed_days_are_whole_calendar_days() -> None:
    assert forgetting.elapsed_days(["2023-04-27", "2023-05-06"], "2023-05-06").tolist() == [9.0, 0.0]


#: The paper's curve, tau 1 day, by the calendar alone (the tests of the curve; the default adds
#: a 7-day time scale, content weights and the cold tier: tests/core/test_selective_forgetting.py).
CURVE = {"mode": "paper", "tau": 1.0, **CALENDAR_ONLY}


def _turns(bank, user="Ann"):  # type: ignore[no-untyped-def]
    bank.add_turn(user, "I planted tomatoes in the garden.", "Lovely!", at="2023-05-01T09:00")
    bank.add_turn(user, "My sister Jo visits next week.", "How nice.", at="2023-05-02T09:00")
    bank.add_turn(user, "I am learning the cello.", "Great choice.", at="2023-05-03T09:00")


def test_default_forgets_but_loses_nothing_and_off_forgets_nothing(make_bank, tmp_path, clock) -> None:  # type: ignore[no-untyped-def]
    bank, off = make_bank(tmp_path / "default"), make_bank(tmp_path / "off", forgetting={"mode": "off"})
    for b in (bank, off):
        _turns(b)
    clock.advance(days=365)
    report = bank.forget("Ann")["Ann"]
    assert report.mode == "paper" and len(report.forgotten) == 3  # a year unrecalled: all faded ...
    assert len(bank.search("Ann", "cello", k=3)) == 3  # ... and all still found (the cold tier)
    report = off.forget("Ann")["Ann"]
    assert report.mode == "off" and report.forgotten == [] and report.examined == 3


def test_paper_mode_pass_archives_old_memories_reproducibly(make_bank, tmp_path, clock) -> None:  # type: ignore[no-untyped-def]
    results = []
    for run in range(2):
        bank = make_bank(
            tmp_path / f"s{run}", forgetting={**PAPER_FORGETTING, "seed": 3, "daily_pass": False}
        )
        _turns(bank)
        report = bank.forget("Ann", now="2023-05-20")["Ann"]
        results.append(report.forgotten)
        # Archived, not deleted: still listed, no longer retrievable, recoverable.
        rows = bank.memories("Ann", now="2023-05-20")
        archived = {m.memory_id for m, _ in rows if m.archived}
        assert archived == set(report.forgotten)
        hits = bank.search("Ann", "tomatoes garden cello sister", k=10, now="2023-05-20")
        assert not archived & {h.memory.memory_id for h in hits}
    assert results[0] == results[1]
    # After 17+ days at strength 1, retention is under 1e-7: everything is gone.
    assert len(results[0]) == 3


def test_reinforcement_slows_forgetting(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting=CURVE)
    _turns(bank)
    hit = bank.search("Ann", "cello", k=1, now="2023-05-04", reinforce=True)[0]
    assert hit.memory.strength == 2 and hit.memory.last_recall_date == "2023-05-04"
    rows = {m.memory_id: (m, r) for m, r in bank.memories("Ann", now="2023-05-06", mode="paper")}
    m, r = rows[hit.memory.memory_id]
    assert m.strength == 2 and r == pytest.approx(math.exp(-2 / 2))  # t counts from the recall
    other = next(v for k, v in rows.items() if k != hit.memory.memory_id and v[0].date == "2023-05-02")
    assert other[1] == pytest.approx(math.exp(-4))


def test_delete_action_removes_and_marks_summaries_stale(make_bank, clock) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(
        forgetting={**CURVE, "policy": "threshold", "threshold": 0.5, "action": "delete", "daily_pass": False}
    )
    _turns(bank)
    bank.set_layer("Ann", MemoryKind.DAILY_SUMMARY, "Ann planted tomatoes.", date="2023-05-01")
    report = bank.forget("Ann", now="2023-05-03")["Ann"]
    # t=2 (R=.135) and t=1 (R=.37) are dropped, the summary of 05-01 too; today's turn stays.
    assert len(report.forgotten) == 3
    left = bank.memories("Ann", now="2023-05-03")
    assert [m.date for m, _ in left if m.kind is MemoryKind.TURN] == ["2023-05-03"]


def test_daily_pass_runs_on_the_first_write_of_a_day_never_on_a_search(make_bank, clock) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting={**CURVE, "policy": "threshold", "threshold": 0.2})
    _turns(bank)
    clock.now = clock.now.replace(year=2023, month=5, day=3)
    bank.search("Ann", "garden", k=5)  # a search persists nothing ...
    assert [m.date for m, _ in bank.memories("Ann") if not m.archived] == [
        "2023-05-01",
        "2023-05-02",
        "2023-05-03",
    ]
    assert bank.user("Ann").last_forget_date == "2023-05-01"
    bank.add_turn("Ann", "The tomatoes are red now.", "Yum!")  # ... the first write of 05-03 does:
    remaining = [m.date for m, _ in bank.memories("Ann") if not m.archived]
    assert remaining == ["2023-05-02", "2023-05-03", "2023-05-03"]  # t=2 (R=.135) dropped
    assert bank.user("Ann").last_forget_date == "2023-05-03"


def test_two_first_writes_of_a_day_run_one_pass(make_bank, clock) -> None:  # type: ignore[no-untyped-def]
    """Two writes of a new day that read the user before either ran the day's pass (two chat
    threads) each used to run it: a second stochastic pass drew again and forgot more."""
    bank = make_bank(forgetting={**PAPER_FORGETTING, "daily_pass": True})
    _turns(bank)
    day = dt.date(2023, 5, 4)
    first, second = bank.user("Ann"), bank.user("Ann")  # both read before either pass
    passes: list[str] = []
    run = bank._forget_user

    def counted(*a, **kw):  # type: ignore[no-untyped-def]
        passes.append(a[0].name)
        return run(*a, **kw)

    bank._forget_user = counted
    assert bank._daily_forget(first, day) is not None
    assert bank._daily_forget(second, day) is None and passes == ["Ann"]
    assert second.last_forget_date == "2023-05-04"


@pytest.mark.parametrize("action", ["archive", "delete"])
def test_a_memory_recalled_while_the_pass_runs_is_not_forgotten(make_bank, action) -> None:  # type: ignore[no-untyped-def]
    """The pass reads every memory's clock, then writes what it drops; a reply recalling a memory
    in between (another chat thread) made it fresh, yet the pass archived or deleted it."""
    bank = make_bank(
        forgetting={**CURVE, "policy": "threshold", "threshold": 0.5, "action": action, "daily_pass": False}
    )
    _turns(bank)
    (tomatoes,) = [m.memory_id for m, _ in bank.memories("Ann") if "tomatoes" in m.text]
    read = bank._forget_columns

    def then_a_recall(rec):  # type: ignore[no-untyped-def]
        out = read(rec)
        recall = threading.Thread(target=bank.reinforce, args=("Ann", [tomatoes]), kwargs={"now": "2023-05-20"})
        recall.start()
        recall.join()
        return out

    bank._forget_columns = then_a_recall
    bank.forget("Ann", now="2023-05-20")
    left = {m.text.split("\n")[0]: m.archived for m, _ in bank.memories("Ann", now="2023-05-20")}
    assert left.pop("I planted tomatoes in the garden.") is False  # recalled: kept, live
    assert all(left.values()) if action == "archive" else left == {}
