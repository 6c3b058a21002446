"""One exception root for everything iodiag reports to a user.

Every subclass carries an exit code and a one-line message that names the
path (or thing), the cause and the next step.  Only ``iodiag.cli`` catches
``IodiagError`` and turns it into output and an exit code; nothing else
catches everything.
"""

from __future__ import annotations


class IodiagError(Exception):
    """Root of all user-facing errors."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} — {self.hint}"
        return self.message


class UsageError(IodiagError):
    """The command line asks for something impossible."""

    exit_code = 2


class InputNotFound(IodiagError):
    """A path, job id or log tree that does not exist."""

    exit_code = 3


class InputUnreadable(IodiagError):
    """A path exists but cannot be read or is not what it should be."""

    exit_code = 4


class AmbiguousInput(IodiagError):
    """The input names several jobs; the user must pick one."""

    exit_code = 5

    def __init__(self, message: str, *, hint: str | None = None, choices: list | None = None) -> None:
        super().__init__(message, hint=hint)
        self.choices = choices or []


class NoUsableData(IodiagError):
    """Every log of a job failed to load."""

    exit_code = 6


class ConfigError(IodiagError):
    """A configuration file or value is invalid."""

    exit_code = 7


class CollectorError(IodiagError):
    """A collector (Darshan, embedded) cannot be set up or found."""

    exit_code = 8


class JobStoreError(IodiagError):
    """The job store cannot be read or written."""

    exit_code = 9


class DependencyMissing(IodiagError):
    """An optional dependency that this command needs is not installed."""

    exit_code = 10


class ModelUnusable(IodiagError):
    """A recommender model file is missing, untrained, stale or of another schema (the hint says how to retrain)."""

    exit_code = 11


class Interrupted(IodiagError):
    """The user interrupted the command (Ctrl-C); the message says what was kept and how to go on."""

    exit_code = 130
