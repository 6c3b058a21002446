"""Where iodiag keeps files it can rebuild at will (compiled collector, C declarations)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$IODIAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/iodiag``, else ``~/.cache/iodiag``."""
    env = os.environ.get("IODIAG_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "iodiag"
