"""A small model's reply loses the prompt's instructions it repeated, and keeps the rest."""

from __future__ import annotations

import pytest

from silicon_friend.echo import strip_echo
from silicon_friend.prompts import prompt_texts

EN, ZH = prompt_texts("en"), prompt_texts("zh")


@pytest.mark.parametrize(
    ("reply", "kept"),
    [
        # the reply-length rule, before and after the answer
        ("Reply as SiliconFriend in English, in one to three short sentences. Miso is your cat!", "Miso is your cat!"),
        ("Hi Emily! How was your day?\nReply as SiliconFriend in English, in one to three short sentences.",
         "Hi Emily! How was your day?"),
        ("Your cat is called Miso. In one to three short sentences.", "Your cat is called Miso."),
        # the portrait heading, alone on its line or opening the answer
        ("What you know about Emily's personality, and how best to talk with them:\nYou love gardening.",
         "You love gardening."),
        ("What you know about Emily's personality, and how best to talk with them: you are calm and kind.",
         "you are calm and kind."),
        ("Memories related to Emily's message: [2023-04-28] I adopted a cat named Miso.",
         "[2023-04-28] I adopted a cat named Miso."),
        # nothing copied: untouched, even words the prompt also uses
        ("I remember you adopted a cat named Miso. How is she?", "I remember you adopted a cat named Miso. How is she?"),
        ("Reply soon, I miss our talks!", "Reply soon, I miss our talks!"),
        # text that is not prose (a link, an address, a number) is left exactly as written
        ("look ![me](http://127.0.0.1:8/reply-md.png) done", "look ![me](http://127.0.0.1:8/reply-md.png) done"),
        ("It costs 3.50 euros.Really!", "It costs 3.50 euros.Really!"),
    ],
)
def test_english_echoes_are_cut(reply: str, kept: str) -> None:
    assert strip_echo(reply, EN, "Emily") == kept


def test_chinese_echoes_are_cut() -> None:
    assert strip_echo("请以硅基朋友的身份用中文回复，一到三句话即可。咪咪是你的猫！", ZH, "小明") == "咪咪是你的猫！"
    assert strip_echo("你对小明性格的了解，以及与其交流的最佳方式：你很温柔。", ZH, "小明") == "你很温柔。"
    assert strip_echo("今天过得怎么样？", ZH, "小明") == "今天过得怎么样？"


def test_a_reply_that_was_only_an_echo_becomes_empty() -> None:
    assert strip_echo("Reply as SiliconFriend in English, in one to three short sentences.", EN, "Emily") == ""


def test_a_reply_keeps_its_indentation_and_paragraphs() -> None:
    """Every line was stripped and blank lines dropped, also where nothing was cut: a reply's
    code lost its indentation (broken Python) and its paragraphs ran together, on screen and in
    the memory bank. A line that was all echo still leaves no blank line behind."""
    reply = (
        " Here is the function:\n\n```python\ndef double(x):\n    return x * 2\n```\n\n"
        "Reply as SiliconFriend in English, in one to three short sentences.\n"
        "Second paragraph."
    )
    assert strip_echo(reply, EN, "Emily") == (
        "Here is the function:\n\n```python\ndef double(x):\n    return x * 2\n```\n\nSecond paragraph."
    )
