"""Reading the settings' sources: ./.env over the environment, and the TOML config file, each
refused with a ConfigError naming the line or key that no setting reads. Apart from config.py,
which decides the precedence of what these return."""

from __future__ import annotations

import difflib
import logging
import os
import tomllib
from pathlib import Path
from typing import Any

from crossmodalrag.errors import ConfigError
from crossmodalrag.setting_names import OTHER_VARIABLES, PATH_LISTS, SCALARS


def read_environment(cwd: Path) -> dict[str, str]:
    """The process environment over the values of `./.env` (the real environment wins)."""
    env_file = cwd / ".env"
    merged: dict[str, str] = {}
    if env_file.is_file():
        from dotenv import dotenv_values

        unparsed = _DotenvComplaints()
        try:  # utf-8-sig: a byte-order mark, as some Windows editors write, is not part of the first name
            with unparsed:
                values = dotenv_values(env_file, encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"cannot read {env_file}: {_not_utf8(exc)}", "save it as UTF-8 text") from exc
        if unparsed.lines:  # python-dotenv logs "could not parse …" and goes on without the setting
            where = ", ".join(unparsed.lines)
            raise ConfigError(
                f"cannot read {env_file}: line {where} is not NAME=value",
                "fix or remove it; a value with spaces or # goes in quotes",
            )
        merged.update({k: v for k, v in values.items() if v is not None})
    merged.update(os.environ)
    return merged


class _DotenvComplaints(logging.Handler):
    """The line numbers python-dotenv could not parse, caught instead of logged in its own words."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.logger = logging.getLogger("dotenv.main")

    def emit(self, record: logging.LogRecord) -> None:
        if "could not parse" in record.getMessage():
            self.lines.append(str(record.args[0] if record.args else "?"))

    def __enter__(self) -> "_DotenvComplaints":
        self.logger.addHandler(self)
        self.propagate, self.logger.propagate = self.logger.propagate, False
        return self

    def __exit__(self, *exc_info) -> None:
        self.logger.removeHandler(self)
        self.logger.propagate = self.propagate


def _not_utf8(exc: UnicodeDecodeError) -> str:
    return f"byte {exc.object[exc.start]:#04x} at offset {exc.start} is not UTF-8"


def read_toml(path: Path, named: bool = True) -> dict[str, Any]:
    """The file's tables, each checked to be a known section holding known keys. `named`: the file is
    the one CMRAG_CONFIG names, else the ./crossmodalrag.toml found in the working directory (whose
    error said "unset CMRAG_CONFIG", a variable the user never set)."""
    hint = (
        "fix the file or unset CMRAG_CONFIG"
        if named
        else "fix the file, or rename it: mem reads ./crossmodalrag.toml of the working directory"
    )
    try:
        # utf-8-sig: a byte-order mark, as some Windows editors write, is not TOML but means no harm.
        toml = tomllib.loads(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read config {path}: {_not_utf8(exc)}", "save it as UTF-8 text") from exc
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}", hint) from exc
    _check_layout(toml, path)
    return toml


def _toml_keys() -> dict[str, set[str]]:
    """section -> the keys it may hold: every scalar setting's, the connector folder lists, the database file."""
    keys: dict[str, set[str]] = {}
    for name, setting in SCALARS.items():
        keys.setdefault(setting.section, set()).add(setting.key or name)
    keys["connectors"].update(key for _, key in PATH_LISTS.values())
    keys["database"].add("path")
    return keys


def _check_layout(toml: dict[str, Any], path: Path) -> None:
    """Refuse what no setting reads: a misspelt key or section was silently ignored, and so the setting."""
    known = _toml_keys()
    for section, table in toml.items():
        if section not in known:
            what = (
                f"unknown section [{section}]"
                if isinstance(table, dict)
                else f"unknown key {section} outside a section"
            )
            raise ConfigError(f"{what} in {path}", _where_it_belongs(section, None, known))
        if not isinstance(table, dict):
            shape = "a list of tables" if isinstance(table, list) else f"the value {table!r}"
            raise ConfigError(
                f"[{section}] in {path} is {shape}, not a table",
                f"write a [{section}] header with key = value lines under it",
            )
        for key in table:
            if key not in known[section]:
                raise ConfigError(f"unknown key {key} in [{section}] of {path}", _where_it_belongs(key, section, known))


def _where_it_belongs(name: str, section: str | None, known: dict[str, set[str]]) -> str:
    """The hint for an unknown name: the section that holds it, else the closest valid name."""
    homes = sorted(other for other, keys in known.items() if name in keys)
    if homes:
        return f"{name} belongs under [{homes[0]}]"
    if section is None and (close := difflib.get_close_matches(name, known, n=1)):
        return f"did you mean [{close[0]}]?"
    if section is not None and (close := difflib.get_close_matches(name, known[section], n=1)):
        return f"did you mean {close[0]}?"
    everywhere = {key: other for other, keys in known.items() for key in keys}
    if close := difflib.get_close_matches(name, everywhere, n=1):
        return f"did you mean {close[0]} under [{everywhere[close[0]]}]?"
    return "see crossmodalrag.toml.example for the sections and keys"


def unread_variables(env: dict[str, str]) -> list[str]:
    """Warnings for variables that look like settings but none reads: a misspelt CMRAG_LLM_MODEL_PAHT
    or an OBSIDIAN_VAULT_PATH_WORK (the suffix must be a number) left the setting unset without a word."""
    known = {f"CMRAG_{name.upper()}" for name in SCALARS} | OTHER_VARIABLES
    warnings = []
    for variable in sorted(env):
        if variable.startswith("CMRAG_") and variable not in known:
            close = difflib.get_close_matches(variable, known, n=1)
            hint = f"did you mean {close[0]}?" if close else "see crossmodalrag.toml.example for the settings"
            warnings.append(f"{variable} is not a setting mem reads ({hint})")
        for prefix, _ in PATH_LISTS.values():
            if variable.startswith(f"{prefix}_") and not variable[len(prefix) + 1 :].isdigit():
                warnings.append(f"{variable} is not read: folders are numbered, {prefix}_1, {prefix}_2, ...")
    return warnings
