"""The prompt table (English and Chinese) and the output parser."""

from __future__ import annotations

import re

import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import FakeListChatModel

from memory_bank.errors import InvalidInputError
from memory_bank.summaries import LANGUAGES, SummaryParser, Task, build_chain, build_prompt, language_pack
from memory_bank.summaries.chains import clean_summary, prompt_inputs

CJK = re.compile(r"[\u4e00-\u9fff]")

PAPER_PHRASES = {
    "en": {
        Task.DAILY_EVENTS: "Summarize the events and key information",
        Task.DAILY_PERSONALITY: "please summarize the user's personality traits and emotions",
        Task.GLOBAL_EVENTS: "Summarize the events and key information",
        Task.GLOBAL_PORTRAIT: "Please provide a highly concise and general summary of the user's personality",
    },
    "zh": {
        Task.DAILY_EVENTS: "事件和关键信息",
        Task.DAILY_PERSONALITY: "总结用户的性格特点和情绪",
        Task.GLOBAL_EVENTS: "事件和关键信息",
        Task.GLOBAL_PORTRAIT: "高度简洁、概括的总结",
    },
}


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("task", list(Task))
def test_every_prompt_has_instruction_material_and_cue(language: str, task: Task) -> None:
    pack = LANGUAGES[language]
    values = prompt_inputs(
        date="2023-05-04",
        period="P1",
        part_note=pack.part_note.format(part=2, parts=3),
        content="<<MATERIAL>>",
    )
    (human,) = build_prompt(task, language).format_messages(**values)  # no system message (see prompts.py)
    text = human.content
    assert isinstance(text, str)
    assert (
        text.index(pack.instructions[task].split("{")[0][:10])
        < text.index("<<MATERIAL>>")
        < text.index(pack.cues[task])
    )
    assert "{" not in text and "}" not in text  # every variable was filled
    if task in (Task.DAILY_EVENTS, Task.DAILY_PERSONALITY, Task.MERGE_EVENTS, Task.MERGE_PERSONALITY):
        assert "2023-05-04" in text
    if task in (Task.GLOBAL_EVENTS, Task.GLOBAL_PORTRAIT):
        assert "P1" in text
    if task in (Task.DAILY_EVENTS, Task.DAILY_PERSONALITY):
        assert values["part_note"] in text
    prose = text.replace("<<MATERIAL>>", "")
    if language == "zh":
        assert len(CJK.findall(prose)) > 40
    else:
        assert not CJK.search(prose)
    if task in PAPER_PHRASES[language]:
        assert PAPER_PHRASES[language][task] in text


def test_prompts_need_only_the_content() -> None:
    msgs = build_prompt(Task.DAILY_EVENTS, "en").format_messages(content="User: hi")
    assert "User: hi" in str(msgs[0].content)


def test_unknown_language_is_an_input_error() -> None:
    with pytest.raises(InvalidInputError, match="use one of en, zh"):
        language_pack("fr")
    assert language_pack("cn") is LANGUAGES["zh"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Summary: Emily adopted a cat.", "Emily adopted a cat."),
        ("Here is the summary of the dialogue:\n\nEmily went to the park.", "Emily went to the park."),
        ("```\nEmily baked bread.\n```", "Emily baked bread."),
        ("**Daily summary**: Emily baked bread.", "Emily baked bread."),
        ("She is kind. She is kind. She likes tea. She is kind.", "She is kind. She likes tea."),
        ("1. Loves art.\n2. Loves art.\n3. Calm.\n4.", "1. Loves art.\n3. Calm."),
        ("Emily adopted a cat. She named it Miso and then she", "Emily adopted a cat."),
        ("Traits:\n1. Creative and calm.\n2. The user", "Traits:\n1. Creative and calm."),
        ("Calm and kind. Her traits are:\n1. The user", "Calm and kind."),
        ("The user's traits during these days were:\n1. The", ""),
        ("Daily personality traits and emotions:\n2023-05-03: Calm and kind.", "Calm and kind."),
        ("2023-05-03: Danced.\n2023-05-04 to 2023-05-05: Saw a film.", "Danced.\nSaw a film."),
    ],
)
def test_clean_summary_en(raw: str, expected: str) -> None:
    assert clean_summary(raw, LANGUAGES["en"]) == expected


def test_clean_summary_zh_and_length_cap() -> None:
    zh = LANGUAGES["zh"]
    assert (
        clean_summary("总结：用户今天养了一只猫。用户今天养了一只猫。她很开心。", zh)
        == "用户今天养了一只猫。她很开心。"
    )
    long = " ".join(f"Sentence number {i} is here." for i in range(200))
    out = clean_summary(long, LANGUAGES["en"], max_chars=300)
    assert len(out) <= 300 and out.endswith(".")


@pytest.mark.parametrize(
    ("language", "answer", "reason"),
    [
        ("en", "   ", "empty"),
        ("en", "Okay.", "too short"),
        ("en", "As an AI language model, I cannot summarize personal dialogue.", "refusal"),
        ("en", "User: hello there\nAI: hi, how are you\nUser: fine", "echoes the dialogue"),
        (
            "en",
            "Summarize the events and key information in the following dialogue from",
            "echoes the instruction",
        ),
        ("en", "用户今天养了一只猫，她很开心，还去了公园散步。", "expected language"),
        ("zh", "The user adopted a cat today and felt happy.", "expected language"),
        ("en", "That sounds wonderful! Miso must be so happy with you.", "companion's voice"),
        ("en", "The day was lovely: you adopted a cat and you named it Miso.", "companion's voice"),
        ("zh", "听起来真棒！咪咪和你在一起一定很开心。", "companion's voice"),
    ],
)
def test_parser_rejects_junk(language: str, answer: str, reason: str) -> None:
    parser = SummaryParser(language=language, task=Task.DAILY_EVENTS)
    with pytest.raises(OutputParserException, match=reason):
        parser.parse(answer)


