"""TOML parsing for every reader of a TOML file (``--config``, site configs, sweep specs): the standard
library's ``tomllib`` on Python 3.11+, else the ``tomli`` package it was taken from (same API; declared in
pyproject.toml for Python < 3.11).  The one place that knows which of the two is in use."""

from __future__ import annotations

try:
    from tomllib import TOMLDecodeError, loads
except ModuleNotFoundError:  # Python 3.10
    from tomli import TOMLDecodeError, loads

__all__ = ["TOMLDecodeError", "loads"]
