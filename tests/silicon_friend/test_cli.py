"""The silicon-friend command: defaults, safety flags, login parsing, one-line errors."""

from __future__ import annotations

import io
import sys

import pytest

from memory_bank.errors import InvalidInputError
from silicon_friend import cli, runtime
from silicon_friend.models import prepare_model
from silicon_friend.web.server import load_credentials, parse_credential
from tests.silicon_friend.fakes import EchoChatModel


def test_web_defaults_are_safe() -> None:
    args = cli.build_parser().parse_args(["web"])
    assert args.host == "127.0.0.1" and args.port == 7860 and args.share is False
    assert args.auth is None and args.auth_file is None
    assert args.data_dir is None and args.llm is None and args.language == "en"
    assert cli._options(args).data_dir is None  # the config's store:, else ./memorybank_data (runtime)


def test_auth_and_auth_file_are_exclusive(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["web", "--auth", "a:b", "--auth-file", "f"])


def test_credentials(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert parse_credential("emily:se:cret") == ("emily", "se:cret")
    for bad in ("emily", ":pw", "emily:"):
        with pytest.raises(InvalidInputError):
            parse_credential(bad)
    f = tmp_path / "users"
    f.write_text("# who may sign in\nemily:pw1\n\n小明:pw2\n", encoding="utf-8")
    f.chmod(0o600)
    assert load_credentials([], f) == [("emily", "pw1"), ("小明", "pw2")]
    with pytest.raises(InvalidInputError, match="more than one password"):
        load_credentials(["emily:x"], f)
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_credentials([], tmp_path / "missing")


def test_errors_are_one_line_and_exit_2(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert cli.main(["web", "--auth", "nopassword", "--data-dir", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("silicon-friend: error: --auth: expected user:password") and err.count("\n") == 1
    code = cli.main(
        [
            "chat",
            "--user",
            "Emily",
            "--llm",
            "llamacpp:/no/such/model.gguf",
            "--data-dir",
            str(tmp_path / "d"),
        ]
    )
    assert code == 2 and "not found" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()  # nothing created for a bad model spec
    assert cli.main(["chat", "--llm", "nonsense", "--data-dir", str(tmp_path / "d")]) == 2


def test_chat_command_end_to_end(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    echo = EchoChatModel()
    seen = {}

    def fake_load(spec, *, context_tokens=None, trust_remote_code=False):  # type: ignore[no-untyped-def]
        seen["spec"] = spec
        return prepare_model(echo, context_tokens=context_tokens or 2048)

    monkeypatch.setattr(runtime, "load_model", fake_load)
    monkeypatch.setattr(
        sys, "stdin", io.StringIO("I adopted a cat.\nWhat is my cat called?\n/memories\nstop\n")
    )
    data = tmp_path / "data"
    code = cli.main(
        ["chat", "--user", "Emily", "--data-dir", str(data), "--encoder", "hashing", "--llm", "openai:x@http://h/v1",
         "--max-new-tokens", "32", "--no-summaries"]
    )  # fmt: skip
    printed = capsys.readouterr()
    out = printed.out
    assert code == 0 and seen["spec"] == "openai:x@http://h/v1"
    assert "SiliconFriend: Echo: What is my cat called?" in out and "Bye, Emily!" in out
    assert echo.calls[-1]["kwargs"]["max_tokens"] == 32
    from memory_bank import MemoryBank

    with MemoryBank.open(data, encoder="hashing") as bank:
        assert [m.query for m in bank.history("Emily")] == ["I adopted a cat.", "What is my cat called?"]


def test_chat_with_another_encoder_than_the_store_is_refused_at_start(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Issue 15, item 6: one line naming the store's encoder and the flag, before any chat."""
    from memory_bank import MemoryBank

    data = tmp_path / "data"
    with MemoryBank.open(data, encoder="hashing-32") as bank:
        bank.add_turn("Emily", "I adopted a cat.", "Lovely!")
    monkeypatch.setattr(runtime, "load_model", lambda spec, **kw: prepare_model(EchoChatModel(), context_tokens=2048))
    monkeypatch.setattr(sys, "stdin", io.StringIO("What is my cat called?\nstop\n"))
    code = cli.main(["chat", "--user", "Emily", "--data-dir", str(data), "--encoder", "hashing", "--llm", "openai:x@http://h/v1",
                     "--no-summaries"])  # fmt: skip
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line]  # after the "Loading ..." line
    assert code == 2 and len(errors) == 1 and err.splitlines()[-1] == errors[0]
    assert "'hashing-32'" in errors[0] and "--encoder hashing-32" in errors[0] and "Traceback" not in err
    with MemoryBank.open(data, encoder="hashing-32") as bank:
        assert [m.query for m in bank.history("Emily")] == ["I adopted a cat."]


def test_eval_answers_is_an_app_command(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    args = cli.build_parser().parse_args(
        ["eval", "answers", "--memory-file", "m.json", "--questions", "q.jsonl", "--labels", "l.jsonl",
         "--judge", "openai:m", "--out", str(tmp_path / "a.json")]
    )  # fmt: skip
    assert args.command == "eval" and args.eval_command == "answers" and args.k == 2
    code = cli.main(
        ["eval", "answers", "--memory-file", str(tmp_path / "missing.json"), "--questions", "q.jsonl",
         "--labels", "l.jsonl", "--judge", "openai:m", "--out", str(tmp_path / "a.json")]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "missing.json" in err and "Traceback" not in err


def test_python_dash_m_silicon_friend_is_the_command() -> None:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "silicon_friend", "chat", "--language", "xx"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "invalid choice: 'xx'" in out.stderr  # the same parser as silicon-friend


def test_a_bad_data_dir_encoder_or_llm_file_is_one_line_at_start(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """A mistyped --encoder on a new store failed every message while the chat said each was
    saved; a file given as --data-dir and a malformed YAML --llm file printed tracebacks."""
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "bad.yaml").write_text("model: [unclosed\n  base_url: x\n")
    llm = ["--llm", "openai:x@http://h/v1", "--no-summaries"]
    runs = {
        "llm file": ["chat", "--user", "Emily", "--data-dir", str(tmp_path / "d2"), "--llm", str(tmp_path / "bad.yaml")],
        "encoder": ["chat", "--user", "Emily", "--data-dir", str(tmp_path / "new"), "--encoder", "no-such-encoder", *llm],
        "data dir": ["chat", "--user", "Emily", "--data-dir", str(tmp_path / "a_file" / "d"), *llm],
    }
    for what, argv in runs.items():
        if what == "encoder":  # from here on the model loads (a fake): the store is what fails
            monkeypatch.setattr(runtime, "load_model", lambda spec, **kw: prepare_model(EchoChatModel(), context_tokens=2048))
            monkeypatch.setattr(sys, "stdin", io.StringIO("I adopted a cat.\nstop\n"))
        code = cli.main(argv)
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if "error" in line]
        assert code == 2 and len(errors) == 1 and "Traceback" not in err, (what, err)
    from memory_bank import MemoryBank

    with MemoryBank.open(tmp_path / "new", encoder="hashing") as bank:
        assert bank.users() == []  # nothing was "saved" with an encoder that cannot load


@pytest.mark.parametrize("flag", ["--context-tokens", "--timeout"])
def test_a_size_or_timeout_below_one_is_refused_at_start(tmp_path, capsys, flag) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as stopped:
        cli.main(["chat", "--user", "Emily", "--data-dir", str(tmp_path / "d"), flag, "-10"])
    assert stopped.value.code == 2 and "must be " in capsys.readouterr().err


def test_the_log_stays_out_of_the_conversation_unless_verbose(tmp_path, monkeypatch, capsys, caplog) -> None:  # type: ignore[no-untyped-def]
    """A failed reply printed the engine's English WARNING line into the chat beside the chat's
    own note (in Chinese in a Chinese chat)."""
    monkeypatch.setattr(runtime, "load_model", lambda spec, **kw: prepare_model(EchoChatModel(mode="empty"), context_tokens=2048))
    argv = ["chat", "--user", "Emily", "--data-dir", str(tmp_path / "d"), "--encoder", "hashing", "--llm", "openai:x@http://h/v1", "--no-summaries"]
    for verbose in (False, True):
        monkeypatch.setattr(sys, "stdin", io.StringIO("hello?\nstop\n"))
        assert cli.main(argv + (["-v"] if verbose else [])) == 0
        assert "the model returned an empty reply" in capsys.readouterr().out
        logged = [r for r in caplog.records if r.name == "silicon_friend.engine" and r.levelname == "WARNING"]
        assert bool(logged) is verbose
        caplog.clear()


def test_a_port_out_of_range_or_in_use_is_one_line(engine, capsys) -> None:  # type: ignore[no-untyped-def]
    """--port 99999 and a port already in use ended in tracebacks (Gradio's advice for the latter
    named its own environment variable, not --port)."""
    import socket

    from silicon_friend.errors import SiliconFriendError
    from silicon_friend.web.server import serve

    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["web", "--port", "99999"])
    assert "invalid tcp_port value: '99999'" in capsys.readouterr().err
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        with pytest.raises(SiliconFriendError, match=r"port \d+ on 127.0.0.1 is in use.*give another --port"):
            serve(engine, port=taken.getsockname()[1], block=False)
    finally:
        taken.close()
    # a --host this machine cannot listen on is named as such, not as a port in use
    with pytest.raises(SiliconFriendError, match=r"--host 'no-such-host\.invalid' is not a name or address"):
        serve(engine, host="no-such-host.invalid", port=7860, block=False)


@pytest.mark.parametrize("language", ["zh", "en"])
def test_the_terminal_chat_says_in_chinese_that_the_demo_model_cannot_chat_in_chinese(tmp_path, monkeypatch, capsys, language) -> None:  # type: ignore[no-untyped-def]
    """The web page says so in Chinese; the terminal printed only the English loading line and
    then the demo model's nonsense Chinese."""
    from memory_bank.llm import parse_llm_spec

    def fake_load(spec, *, context_tokens=None, trust_remote_code=False):  # type: ignore[no-untyped-def]
        return prepare_model(EchoChatModel(), spec=parse_llm_spec(spec), context_tokens=2048)

    monkeypatch.setattr(runtime, "load_model", fake_load)
    monkeypatch.setattr(sys, "stdin", io.StringIO("stop\n"))
    code = cli.main(["chat", "--user", "Emily", "--data-dir", str(tmp_path / "d"), "--encoder", "hashing",
                     "--language", language, "--no-summaries"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0 and (("离线演示模型（SmolLM2-135M）不能用中文聊天" in err) == (language == "zh"))
