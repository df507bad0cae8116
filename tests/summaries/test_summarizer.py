"""The Summarizer: due days, idempotence, long days in chunks, retries, failures, staleness."""

from __future__ import annotations

import json

from memory_bank import MemoryKind
from memory_bank.original_format import export_data, import_data
from memory_bank.summaries import Summarizer, SummaryConfig, Task
from memory_bank.summaries.errors import SummaryTimeoutError
from tests.summaries.conftest import ScriptedChatModel, add_days

NO_WAIT = SummaryConfig(backoff_s=0, call_timeout_s=None)


def layers(bank, user="Emily"):  # type: ignore[no-untyped-def]
    return {m.memory_id: m for m, _ in bank.memories(user) if m.kind is not MemoryKind.TURN}


def test_due_days_are_finished_days_without_layers(bank, fake) -> None:  # type: ignore[no-untyped-def]
    add_days(bank, days={"2023-04-27": ["a MISO"], "2023-04-28": ["b"], "2023-05-01": ["today"]})
    s = Summarizer(bank, fake, "en", config=NO_WAIT)
    assert s.due_days("Emily") == ["2023-04-27", "2023-04-28"]  # the clock says 2023-05-01: today is not over
    assert s.due_days("Emily", "2023-04-28") == ["2023-04-27"]
    assert s.due_days("Nobody") == []


def test_summarize_user_stores_all_four_layers_and_is_idempotent(bank, fake) -> None:  # type: ignore[no-untyped-def]
    add_days(bank)
    s = Summarizer(bank, fake, "en", config=NO_WAIT)
    report = s.summarize_user("Emily")
    assert report.ok and report.days == ["2023-04-27", "2023-04-28"] and report.calls == 6
    got = layers(bank)
    assert set(got) == {
        "Emily_2023-04-27_summary", "Emily_2023-04-27_personality",
        "Emily_2023-04-28_summary", "Emily_2023-04-28_personality",
        "Emily_overall_history", "Emily_overall_personality",
    }  # fmt: skip
    assert (
        "MISO" in got["Emily_2023-04-27_summary"].text and "BREAD" not in got["Emily_2023-04-27_summary"].text
    )
    assert not any(m.stale for m in got.values())
    # the globals are made from the dailies, in date order
    global_prompt = next(p for p in fake.prompts if "Daily event summaries:" in p)
    assert global_prompt.index("2023-04-27: Note") < global_prompt.index("2023-04-28: Note")
    assert "(2023-04-27 to 2023-04-28)" in global_prompt
    # what a prompt builder reads
    profile = bank.profile("Emily")
    assert "MISO" in profile["global_summary"] and "BREAD" in profile["global_summary"]
    assert profile["global_portrait"].startswith("Note")
    assert bank.layer("Emily", MemoryKind.DAILY_PERSONALITY, "2023-04-28") is not None
    # nothing is redone
    again = s.summarize_user("Emily")
    assert again.calls == 0 and again.written == [] and again.ok
    assert s.due_days("Emily") == []


def test_daily_summaries_are_indexed_and_retrievable(bank, fake) -> None:  # type: ignore[no-untyped-def]
    add_days(bank)
    Summarizer(bank, fake, "en", config=NO_WAIT).summarize_user("Emily")
    hits = bank.search("Emily", "BREAD", k=1, kinds=[MemoryKind.DAILY_SUMMARY])
    assert hits and hits[0].memory.memory_id == "Emily_2023-04-28_summary"


def test_a_late_turn_makes_its_day_due_again_and_globals_follow(bank, fake, clock) -> None:  # type: ignore[no-untyped-def]
    add_days(bank)
    s = Summarizer(bank, fake, "en", config=NO_WAIT)
    s.summarize_user("Emily")
    bank.add_turn("Emily", "Also I found a TORTOISE.", "Wow!", at="2023-04-27T23:00")
    assert s.due_days("Emily") == ["2023-04-27"]
    report = s.summarize_user("Emily")
    assert report.days == ["2023-04-27"] and "Emily_overall_history" in report.written
    assert "TORTOISE" in bank.profile("Emily")["global_summary"]


