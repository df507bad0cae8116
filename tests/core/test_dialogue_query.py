"""Dialogue-aware queries and reciprocal-rank fusion (memory_bank.retrieval.dialogue, .pipeline)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from memory_bank.config import RetrievalConfig
from memory_bank.index import Partition
from memory_bank.retrieval import Context, Dense, Lexical, NamedDay, Pipeline, Query
from memory_bank.retrieval.dialogue import chat_query, parse_dialogue, query_vector
from memory_bank.retrieval.pipeline import ReciprocalRank, weighted_sum
from memory_bank.stores import VectorBatch

MADIAL_EN = [
    "<BOD>\n",
    '<Bart>: "Hey, did you know? I\'m going to perform a magic trick at the New Year\'s Eve party!"\n',
    '<Assistant>: "That\'s fantastic! I can imagine the audience being captivated."\n',
    "<Mom was right, you know. Fruit juice would be a better choice.>\n",
    '<Bart>: "By the way, what should I wear?"\n',
]
MADIAL_ZH = ["<BOD>\n", '<Bart>:"嘿，你知道吗？元旦晚会我要表演魔术！"\n', '<Assistant>:"真是太棒了！"\n', '<Bart>:"我要穿什么好呢？"\n']


def test_a_madial_dialogue_splits_into_turns_with_the_latest_user_turn() -> None:
    d = parse_dialogue("".join(MADIAL_EN))
    assert d is not None
    assert [(s, u) for s, _, u in d.turns] == [("Bart", True), ("Assistant", False), ("Bart", True)]
    assert d.latest == "By the way, what should I wear?"
    # the untagged line joins the assistant's turn; tags, quotes and markers are gone
    assert "Fruit juice would be a better choice." in d.turns[1][1]
    assert "<" not in d.context and '"' not in d.context and "BOD" not in d.context
    zh = parse_dialogue("".join(MADIAL_ZH))
    assert zh is not None and zh.latest == "我要穿什么好呢？" and zh.context.startswith("嘿，你知道吗？")


def test_plain_chat_transcripts_in_both_languages_are_dialogues() -> None:
    en = parse_dialogue("User: I adopted a cat.\nAI: Lovely! What is its name?\nUser: Guess what it likes")
    assert en is not None and en.latest == "Guess what it likes" and len(en.turns) == 3
    zh = parse_dialogue("用户：我养了一只猫。\n硅基朋友：真好！\n用户：它叫什么来着？")
    assert zh is not None and zh.latest == "它叫什么来着？" and not zh.turns[1][2]


@pytest.mark.parametrize(
    "text",
    [
        "What did I eat on May 4th?",
        "我5月4日吃了什么？",
        "Note: buy milk",  # one tagged line is not a dialogue
        "AI: hello\nAssistant: hi",  # no user turn
        "",
    ],
)
def test_a_question_or_one_message_is_not_a_dialogue(text: str) -> None:
    assert parse_dialogue(text) is None


def test_a_chat_query_is_the_message_or_a_dialogue_ending_with_it() -> None:
    history = [("I adopted a cat.\nShe is grey.", "Lovely!"), ("我们去了鼓浪屿", "真好！"), ("Miso: her name", "")]
    assert chat_query("What is her name?", history, 0) == "What is her name?"
    assert chat_query("What is her name?", [], 3) == "What is her name?"
    query = chat_query("What is her name?", history, 2)
    d = parse_dialogue(query)
    assert d is not None and d.latest == "What is her name?"
    # the last two turns, oldest first; a turn's line breaks and "Name:" starts stay in the turn
    assert [t for _, t, _ in d.turns] == ["我们去了鼓浪屿", "真好！", "Miso: her name", "What is her name?"]
    assert "grey" not in query
    assert [u for _, _, u in d.turns] == [True, False, True, True]
    full = parse_dialogue(chat_query("她叫什么？", history, 7))
    assert full is not None and full.turns[0][1] == "I adopted a cat. She is grey." and full.latest == "她叫什么？"


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), 3), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, 0 if "wear" in t and "magic" not in t else 1] = 1.0
        return out


def test_the_query_vector_mixes_context_and_latest_turn_in_one_call() -> None:
    embed = _Recorder()
    v = query_vector("".join(MADIAL_EN), embed, 0.25)
    assert len(embed.calls) == 1 and embed.calls[0][1] == "By the way, what should I wear?"
    assert "magic trick" in embed.calls[0][0]
    expected = np.array([0.25, 0.75, 0.0]) / np.linalg.norm([0.25, 0.75])
    assert v == pytest.approx(expected, rel=1e-6)


def test_a_question_or_a_zero_weight_embeds_the_text_as_before() -> None:
    embed = _Recorder()
    query_vector("What should I wear?", embed, 0.5)
    query_vector("".join(MADIAL_EN), embed, 0.0)
    assert embed.calls == [["What should I wear?"], ["".join(MADIAL_EN)]]


def _part() -> Partition:
    vectors = np.array([[1.0, 0, 0], [0.8, 0.6, 0], [0, 1.0, 0], [0, 0, 1.0]], dtype=np.float32)
    texts = ["museum visit", "museum museum museum", "garden roses", "museum trip"]
    p = Partition(3)
    p.add(VectorBatch(np.arange(1, 5), vectors, texts, ["turn"] * 4, ["2023-05-01"] * 3 + ["2023-05-04"], [0, 1, 2, 0]))
    return p


def test_reciprocal_rank_fuses_ranks_not_scores() -> None:
    part = _part()
    ctx = Context(part, Query.parse(part, "museum on May 4th", np.array([1.0, 0, 0], dtype=np.float32)))
    terms = [Dense(1.0), Lexical(0.5), NamedDay(0.2)]
    positions = np.arange(4)
    fused = ReciprocalRank(k=10)(ctx, terms, positions)
    dense_rank = {0: 1, 1: 2, 2: 3, 3: 3}  # cosines 1, 0.8, 0, 0: the two zeros score nothing
    lex_rank = [np.argsort(-Lexical(1).score(ctx, positions), kind="stable").tolist().index(i) + 1 for i in range(4)]
    for i in range(4):
        want = (11 / (10 + dense_rank[i]) if i < 2 else 0.0) + (0.5 * 11 / (10 + lex_rank[i]) if i != 2 else 0.0)
        want += 0.2 if i == 3 else 0.0  # the date hint is added, not ranked
        assert fused[i] == pytest.approx(want, rel=1e-6)
    summed = weighted_sum(ctx, terms, positions)
    assert not np.allclose(fused, summed)


def test_the_fusion_is_chosen_in_the_config() -> None:
    assert Pipeline.from_config(RetrievalConfig()).fusion is weighted_sum
    rrf = Pipeline.from_config(RetrievalConfig(fusion="rrf", rrf_k=20)).fusion
    assert rrf == ReciprocalRank(20)
    part = _part()
    query = Query.parse(part, "museum", np.array([0, 0, 1.0], dtype=np.float32))
    ranked = Pipeline.from_config(RetrievalConfig(fusion="rrf", day_weight=0)).rank(part, query, 2)
    assert ranked.positions.tolist()[0] == 3  # best dense and among the best lexical
    with pytest.raises(ValueError, match="fusion"):
        RetrievalConfig(fusion="max")  # type: ignore[arg-type]


def test_lexical_is_scaled_for_a_dialogue_query_only() -> None:
    part = _part()
    vec = np.array([1.0, 0, 0], dtype=np.float32)
    positions = np.arange(4)
    question = Context(part, Query.parse(part, "museum", vec))
    talk = Context(part, Query.parse(part, "User: museum\nAI: nice\nUser: museum", vec))
    term = Lexical(0.4, dialogue_scale=0.5)
    assert term.score(question, positions) == pytest.approx(Lexical(0.4).score(question, positions))
    assert term.score(talk, positions) == pytest.approx(0.5 * Lexical(0.4).score(talk, positions))
    assert Pipeline.from_config(RetrievalConfig(dialogue_lexical_scale=0.25)).terms[1] == Lexical(0.4, 0.25)
