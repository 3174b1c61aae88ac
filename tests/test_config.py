from pathlib import Path

import pytest

from crossmodalrag.config import load_settings
from crossmodalrag.errors import ConfigError


def write_toml(folder: Path, body: str) -> Path:
    path = folder / "crossmodalrag.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_defaults_put_the_database_under_the_working_dir(isolated_env, monkeypatch):
    monkeypatch.delenv("CMRAG_DB_PATH")
    settings = load_settings()
    assert settings.db_path == isolated_env / "data" / "memory.db"
    assert settings.top_k == 5 and settings.title_boost_weight == 0.05
    assert settings.max_chunks_per_source == 3 and settings.dedupe_threshold == 0.95


def test_precedence_is_cli_then_env_then_dotenv_then_toml(isolated_env, monkeypatch):
    write_toml(isolated_env, "[retrieval]\ntop_k = 7\ntitle_boost_weight = 0.2\nprofile = 'recent'\n")
    (isolated_env / ".env").write_text("CMRAG_TOP_K=8\nCMRAG_TITLE_BOOST_WEIGHT=0.3\n", encoding="utf-8")
    monkeypatch.setenv("CMRAG_TOP_K", "9")
    settings = load_settings()
    assert settings.top_k == 9  # real environment beats .env
    assert settings.title_boost_weight == 0.3  # .env beats TOML
    assert settings.profile == "recent"  # TOML beats the default
    assert load_settings({"top_k": 3}).top_k == 3  # a CLI flag beats everything


def test_cmrag_config_names_the_toml_and_relative_paths_follow_the_file(tmp_path, monkeypatch):
    folder = tmp_path / "conf"
    folder.mkdir()
    config = write_toml(
        folder,
        '[database]\npath = "db/m.db"\n[connectors]\nnotes = ["vault", "~/other"]\ngit = ["code/repo"]\n'
        'notes_exclude = ["private/**"]\n',
    )
    monkeypatch.setenv("CMRAG_CONFIG", str(config))
    monkeypatch.delenv("CMRAG_DB_PATH")
    settings = load_settings()
    assert settings.config_path == config
    assert settings.db_path == folder / "db" / "m.db"
    assert settings.notes_paths == [folder / "vault", Path("~/other").expanduser()]
    assert settings.git_paths == [folder / "code" / "repo"]
    assert settings.notes_exclude == ["private/**"]


def test_numbered_environment_connectors_replace_the_toml_list(isolated_env, monkeypatch):
    write_toml(isolated_env, '[connectors]\nnotes = ["from-toml"]\n')
    (isolated_env / ".env").write_text("OBSIDIAN_VAULT_PATH_2=/vaults/b\nOBSIDIAN_VAULT_PATH_1=/vaults/a\n")
    monkeypatch.setenv("REPO_PATH_1", "/code/x")
    monkeypatch.setenv("CMRAG_NOTES_INCLUDE", "work/**, projects/**")
    settings = load_settings()
    assert settings.notes_paths == [Path("/vaults/a"), Path("/vaults/b")]
    assert settings.git_paths == [Path("/code/x")]
    assert settings.notes_include == ["work/**", "projects/**"]


def test_cmrag_home_places_the_database(tmp_path, monkeypatch):
    monkeypatch.delenv("CMRAG_DB_PATH")
    monkeypatch.setenv("CMRAG_HOME", str(tmp_path / "home"))
    assert load_settings().db_path == tmp_path / "home" / "memory.db"


@pytest.mark.parametrize(
    "variable, value", [("CMRAG_TOP_K", "many"), ("CMRAG_DEDUPE_THRESHOLD", "1.5"), ("CMRAG_PROFILE", "fastest")]
)
def test_invalid_values_are_config_errors_naming_the_setting(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=variable):
        load_settings()


def test_memory_windows_and_gaps_in_range_are_kept(monkeypatch):
    monkeypatch.setenv("CMRAG_DRIFT_WINDOW_DAYS", "7")
    monkeypatch.setenv("CMRAG_EPISODE_GAP_HOURS", "0")
    monkeypatch.setenv("CMRAG_EXTRACT_WINDOW_CHARS", "3000")
    settings = load_settings()
    assert (settings.drift_window_days, settings.episode_gap_hours, settings.extract_window_chars) == (7.0, 0.0, 3000)