def test_deleted_turn_leaves_no_copy_in_any_summary(bank, fake) -> None:  # type: ignore[no-untyped-def]
    add_days(bank)
    s = Summarizer(bank, fake, "en", config=NO_WAIT)
    s.summarize_user("Emily")
    assert any("MISO" in m.text for m in layers(bank).values())
    bank.delete_memory("Emily", "Emily_2023-04-27_0")  # "I adopted a cat called MISO today."
    assert layers(bank)["Emily_overall_history"].stale  # the core marks them
    assert s.due_days("Emily") == ["2023-04-27"]  # stale layers count as due
    report = s.summarize_user("Emily")
    assert report.ok
    assert not any("MISO" in m.text for m in layers(bank).values())
    assert not any(m.stale for m in layers(bank).values())
    assert "PARK" in bank.profile("Emily")["global_summary"]


def test_a_day_with_no_turns_left_loses_its_layers(bank, fake) -> None:  # type: ignore[no-untyped-def]
    add_days(bank)
    s = Summarizer(bank, fake, "en", config=NO_WAIT)
    s.summarize_user("Emily")
    for m in bank.history("Emily", date="2023-04-28"):
        bank.delete_memory("Emily", m.memory_id)
    report = s.summarize_user("Emily")
    assert set(report.deleted) == {"Emily_2023-04-28_summary", "Emily_2023-04-28_personality"}
    assert "BREAD" not in bank.profile("Emily")["global_summary"]
    # and when no day is left, the globals made from them go too
    for m in bank.history("Emily"):
        bank.delete_memory("Emily", m.memory_id)
    s.summarize_user("Emily")
    assert layers(bank) == {} and bank.profile("Emily") == {"global_summary": "", "global_portrait": ""}


def test_forgotten_layers_are_not_revived(make_bank, fake) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(
        forgetting={"mode": "paper", "policy": "threshold", "threshold": 0.5, "daily_pass": False}
    )
    add_days(bank)
    s = Summarizer(bank, fake, "en", config=NO_WAIT)
    s.summarize_user("Emily")
    bank.forget("Emily", now="2023-06-30")  # archives old turns and daily summaries
    assert bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-04-27") is None
    calls = len(fake.prompts)
    s.summarize_user("Emily", now="2023-06-30")
    assert bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-04-27") is None
    # nor does the global event summary follow the forgetting: it is about the whole history
    assert len(fake.prompts) == calls and "MISO" in bank.profile("Emily")["global_summary"]


def test_a_day_whose_turns_were_forgotten_keeps_its_layers_when_remade(make_bank, fake) -> None:  # type: ignore[no-untyped-def]
    """A day made due again (a late turn) after the curve forgot its turns was "a day with no
    turns left": its summary and portrait were deleted, then the global layers made from them."""
    bank = make_bank(
        forgetting={"mode": "paper", "policy": "threshold", "threshold": 0.5, "daily_pass": False}
    )
    add_days(bank)
    s = Summarizer(bank, fake, "en", config=NO_WAIT)
    s.summarize_user("Emily")
    bank.add_turn("Emily", "Also I found a TORTOISE.", "Wow!", at="2023-04-27T23:00")
    bank.forget("Emily", now="2023-06-30")  # archives the turns (forgotten, not hidden)
    assert bank.history("Emily", date="2023-04-27") == []
    report = s.summarize_user("Emily", now="2023-06-30")
    assert report.ok and report.deleted == [] and report.days == ["2023-04-27"]
    day = next(m for m, _ in bank.memories("Emily") if m.memory_id == "Emily_2023-04-27_summary")
    assert "MISO" in day.text and "TORTOISE" in day.text  # made from every turn of the day
    assert all(k in layers(bank) for k in ("Emily_2023-04-27_personality", "Emily_overall_personality"))
    assert "TORTOISE" in bank.profile("Emily")["global_summary"] and "BREAD" in bank.profile("Emily")["global_summary"]
    day_turns = [m.memory_id for m, _ in bank.memories("Emily", kinds=[MemoryKind.TURN]) if m.date == "2023-04-27"]
    bank.archive("Emily", day_turns)
    s.summarize_user("Emily", now="2023-06-30")  # hidden by the user: then the day's layers go
    assert "Emily_2023-04-27_summary" not in layers(bank) and "TORTOISE" not in bank.profile("Emily")["global_summary"]