@pytest.mark.parametrize(
    ("language", "task", "answer"),
    [  # a clause of the instruction anywhere in the answer, not only its opening words
        ("zh", Task.DAILY_PERSONALITY, "用户提到的宠物、朋友或家人不是用户。"),
        ("zh", Task.DAILY_PERSONALITY, "用户今天很开心。用户提到的宠物、朋友或家人不是用户。"),
        ("zh", Task.DAILY_EVENTS, "保留用户提到的人名、地点、日期、数字、计划和喜好。用户养了一只猫。"),
        ("en", Task.DAILY_PERSONALITY, "The user is warm. A pet, friend or relative the user talks about is not the user."),
    ],
)
def test_an_answer_holding_a_clause_of_the_instruction_is_refused(language: str, task: Task, answer: str) -> None:
    """A small model wrote the Chinese instruction's last clause as the user's daily portrait;
    only the instruction's first words were looked for, and the portrait was stored."""
    with pytest.raises(OutputParserException, match="echoes the instruction"):
        SummaryParser(language=language, task=task).parse(answer)


@pytest.mark.parametrize(
    ("language", "answer"),
    [
        ("en", "The user asked the companion to write one short paragraph for the club newsletter."),
        ("zh", "用户让AI帮忙把旅行见闻写成一段简短的话，发在朋友圈。"),
    ],
)
def test_a_summary_that_says_what_the_user_asked_for_in_short_words_of_the_instruction_is_kept(language: str, answer: str) -> None:
    """Short clauses of the instruction are things users ask for too: a faithful summary of such
    a day was refused on every retry, and the day got none."""
    assert SummaryParser(language=language, task=Task.DAILY_EVENTS).parse(answer)


@pytest.mark.parametrize(
    ("language", "pet", "user"),
    [
        (
            "en",
            "Miso is a playful and curious cat who loves naps in the sun.",
            "The user is caring and cheerful; she dotes on her cat Miso.",
        ),
        ("zh", "咪咪是一只活泼好奇的猫，喜欢晒太阳。", "用户性格温和体贴，很疼爱她的猫咪咪。"),
    ],
)
def test_a_portrait_of_the_users_pet_is_refused(language: str, pet: str, user: str) -> None:
    for task in (Task.DAILY_PERSONALITY, Task.GLOBAL_PORTRAIT):
        parser = SummaryParser(language=language, task=task)
        with pytest.raises(OutputParserException, match="pet, not the user"):
            parser.parse(pet)
        assert parser.parse(user) == user
    assert SummaryParser(language=language, task=Task.DAILY_EVENTS).parse(pet) == pet  # events may be about it


def test_the_personality_prompts_say_a_pet_is_not_the_user() -> None:
    for task in (Task.DAILY_PERSONALITY, Task.GLOBAL_PORTRAIT):
        assert "pet" in LANGUAGES["en"].instructions[task] and "宠物" in LANGUAGES["zh"].instructions[task]


def test_parser_accepts_mixed_names_in_chinese() -> None:
    parser = SummaryParser(language="zh", task=Task.DAILY_PERSONALITY)
    assert (
        parser.parse("Emily性格温和，喜欢绘画和钢琴，今天心情愉快。")
        == "Emily性格温和，喜欢绘画和钢琴，今天心情愉快。"
    )


@pytest.mark.parametrize("language", ["en", "zh"])
def test_chain_is_prompt_model_parser(language: str) -> None:
    answer = (
        "Summary: Emily adopted a cat named Miso."
        if language == "en"
        else "总结：用户今天领养了一只叫米索的猫。"
    )
    chain = build_chain(Task.DAILY_EVENTS, FakeListChatModel(responses=[answer]), language)
    out = chain.invoke(prompt_inputs(date="2023-05-04", content="..."))
    assert out == answer.split("：" if language == "zh" else ": ", 1)[1]


@pytest.mark.parametrize(
    "raw",
    [
        "<think>The user talked about tea, so I should write",  # cut off inside its thoughts
        "The user talked about tea, so I should write a short summary.</think>",  # no opening tag, no answer
    ],
)
def test_a_reasoning_models_unfinished_thoughts_are_never_a_summary(raw: str) -> None:
    assert clean_summary(raw, language_pack("en")) == ""
    assert clean_summary("Thinking it over.</think>Ann talked about tea.", language_pack("en")) == "Ann talked about tea."


def test_a_chinese_summary_that_names_english_terms_is_chinese() -> None:
    from memory_bank.summaries.chains import junk_reason

    zh = "用户今天在公司用 Kubernetes、PostgreSQL 和 TensorFlow 部署了新的 recommendation service。"
    assert junk_reason(zh, language_pack("zh"), Task.DAILY_EVENTS) is None
    en = "The user deployed a new recommendation service with Kubernetes and PostgreSQL today."
    assert junk_reason(en, language_pack("zh"), Task.DAILY_EVENTS) == "not in the expected language (zh)"
    mostly_en = "用户 deployed the new recommendation service with Kubernetes and PostgreSQL today."
    assert junk_reason(mostly_en, language_pack("zh"), Task.DAILY_EVENTS) == "not in the expected language (zh)"
    names = "The user met 王小明 and 李华 at the new cafe downtown."
    assert junk_reason(names, language_pack("en"), Task.DAILY_EVENTS) is None