def test_broken_toml_is_a_config_error(isolated_env, monkeypatch):
    """The hint named CMRAG_CONFIG for the ./crossmodalrag.toml found in the working directory, a
    variable the user never set."""
    write_toml(isolated_env, "[retrieval\ntop_k = ")
    with pytest.raises(ConfigError, match=r"cannot read config .*crossmodalrag.toml: .*\(at line 1") as found:
        load_settings()
    assert found.value.hint == "fix the file, or rename it: mem reads ./crossmodalrag.toml of the working directory"
    monkeypatch.setenv("CMRAG_CONFIG", str(isolated_env / "crossmodalrag.toml"))
    with pytest.raises(ConfigError) as named:
        load_settings()
    assert named.value.hint == "fix the file or unset CMRAG_CONFIG"


def test_missing_cmrag_config_file_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CMRAG_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="not found"):
        load_settings()


def test_the_premise_check_takes_a_margin_or_off(isolated_env, monkeypatch):
    assert load_settings().verify_min_premise_margin == -0.25
    write_toml(isolated_env, "[llm]\nverify_min_premise_margin = -0.5\n")
    assert load_settings().verify_min_premise_margin == -0.5
    monkeypatch.setenv("CMRAG_VERIFY_MIN_PREMISE_MARGIN", "off")
    assert load_settings().verify_min_premise_margin is None


def test_a_database_file_on_the_command_line_wins_over_cmrag_db_url(isolated_env, monkeypatch, tmp_path, capsys):
    from crossmodalrag.cli.main import main

    monkeypatch.setenv("CMRAG_DB_URL", "postgresql://nobody@127.0.0.1:1/none")
    assert load_settings().db_url and load_settings({"db_path": tmp_path / "m.db"}).db_url is None
    assert main(["init-db", "--db-path", str(tmp_path / "m.db")]) == 0
    assert (tmp_path / "m.db").exists() and "m.db" in capsys.readouterr().err


@pytest.mark.parametrize(
    "url", ["mysql://root@localhost/db", "sqlite:///m.db", "./data/memory.db", "postgresql://u@[::1/db"]
)
def test_cmrag_db_url_must_be_a_postgresql_url(isolated_env, monkeypatch, url):
    monkeypatch.setenv("CMRAG_DB_URL", url)
    with pytest.raises(ConfigError, match="not a postgresql://|not a valid url"):
        load_settings()
    monkeypatch.setenv("CMRAG_DB_URL", "postgresql://u@h1:5432,h2:5432/db")  # libpq's several hosts
    assert load_settings().db_url


def test_a_blank_cmrag_db_url_is_none_and_migrate_refuses_another_scheme(isolated_env, monkeypatch, tmp_path, capsys):
    from crossmodalrag.cli.main import main

    monkeypatch.setenv("CMRAG_DB_URL", "  ")
    assert load_settings().db_url is None
    assert main(["init-db", "--db-path", str(tmp_path / "m.db")]) == 0
    monkeypatch.chdir(tmp_path)
    assert main(["migrate", "--db-path", str(tmp_path / "m.db"), "--to", "mysql://root@localhost/db"]) == 1
    assert "neither a postgresql:// url nor a file" in capsys.readouterr().err and not (tmp_path / "mysql:").exists()


def test_one_connector_folder_written_as_a_string_is_that_folder(isolated_env, monkeypatch):
    """Iterated, `notes = "/x/vault"` was one folder per character, "/" among them: sync read the machine."""
    write_toml(isolated_env, '[connectors]\nnotes = "/x/vault"\ngit = 7\n')
    with pytest.raises(ConfigError, match=r"\[connectors\] git .* must be a list"):
        load_settings()
    write_toml(isolated_env, '[connectors]\nnotes = "/x/vault"\n')
    assert load_settings().notes_paths == [Path("/x/vault")]


def test_top_k_zero_is_refused(isolated_env, monkeypatch):
    monkeypatch.setenv("CMRAG_TOP_K", "0")
    with pytest.raises(ConfigError, match="below 1"):
        load_settings()


def test_every_value_env_example_shows_is_the_default(isolated_env):
    """Uncommenting a line of .env.example must not change behaviour: it showed 0.5 for a 0.075 default."""
    import re as regex
    from dataclasses import MISSING, fields

    from crossmodalrag.config import SCALARS, Settings

    defaults = {f.name: f.default for f in fields(Settings) if f.default is not MISSING}  # lists: examples
    example = (Path(__file__).parent.parent / ".env.example").read_text(encoding="utf-8")
    checked = 0
    for name, value, comment in regex.findall(r"^# CMRAG_(\w+)=(\S+)(.*)$", example, regex.M):
        name = name.lower()
        if name in SCALARS and defaults.get(name) is not None and "by default" not in comment:  # shown on purpose
            assert SCALARS[name].parse(value) == defaults[name], name
            checked += 1
    assert checked >= 10