def test_a_layer_the_user_hid_is_not_remade_until_restored(bank, fake, clock) -> None:  # type: ignore[no-untyped-def]
    """A hidden global summary counted as missing: the next run wrote over it, unhidden, and it
    was back in the prompt; a hidden day summary made due by a late turn came back the same way."""
    add_days(bank)
    s = Summarizer(bank, fake, "en", config=NO_WAIT)
    s.summarize_user("Emily")
    bank.archive("Emily", ["Emily_2023-04-27_summary", "Emily_overall_history"])  # hidden
    bank.add_turn("Emily", "Also I found a TORTOISE.", "Wow!", at="2023-04-27T23:00")
    s.summarize_user("Emily")
    shown = layers(bank)
    assert shown["Emily_overall_history"].hidden and shown["Emily_2023-04-27_summary"].hidden
    assert bank.profile("Emily")["global_summary"] == ""
    bank.restore("Emily", ["Emily_overall_history", "Emily_2023-04-27_summary"])
    s.summarize_user("Emily")  # restored: made again from what the days hold now
    assert "TORTOISE" in bank.profile("Emily")["global_summary"]


def test_retries_back_off_after_errors_and_at_once_after_junk(bank) -> None:  # type: ignore[no-untyped-def]
    add_days(bank, days={"2023-04-27": ["I adopted MISO."]})
    waits: list[float] = []
    model = ScriptedChatModel(responses=[TimeoutError("read timed out"), "", "As an AI language model, no."])
    s = Summarizer(bank, model, "en", config=SummaryConfig(backoff_s=1.0, max_attempts=4), sleep=waits.append)
    report = s.summarize_user("Emily")
    assert report.ok and report.calls == 4 + 3  # the first layer needed 4 tries, the rest one each
    assert waits == [1.0]  # after the server's timeout; the empty and the refusal are retried at once
    retried = [p for p in model.prompts if "Use your own words" in p]
    assert (
        len(retried) == 3 and "Use your own words" not in model.prompts[0]
    )  # a retry is not the same prompt
    assert "MISO" in bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-04-27").text  # type: ignore[union-attr]


def test_failures_are_reported_and_left_for_the_next_run(bank) -> None:  # type: ignore[no-untyped-def]
    add_days(bank)
    broken = ScriptedChatModel(default=lambda p, n: (_ for _ in ()).throw(ConnectionError("server down")))
    report = Summarizer(
        bank, broken, "en", config=NO_WAIT.model_copy(update={"max_attempts": 2})
    ).summarize_user("Emily")
    assert not report.ok and len(report.failed) == 4  # 4 daily layers; no dailies, so no globals to make
    assert {f.kind for f in report.failed} == {"daily_summary", "daily_personality"}
    assert "ConnectionError: server down" in report.failed[0].error
    assert len(bank.history("Emily")) == 4 and layers(bank) == {}  # turns untouched
    fixed = Summarizer(bank, ScriptedChatModel(), "en", config=NO_WAIT).summarize_user("Emily")
    assert fixed.ok and len(fixed.written) == 6


def test_one_bad_layer_does_not_block_the_others(bank) -> None:  # type: ignore[no-untyped-def]
    add_days(bank, days={"2023-04-27": ["I adopted MISO."]})
    model = ScriptedChatModel(responses=["", ""])  # the day's event summary fails twice
    s = Summarizer(bank, model, "en", config=NO_WAIT.model_copy(update={"max_attempts": 2}))
    report = s.summarize_user("Emily")
    assert [f.kind for f in report.failed] == ["daily_summary"]
    # what the user is shown says why, without LangChain's class names and troubleshooting links
    assert "the model's answers were not usable" in report.failed[0].error and "(empty)" in report.failed[0].error
    assert "troubleshooting" not in report.failed[0].error and "OutputParserException" not in report.failed[0].error
    assert bank.layer("Emily", MemoryKind.DAILY_PERSONALITY, "2023-04-27") is not None
    assert bank.profile("Emily")["global_portrait"] and not bank.profile("Emily")["global_summary"]
    assert s.due_days("Emily") == ["2023-04-27"]
    report = s.summarize_user("Emily")
    assert report.ok and report.written == ["Emily_2023-04-27_summary", "Emily_overall_history"]


