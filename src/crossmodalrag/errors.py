"""The error tree. The library raises these; only the CLI turns them into `error: …` lines."""

from __future__ import annotations

# mem is installed from its checkout (README), not from PyPI, where no "crossmodalrag" is published.
UPGRADE_HINT = "upgrade mem: in its checkout, `git pull` then `pip install -e .`"


class CMRAGError(Exception):
    """An expected failure with a message for the user and a hint on what to do next."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


class ConfigError(CMRAGError):
    """A setting or config file is invalid."""


class StoreError(CMRAGError):
    """The database cannot be opened, is corrupt, or is newer than this program."""


class WriteConflict(StoreError):
    """The server aborted a write that collided with a concurrent one (PostgreSQL SQLSTATE 40001
    serialization failure, 40P01 deadlock): nothing of it was kept, and running it again is safe."""


class ConnectorError(CMRAGError):
    """A source path cannot be read as the connector's kind of input."""


class EvalError(CMRAGError):
    """An evaluation input (query file, query set) is unusable."""


class MissingExtraError(CMRAGError):
    """An optional capability's packages are not installed; the hint names the pip install."""