def _float_settings() -> list[str]:
    import typing

    from crossmodalrag.config import SCALARS, Settings

    hints = typing.get_type_hints(Settings)
    return [name for name in SCALARS if float in (hints[name], *typing.get_args(hints[name]))]


def test_every_float_setting_is_checked_when_parsed():
    """A plain `float` parser let nan through: NaN scores, invalid JSON, and a crash in the HTTP client."""
    from crossmodalrag.config import SCALARS

    assert len(_float_settings()) >= 25  # the list follows Settings; a new float setting is checked too
    for name in _float_settings():
        for value in ("nan", "inf", "-inf"):
            with pytest.raises(ValueError, match="not a finite number|outside 0..1"):
                SCALARS[name].parse(value)


@pytest.mark.parametrize(
    "variable, value, why",
    [
        ("CMRAG_RECENCY_HALF_LIFE_DAYS", "nan", "not a finite number"),
        ("CMRAG_RECENCY_HALF_LIFE_DAYS", "0", "not above 0"),
        ("CMRAG_RECENCY_HALF_LIFE_DAYS", "-5", "not above 0"),
        ("CMRAG_USAGE_HALFLIFE_DAYS", "0", "not above 0"),
        ("CMRAG_USAGE_SATURATION", "nan", "not a finite number"),
        ("CMRAG_USAGE_SATURATION", "0", "not above 0"),
        ("CMRAG_LLM_CONNECT_TIMEOUT", "-1", "not above 0"),
        ("CMRAG_LLM_CONNECT_TIMEOUT", "nan", "not a finite number"),
        ("CMRAG_LLM_TIMEOUT", "0", "not above 0"),
        ("CMRAG_LLM_TEMPERATURE", "-0.1", "below 0"),
        ("CMRAG_DB_STATEMENT_TIMEOUT", "0", "below 0.001"),
        ("CMRAG_ABSTAIN_MIN_MARGIN", "-inf", "not a finite number"),
        ("CMRAG_VERIFY_MIN_MARGIN", "nan", "not a finite number"),
        ("CMRAG_VERIFY_MIN_PREMISE_MARGIN", "inf", "not a finite number"),
        ("CMRAG_RECENCY_WEIGHT", "nan", "not a finite number"),
        ("CMRAG_EMBED_BATCH_SIZE", "0", "below 1"),
        ("CMRAG_LLM_MAX_TOKENS", "0", "below 1"),
        ("CMRAG_LLM_CONTEXT_TOKENS", "100", "below 256"),
        ("CMRAG_LLM_EVIDENCE_CHARS", "0", "below 1"),
        ("CMRAG_DRIFT_WINDOW_DAYS", "0", "below 1"),
        ("CMRAG_DRIFT_WINDOW_DAYS", "0.0001", "below 1"),
        ("CMRAG_DRIFT_WINDOW_DAYS", "-5", "below 1"),
        ("CMRAG_DRIFT_WINDOW_DAYS", "inf", "not a finite number"),
        ("CMRAG_EPISODE_GAP_HOURS", "-1", "below 0"),
        ("CMRAG_EPISODE_GAP_HOURS", "nan", "not a finite number"),
        ("CMRAG_EXTRACT_WINDOW_CHARS", "0", "below 500"),
    ],
)
def test_numbers_out_of_range_are_refused_by_name(monkeypatch, variable, value, why):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=f"invalid {variable}: .*{why}"):
        load_settings()


def test_numbers_out_of_range_in_the_toml_file_are_refused_too(isolated_env):
    write_toml(isolated_env, "[memory]\nusage_saturation = nan\n")
    with pytest.raises(ConfigError, match=r"invalid \[memory\] usage_saturation in .*not a finite number"):
        load_settings()
    write_toml(isolated_env, "[llm]\nconnect_timeout = -1\n")
    with pytest.raises(ConfigError, match=r"invalid \[llm\] connect_timeout in .*not above 0"):
        load_settings()


def test_numbers_in_range_are_kept(isolated_env, monkeypatch):
    monkeypatch.setenv("CMRAG_ABSTAIN_MIN_MARGIN", "-2.5")  # a margin may be negative
    monkeypatch.setenv("CMRAG_LLM_TEMPERATURE", "0")
    write_toml(isolated_env, "[retrieval]\nrecency_half_life_days = 30\n[llm]\nconnect_timeout = 0.5\n")
    settings = load_settings()
    assert (settings.abstain_min_margin, settings.llm_temperature) == (-2.5, 0.0)
    assert (settings.recency_half_life_days, settings.llm_connect_timeout) == (30.0, 0.5)