def test_deadline_stops_a_streaming_call(bank) -> None:  # type: ignore[no-untyped-def]
    add_days(bank, days={"2023-04-27": ["I adopted MISO."]})
    slow = ScriptedChatModel(default=" ".join(["word"] * 200) + ".", delay_per_token=0.005)
    cfg = SummaryConfig(backoff_s=0, max_attempts=1, call_timeout_s=0.05)
    report = Summarizer(bank, slow, "en", config=cfg).summarize_user("Emily")
    assert report.failed and all("SummaryTimeoutError" in f.error for f in report.failed)
    assert issubclass(SummaryTimeoutError, TimeoutError)


def test_a_long_day_is_summarised_in_chunks_that_fit(bank) -> None:  # type: ignore[no-untyped-def]
    context, answer = 400, 40
    words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do"]
    queries = [f"Turn {i} CODE{chr(65 + i % 26)}X " + " ".join(words * 2) for i in range(30)]
    queries.append("HUGE " + " ".join(words * 60))  # one turn bigger than the whole context
    add_days(bank, days={"2023-04-27": queries})
    model = ScriptedChatModel(context_window=context, max_tokens=answer)
    s = Summarizer(bank, model, "en", config=NO_WAIT.model_copy(update={"safety_tokens": 8}))
    report = s.summarize_user("Emily")
    assert report.ok
    for prompt in model.prompts:
        assert model.count_tokens(prompt) + answer <= context  # every call fits
    en = s.pack
    daily = [
        p for p in model.prompts if en.headers[Task.DAILY_EVENTS].split("{")[0] in p and "about your" not in p
    ]
    parts = [p for p in daily if "(part " in p and en.instructions[Task.DAILY_EVENTS][:30] in p]
    assert len(parts) >= 3
    assert all(en.cues[Task.DAILY_EVENTS] in p for p in parts)  # the instruction is never cut
    merges = [p for p in model.prompts if en.instructions[Task.MERGE_EVENTS][:40] in p]
    assert merges and "Part 1: Note" in merges[-1]
    # every turn reached some prompt: nothing was dropped
    for i in range(30):
        assert any(f"CODE{chr(65 + i % 26)}X" in p for p in parts)
    assert any("HUGE" in p for p in parts)
    stored = bank.layer("Emily", MemoryKind.DAILY_SUMMARY, "2023-04-27")
    assert stored is not None and stored.text.startswith("Note")


def test_many_days_make_a_chunked_global_summary(bank) -> None:  # type: ignore[no-untyped-def]
    days = {f"2023-04-{d:02d}": [f"Day {d} topic TOPIC{chr(64 + d)}Z"] for d in range(1, 21)}
    add_days(bank, days=days)
    # (room for the longest retry note, which says what was wrong with a refused answer)
    model = ScriptedChatModel(context_window=220, max_tokens=20)
    report = Summarizer(
        bank, model, "en", config=NO_WAIT.model_copy(update={"safety_tokens": 8})
    ).summarize_user("Emily")
    assert report.ok
    globals_ = [p for p in model.prompts if "Daily event summaries:" in p]
    assert len(globals_) >= 3  # groups of days, then the combination
    assert any(
        " to 2023-04-" in p.split("Daily event summaries:")[1] for p in globals_
    )  # periods label the groups
    assert all(model.count_tokens(p) + 20 <= 220 for p in model.prompts)


def test_context_too_small_is_reported_not_raised(bank) -> None:  # type: ignore[no-untyped-def]
    add_days(bank, days={"2023-04-27": [" ".join(["word"] * 300)]})
    model = ScriptedChatModel(context_window=256, max_tokens=120)
    report = Summarizer(bank, model, "en", config=NO_WAIT).summarize_user("Emily")
    assert (
        report.failed
        and "ContextTooSmallError" in report.failed[0].error
        and "larger context" in report.failed[0].error
    )


