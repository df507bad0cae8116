"""The configuration: the shipped YAML matches the defaults; typos are errors."""

from __future__ import annotations

import pytest

from memory_bank import ConfigError, MemoryBankConfig, load_config
from tests.conftest import REPO


def test_shipped_config_documents_the_defaults() -> None:
    cfg = load_config(REPO / "configs" / "memorybank.yaml")
    assert cfg.model_dump() == MemoryBankConfig(store="./memorybank_data").model_dump()
    assert cfg.retrieval.top_k == 2 and cfg.history_window == 7 and cfg.forgetting.mode == "paper"


def test_flags_override_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "c.yaml"
    f.write_text("language: zh\nforgetting:\n  mode: paper\n  tau: 3\n")
    cfg = load_config(f, forgetting={"seed": 5}, store=str(tmp_path))
    assert (cfg.language, cfg.forgetting.mode, cfg.forgetting.tau, cfg.forgetting.seed) == ("zh", "paper", 3, 5)
    assert cfg.encoder_for() == "use-multilingual"


@pytest.mark.parametrize(
    "text, match",
    [
        ("retrieval:\n  topk: 3\n", "retrieval.topk: unknown key"),
        ("forgetting:\n  mode: sometimes\n", "forgetting.mode"),
        ("forgetting:\n  tau: 0\n", "forgetting.tau"),
        ("- a\n- b\n", "must hold a mapping"),
        ("a: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_config_names_the_problem(tmp_path, text, match) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(f)


def test_shipped_forgetting_config_is_the_measured_selective_setting() -> None:
    from memory_bank.config import SELECTIVE_FORGETTING, ForgettingConfig

    cfg = load_config(REPO / "configs" / "forgetting.yaml")
    assert cfg.forgetting == ForgettingConfig(**SELECTIVE_FORGETTING)
    assert cfg.forgetting.cold_tier and cfg.forgetting.content_weights and cfg.forgetting.mode == "paper"
    assert load_config().forgetting == cfg.forgetting  # it is the default, spelled out


def test_forgetting_is_off_one_setting_away(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.cli import build_parser
    from memory_bank.cli_support import open_bank
    from memory_bank.config import FORGETTING_OFF

    f = tmp_path / "c.yaml"
    f.write_text("forgetting: {mode: 'off'}\n")
    assert load_config(f).forgetting.mode == "off" == load_config(forgetting=FORGETTING_OFF).forgetting.mode
    args = build_parser().parse_args(["stats", "--store", str(tmp_path / "s"), "--forgetting", "off"])
    with open_bank(args, create=True) as bank:
        assert bank.config.forgetting.mode == "off"


def test_a_config_file_that_is_not_utf8_or_yaml_is_one_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.summaries.config import load_summary_config

    latin = tmp_path / "latin.yaml"
    latin.write_bytes("# caf\xe9\nretrieval: {top_k: 3}\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="save it as UTF-8"):
        load_config(latin)
    with pytest.raises(ConfigError):
        load_summary_config(latin)
    broken = tmp_path / "broken.yaml"
    broken.write_text("retrieval: [unclosed\n  top_k: 3\n")
    with pytest.raises(ConfigError) as e:
        load_config(broken)
    assert "\n" not in str(e.value)


def test_yaml_off_and_misspelt_keys_are_understood(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """YAML reads an unquoted off as false: ``forgetting: {mode: off}`` (the form the docs give)
    was refused with "Input should be 'paper', 'original-code' or 'off'", and a misspelt key
    got pydantic's "Extra inputs are not permitted" with no hint of the key meant."""
    import pytest

    from memory_bank.config import load_config
    from memory_bank.errors import ConfigError

    for text in ("forgetting: {mode: off}\n", "forgetting: off\n", 'forgetting: "off"\n'):
        (tmp_path / "c.yaml").write_text(text)
        assert load_config(tmp_path / "c.yaml").forgetting.mode == "off"
    (tmp_path / "c.yaml").write_text("retrieval: {topk: 3}\nforgeting: {tau: 2}\n")
    with pytest.raises(ConfigError) as refused:
        load_config(tmp_path / "c.yaml")
    assert "retrieval.topk: unknown key (did you mean 'top_k'?)" in str(refused.value)
    assert "forgeting: unknown key (did you mean 'forgetting'?)" in str(refused.value)


def test_a_config_files_store_is_used_where_no_store_is_given(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """configs/memorybank.yaml has a store: key and the README suggests one for PostgreSQL, yet
    every command required --store, silicon-friend used ./memorybank_data and MemoryBank.open
    needed a store argument."""
    import pytest

    from memory_bank import MemoryBank
    from memory_bank.cli import main
    from memory_bank.errors import InvalidInputError
    from silicon_friend.runtime import Options, open_bank

    config = tmp_path / "c.yaml"
    config.write_text(f"store: {tmp_path / 'mine'}\nencoder: hashing-64\n")
    assert main(["add", "--config", str(config), "--user", "Ann", "--query", "I play the harp"]) == 0
    assert main(["stats", "--config", str(config)]) == 0 and "turn: 1" in capsys.readouterr().out
    with MemoryBank.open(config_file=config) as bank:
        assert [m.text for m in bank.history("Ann")] == ["I play the harp"]
    bank = open_bank(Options(data_dir=None, config=str(config)))
    try:
        assert bank.has_user("Ann")
    finally:
        bank.close()
    (tmp_path / "none.yaml").write_text("language: en\n")
    with pytest.raises(InvalidInputError, match="no store given"):
        MemoryBank.open(config_file=tmp_path / "none.yaml")
    with pytest.raises(SystemExit):
        main(["stats", "--config", str(tmp_path / "none.yaml")])
    assert "--store (or a store: in the --config file)" in capsys.readouterr().err


def test_an_empty_store_in_a_config_file_is_refused(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """store: "" made a store in whatever folder the command ran in."""
    import pytest

    from memory_bank.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text('store: ""\nencoder: hashing-64\n')
    with pytest.raises(SystemExit) as refused:
        main(["add", "--config", "c.yaml", "--user", "Ann", "--query", "hi"])
    assert refused.value.code == 2
    assert not (tmp_path / "memorybank.sqlite3").exists()
    with pytest.raises(Exception, match="store: is empty"):
        from memory_bank.config import load_config

        load_config(tmp_path / "c.yaml")