@pytest.mark.parametrize(
    "body, message, hint",
    [
        ("[retrieval]\ntopk = 3\n", r"unknown key topk in \[retrieval\] of .*crossmodalrag.toml", "did you mean top_k"),
        ("[retreival]\ntop_k = 1\n", r"unknown section \[retreival\] in ", r"did you mean \[retrieval\]"),
        ("[llm]\nmodel_paht = 'x.gguf'\n", r"unknown key model_paht in \[llm\]", "did you mean model_path"),
        ("[embeddings]\ntop_k = 0\n", r"unknown key top_k in \[embeddings\]", r"top_k belongs under \[retrieval\]"),
        ("topk = 3\n", "unknown key topk outside a section", r"did you mean top_k under \[retrieval\]"),
        ("[memory]\nrecency_halflife = 3\n", r"unknown key recency_halflife in \[memory\]", r"recency_half_life_days"),
    ],
)
def test_misspelt_or_misplaced_toml_keys_are_refused_with_the_closest_name(isolated_env, body, message, hint):
    """A typo was silently ignored, and with it the setting: the user could not tell why it had no effect."""
    write_toml(isolated_env, body)
    with pytest.raises(ConfigError, match=message) as raised:
        load_settings()
    assert raised.value.hint and __import__("re").search(hint, raised.value.hint)


@pytest.mark.parametrize(
    "body, message",
    [
        ("retrieval = 5\n", r"\[retrieval\] in .* is the value 5, not a table"),
        ("connectors = 5\n", r"\[connectors\] in .* not a table"),
        ('database = "path"\n', r"\[database\] in .* is the value 'path', not a table"),
        ("[[retrieval]]\ntop_k = 3\n", r"\[retrieval\] in .* is a list of tables, not a table"),
    ],
)
def test_a_section_that_is_not_a_table_is_a_config_error(isolated_env, body, message):
    write_toml(isolated_env, body)
    with pytest.raises(ConfigError, match=message):
        load_settings()


def test_a_toml_file_that_is_not_utf8_is_a_config_error_naming_it(isolated_env):
    (isolated_env / "crossmodalrag.toml").write_bytes(b"[retrieval]\ntop_k = 3 # \xff\n")
    with pytest.raises(ConfigError, match=r"cannot read config .*crossmodalrag.toml: byte 0xff at offset 24"):
        load_settings()


def test_a_dotenv_that_is_not_utf8_is_a_config_error_naming_it(isolated_env):
    (isolated_env / ".env").write_bytes(b"\xff\xfeCMRAG_TOP_K=3\n")
    with pytest.raises(ConfigError, match=r"cannot read .*\.env: byte 0xff at offset 0 is not UTF-8"):
        load_settings()


def test_a_dotenv_line_that_is_no_setting_is_a_config_error_naming_the_file_and_line(isolated_env, capsys):
    """python-dotenv logged "could not parse statement starting at line 2" in its own words and went on
    without the setting the user meant."""
    (isolated_env / ".env").write_text("CMRAG_TOP_K=3\nthis is not a setting\nCMRAG_TITLE_BOOST_WEIGHT=0.3\n")
    with pytest.raises(ConfigError, match=r"cannot read .*\.env: line 2 is not NAME=value"):
        load_settings()
    assert "python-dotenv" not in capsys.readouterr().err
    (isolated_env / ".env").write_text("# a comment\nCMRAG_TOP_K=3  # the default is 5\n\n")
    assert load_settings().top_k == 3


def test_a_byte_order_mark_is_accepted_in_the_toml_file_and_dotenv(isolated_env):
    (isolated_env / "crossmodalrag.toml").write_bytes(b"\xef\xbb\xbf[retrieval]\ntop_k = 3\n")
    assert load_settings().top_k == 3
    (isolated_env / ".env").write_bytes(b"\xef\xbb\xbfCMRAG_TOP_K=4\n")
    assert load_settings().top_k == 4