def test_chinese_prompts_and_output(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(language="zh")
    add_days(bank, "小明", days={"2023-04-27": ["我今天养了一只猫。", "我们去了公园。"]})
    model = ScriptedChatModel(default="用户今天养了一只猫，还去了公园，心情很好。")
    s = Summarizer(bank, model)  # the bank's language
    assert s.language == "zh"
    report = s.summarize_user("小明")
    assert report.ok and len(report.written) == 4
    assert "用户：我今天养了一只猫。" in model.prompts[0] and "请用中文" in model.prompts[0]
    assert bank.profile("小明")["global_summary"].startswith("用户今天")
    # an English answer to a Chinese prompt is junk
    bank.add_turn("小明", "今天下雨了。", "记得带伞。", at="2023-04-28T09:00")
    english = ScriptedChatModel(default="The user adopted a cat and went to the park today.")
    report = Summarizer(
        bank, english, "zh", config=NO_WAIT.model_copy(update={"max_attempts": 1})
    ).summarize_user("小明")
    assert report.failed and "expected language" in report.failed[0].error


def test_summaries_export_and_import_in_the_original_format(bank, make_bank, fake) -> None:  # type: ignore[no-untyped-def]
    add_days(bank)
    Summarizer(bank, fake, "en", config=NO_WAIT).summarize_user("Emily")
    data = json.loads(json.dumps(export_data(bank)))
    user = data["Emily"]
    assert set(user["summary"]) == set(user["personality"]) == {"2023-04-27", "2023-04-28"}
    assert "MISO" in user["summary"]["2023-04-27"]["content"]
    assert isinstance(user["personality"]["2023-04-28"], str)
    assert "BREAD" in user["overall_history"] and user["overall_personality"]
    other = make_bank("other")
    import_data(other, data)
    assert other.profile("Emily") == bank.profile("Emily")
    for kind in (MemoryKind.DAILY_SUMMARY, MemoryKind.DAILY_PERSONALITY):
        for day in ("2023-04-27", "2023-04-28"):
            assert other.layer("Emily", kind, day).text == bank.layer("Emily", kind, day).text  # type: ignore[union-attr]
    assert export_data(other) == data
    # imported layers are done: summarising the imported bank calls no LLM
    again = ScriptedChatModel()
    assert (
        Summarizer(other, again, "en", config=NO_WAIT).summarize_user("Emily").calls == 0
        and again.prompts == []
    )


def test_summarize_day_and_globals_on_demand(bank, fake) -> None:  # type: ignore[no-untyped-def]
    add_days(bank, days={"2023-05-01": ["Today I met LUNA."]})
    s = Summarizer(bank, fake, "en", config=NO_WAIT)
    assert s.summarize_user("Emily").written == []  # today is not over
    assert s.summarize_day("Emily", "2023-05-01").days == ["2023-05-01"]
    assert s.summarize_globals("Emily").written == ["Emily_overall_history", "Emily_overall_personality"]
    assert "LUNA" in bank.profile("Emily")["global_summary"]


def test_an_answer_copying_part_of_the_material_is_retried(bank) -> None:  # type: ignore[no-untyped-def]
    add_days(bank)

    def copy_first_item_once(prompt: str, n: int) -> str:
        if "Daily event summaries:" in prompt and "Use your own words" not in prompt:
            return prompt.split("Daily event summaries:\n", 1)[1].split("\n", 1)[
                0
            ]  # "2023-04-27: Note 1: ..."
        return f"Note {n}: the user talked about MISO and BREAD over two days."

    model = ScriptedChatModel(default=copy_first_item_once)
    report = Summarizer(bank, model, "en", config=NO_WAIT).summarize_user("Emily")
    assert report.ok and report.calls == 7  # one retry, for the global event summary
    assert "MISO and BREAD" in bank.profile("Emily")["global_summary"]


def test_a_copy_is_kept_as_a_last_resort(bank) -> None:  # type: ignore[no-untyped-def]
    add_days(bank)

    def always_copy_globals(prompt: str, n: int) -> str:
        if "Daily event summaries:" in prompt:
            return prompt.split("Daily event summaries:\n", 1)[1].split("\n", 1)[0]
        return f"Note {n}: the user talked about a day with MISO and BREAD in it."

    report = Summarizer(
        bank, ScriptedChatModel(default=always_copy_globals), "en", config=NO_WAIT
    ).summarize_user("Emily")
    assert report.ok and report.weak == ["global_events"] and report.calls == 5 + 3
    assert bank.profile("Emily")["global_summary"].startswith(
        "Note 1"
    )  # the copied first day, label stripped
