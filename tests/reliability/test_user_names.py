"""One user-name rule everywhere (issue 15, item 9): names that look the same are the same user
(NFC, surrounding and inner whitespace), names that could only pass for another are refused
(invisible, format and control characters, no visible character, a leading combining mark, too
long), by add, search, delete, export, import, the web login, the MCP server and the LangChain
adapters alike; users stored before the rule under a name it refuses or changes stay reachable
by their exact name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_bank import MemoryBank
from memory_bank.cli import main
from memory_bank.embeddings import HashingEncoder
from memory_bank.errors import InvalidInputError
from memory_bank.langchain import MemoryBankRetriever
from memory_bank.text import MAX_USER_NAME, validate_user

#: Each pair looks the same on screen: one user.
SAME = [
    ("Zoe\u0308", "Zo\u00eb"),  # NFD and NFC
    ("Kim ", "Kim"),
    ("\u3000Kim\t", "Kim"),  # ideographic space, tab
    ("Kim\u00a0Lee", "Kim Lee"),  # no-break space
    ("Kim  Lee", "Kim Lee"),
    ("李雷 ", "李雷"),
]
#: Each name could only make a second user that passes for another (or for nobody).
REFUSED = [
    "bob\u200d",  # a trailing zero-width joiner
    "b\u200bob",  # a zero-width space
    "\u3164",  # Hangul filler
    "\u2800",  # Braille blank
    "alice\u202e",  # a bidirectional override
    "\u0301bob",  # a leading combining mark
    "bob\x00",
    "bob\ufe0f",  # a variation selector after a letter shows as nothing
    "Ann\u2028Lee",  # a line separator: shows as a line break, or as nothing
    "Ann\u2029Lee",  # a paragraph separator
    "b\U000e0100ob",
    "bob$\ufe0f",  # after a currency sign it shows as nothing too
    "bob\U0001f600\U000e0100",  # ideographic selectors only follow Han ideographs
    " ",
    "x" * (MAX_USER_NAME + 1),
]


def _bank(store: Path) -> MemoryBank:
    return MemoryBank.open(store, encoder_instance=HashingEncoder(32))


@pytest.mark.parametrize(("variant", "name"), SAME)
def test_names_that_look_the_same_are_one_user(tmp_path: Path, variant: str, name: str) -> None:
    assert validate_user(variant) == validate_user(name) == name
    with _bank(tmp_path / "s") as bank:
        bank.add_turn(variant, "My cat is called Miso.", "Lovely!")
        bank.add_turn(name, "Miso sleeps all day.", "Cats do.")
        assert bank.users() == [name]
        assert len(bank.search(variant, "cat", k=5)) == 2
        assert bank.delete_user(variant) == 2 and bank.users() == []


@pytest.mark.parametrize("name", REFUSED)
def test_names_that_pass_for_another_are_refused_everywhere(tmp_path: Path, name: str, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInputError):
        validate_user(name)
    store = tmp_path / "s"
    with _bank(store) as bank:
        bank.add_turn("bob", "I am the real bob.", "ok")
        with pytest.raises(InvalidInputError):
            bank.add_turn(name, "I am bob too.", "ok")
        assert bank.users() == ["bob"]
    if "\x00" in name:
        return  # a command line cannot carry NUL
    common = ["--store", str(store), "--encoder", "hashing-32"]
    for argv in (
        ["add", *common, "--user", name, "--query", "hello"],
        ["search", *common, "--user", name, "hello"],
        ["delete", *common, "--user", name],
        ["export", *common, "--user", name, "--out", str(tmp_path / "out.json")],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    memory_file = tmp_path / "in.json"
    memory_file.write_text(json.dumps({name: {"history": {"2023-05-01": [["hi", "hello"]]}}}), encoding="utf-8")
    assert main(["import", *common, str(memory_file)]) == 2
    assert "user" in capsys.readouterr().err
    with _bank(store) as bank:
        assert bank.users() == ["bob"]


def test_an_import_with_two_keys_for_one_user_is_refused(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    memory_file = tmp_path / "in.json"
    day = {"2023-05-01": [["hi", "hello"]]}
    memory_file.write_text(json.dumps({"alice": {"history": day}, "alice ": {"history": day}}), encoding="utf-8")
    store = tmp_path / "s"
    assert main(["import", "--store", str(store), "--encoder", "hashing-32", str(memory_file)]) == 2
    err = capsys.readouterr().err
    assert "'alice'" in err and "'alice '" in err and "one user" in err
    assert not (store / "memorybank.sqlite3").exists() or _bank(store).users() == []


def test_users_stored_before_the_rule_stay_reachable(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with _bank(store) as bank:
        for legacy in ("bob\u200d", " Jason "):  # as an older version stored them
            bank.storage.ensure_user(legacy)
        bank.add_turn("bob", "I am the real bob.", "ok")
        bank.add_turn("bob\u200d", "An old memory of the other bob.", "ok")  # exact name: their own
        assert [m.query for m in bank.history("bob\u200d")] == ["An old memory of the other bob."]
        assert [m.query for m in bank.history("bob")] == ["I am the real bob."]
        bank.add_turn("Jason", "I like chess.", "ok")  # the rule's form reaches ' Jason '
        assert bank.user("Jason").name == " Jason " and bank.history(" Jason ")
        assert sorted(bank.users()) == sorted(["bob\u200d", " Jason ", "bob"])
        bank.storage.ensure_user("Ann ")
        bank.storage.ensure_user(" Ann")
        with pytest.raises(InvalidInputError, match="give the exact stored name"):
            bank.user("Ann")
        assert bank.user("Ann ").name == "Ann "  # the exact name still works
        assert bank.delete_user("bob\u200d") == 1 and bank.history("bob")


def test_web_login_names_follow_the_rule() -> None:
    from silicon_friend.web.server import load_credentials, parse_credential

    assert parse_credential("alice :secret") == ("alice", "secret")
    with pytest.raises(InvalidInputError, match="more than one password"):
        load_credentials(["alice:one", "alice :two"])  # one user, two passwords
    with pytest.raises(InvalidInputError):
        parse_credential("alice\u200d:secret")


def test_mcp_and_langchain_names_follow_the_rule(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the MCP server needs the mcp package (pip install mcp)")
    from memory_bank.mcp_server import Users, load_tokens

    assert Users(user="Kim ").user == "Kim"
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"t" * 16: "Zoe\u0308"}), encoding="utf-8")
    assert load_tokens(tokens) == {"t" * 16: "Zo\u00eb"}
    tokens.write_text(json.dumps({"t" * 16: "\u3164"}), encoding="utf-8")
    with pytest.raises(InvalidInputError):
        load_tokens(tokens)
    with _bank(tmp_path / "s") as bank:
        bank.add_turn("Zo\u00eb", "My cat is called Miso.", "Lovely!")
        assert MemoryBankRetriever(bank=bank, user="Zoe\u0308", k=1).invoke("my cat")
        with pytest.raises(ValueError):
            MemoryBankRetriever(bank=bank, user="\u2800", k=1)


@pytest.mark.parametrize("name", ["Kim \u2764\ufe0f", "\u263a\ufe0e Al", "1\ufe0f\u20e3 Bo", "\u845b\U000e0100\u57ce"])
def test_variation_selectors_that_show_are_kept(name: str) -> None:
    """After an emoji or symbol, a keycap's digit or a Han ideograph a variation selector picks
    the glyph: names with them are names as typed."""
    assert validate_user(name) == name