def test_relative_model_paths_in_the_toml_file_follow_the_file(tmp_path, monkeypatch):
    """The example and this module's docstring promised it; they were resolved against the working directory."""
    folder = tmp_path / "conf"
    (folder / "sub").mkdir(parents=True)
    config = write_toml(folder, '[llm]\nmodel_path = "model.gguf"\n[embeddings]\nmodel_path = "models/minilm"\n')
    monkeypatch.setenv("CMRAG_CONFIG", str(config))
    monkeypatch.chdir(folder / "sub")
    settings = load_settings()
    assert settings.llm_model_path == str(folder / "model.gguf")
    assert settings.embed_model_path == str(folder / "models" / "minilm")
    monkeypatch.setenv("CMRAG_LLM_MODEL_PATH", "mine.gguf")  # a variable's relative path: the working directory
    assert load_settings().llm_model_path == str(folder / "sub" / "mine.gguf")


def test_the_chosen_model_names_where_its_setting_came_from(tmp_path, monkeypatch):
    from crossmodalrag.answer.llm import choose_provider

    config = write_toml(tmp_path, '[llm]\nmodel_path = "model.gguf"\n')
    monkeypatch.setenv("CMRAG_CONFIG", str(config))
    assert choose_provider(load_settings()) == ("llamacpp", f"[llm] model_path in {config} is set")
    monkeypatch.setenv("CMRAG_LLM_MODEL_PATH", "/m.gguf")
    assert choose_provider(load_settings()) == ("llamacpp", "CMRAG_LLM_MODEL_PATH is set")
    write_toml(tmp_path, '[llm]\nprovider = "none"\n')
    assert choose_provider(load_settings()) == ("none", f"[llm] provider in {config} = none")


def test_every_value_the_toml_example_sets_is_the_default(isolated_env, monkeypatch):
    """Copying crossmodalrag.toml.example must not change behaviour: it set 2 chunks a source and a 0.5
    coverage threshold against defaults of 3 and 0.075, so the copy silently overrode the fitted gate."""
    from dataclasses import fields

    monkeypatch.delenv("CMRAG_DB_PATH")
    defaults = load_settings()
    example = (Path(__file__).parent.parent / "crossmodalrag.toml.example").read_text(encoding="utf-8")
    write_toml(isolated_env, example)
    from_example = load_settings()  # it loads: no unknown key or section either
    assert len(from_example.origins) >= 15  # the file was read, and its settings taken
    for each in fields(defaults):
        if each.name not in ("config_path", "origins"):
            assert getattr(from_example, each.name) == getattr(defaults, each.name), each.name


def test_the_commented_examples_of_the_toml_example_load_once_uncommented(isolated_env):
    import re as regex

    example = (Path(__file__).parent.parent / "crossmodalrag.toml.example").read_text(encoding="utf-8")
    uncommented, count = regex.subn(r"^# (\w+ = )", r"\1", example, flags=regex.M)
    assert count >= 5
    write_toml(isolated_env, uncommented)
    settings = load_settings()
    assert settings.abstain_min_similarity == 0.91 and settings.notes_paths[0].name == "work-vault"


def test_a_setting_given_in_code_no_longer_names_the_file(tmp_path, monkeypatch):
    config = write_toml(tmp_path, '[llm]\nprovider = "ollama"\n')
    monkeypatch.setenv("CMRAG_CONFIG", str(config))
    assert load_settings().origin("llm_provider") == f"[llm] provider in {config}"
    assert load_settings({"llm_provider": "none"}).origin("llm_provider") == "CMRAG_LLM_PROVIDER"


def test_a_bad_value_from_dotenv_is_named_with_the_file_and_in_words(isolated_env):
    (isolated_env / ".env").write_text("CMRAG_TOP_K=zero\n")
    with pytest.raises(ConfigError, match=r"invalid CMRAG_TOP_K in .*\.env: 'zero' is not a whole number"):
        load_settings()


def test_a_misspelt_variable_or_an_unnumbered_folder_is_warned_about(isolated_env, monkeypatch, capsys):
    """CMRAG_LLM_MODEL_PAHT and OBSIDIAN_VAULT_PATH_WORK left their setting unset without a word."""
    from crossmodalrag.cli.main import main

    monkeypatch.setenv("CMRAG_LLM_MODEL_PAHT", "model.gguf")
    monkeypatch.setenv("OBSIDIAN_VAULT_PATH_WORK", str(isolated_env))
    monkeypatch.setenv("OBSIDIAN_VAULT_PATH_2", str(isolated_env))
    assert main(["init-db"]) == 0
    err = capsys.readouterr().err
    assert "warning: CMRAG_LLM_MODEL_PAHT is not a setting mem reads (did you mean CMRAG_LLM_MODEL_PATH?)" in err
    assert "warning: OBSIDIAN_VAULT_PATH_WORK is not read: folders are numbered" in err
    assert "OBSIDIAN_VAULT_PATH_2 " not in err and "CMRAG_DB_PATH" not in err
