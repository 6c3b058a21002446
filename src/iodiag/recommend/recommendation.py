"""What ``recommend/`` hands to reports and to ``iodiag verify``: a change to make, why, and what it should gain.

Detectors say what is wrong, with numbers; ``recommend/`` alone says what to change.  A ``Recommendation`` carries
the settings as data (``settings``: what ``verify`` applies to a re-run) and as concrete changes a person can paste
(``changes``: a command-line flag, an environment variable, a code snippet or a shell line such as ``lfs
setstripe``), the tree's rules with this job's path marked, the expected gain with its uncertainty, and the
finding ids it addresses.  ``abstain`` says why no model-based advice is given (outside the training coverage,
no model, nothing known about the workload's parameters).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

CHANGE_KINDS = ("arg", "env", "snippet", "shell", "config")


@dataclass(frozen=True)
class Change:
    """One concrete edit: ``kind`` is arg (a command-line flag of the workload), env (an environment variable),
    snippet (code), shell (a command to run once, e.g. ``lfs setstripe``) or config (a setting in a file)."""

    kind: str
    text: str  # what to paste: "--chunks time=157,plev=10", "export X=1", "ds.chunk({...})", "lfs setstripe ..."
    name: str = ""  # arg/env/config: the flag or variable name ("--chunks", "OMP_NUM_THREADS")
    value: Any = None  # arg/env/config: the value, as data

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "name": self.name, "value": self.value}


@dataclass(frozen=True)
class Recommendation:
    id: str  # stable: "chunking", "compression", "sharding", "workers", "striping", "buffering", ...
    title: str  # one line: "Use chunks of (73, 90, 180) ≈ 45 MiB"
    settings: Mapping[str, Any]  # the setting names and values, as the model and verify know them
    changes: tuple[Change, ...] = ()
    source: str = "rules"  # "tree" (a trained model) or "rules" (from findings and measured features)
    rules: tuple[str, ...] = ()  # the tree as text, this job's path marked (source == "tree")
    expected_speedup: float | None = None  # time before / time after, e.g. 3.2
    speedup_low: float | None = None  # uncertainty band of the expected speedup
    speedup_high: float | None = None
    addresses: tuple[str, ...] = ()  # finding ids it addresses
    based_on: str = ""  # "workload parameters and measured features" / "measured features only" / ...
    abstain: str | None = None  # why the model gives no advice here (then ``settings`` may be empty)
    notes: tuple[str, ...] = field(default=())
    # how the gain shown is known: "measured" (iodiag verify, with its band), "predicted" (the trained model, its
    # band shown only when validated on held-out measured pairs), "bound" (a true upper bound from the time
    # model: speedup_high), "unknown" (measure it: iodiag verify), "none" (not a speed-up: a measurement change).
    # A rule sets recommend.jobfacts.IO_ONLY / RESHAPES here; recommend.gains turns that into "bound" / "unknown".
    gain: str | None = None
    # a bound's basis: what it assumes removed ("the I/O on the 3 files it concerns", "all the I/O on the
    # critical path" when the change applies to every file or its findings do not list all their files)
    gain_over: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "settings": dict(self.settings),
            "changes": [c.to_dict() for c in self.changes],
            "source": self.source,
            "rules": list(self.rules),
            "expected_speedup": self.expected_speedup,
            "speedup_low": self.speedup_low,
            "speedup_high": self.speedup_high,
            "addresses": list(self.addresses),
            "based_on": self.based_on,
            "abstain": self.abstain,
            "notes": list(self.notes),
            "gain": self.gain,
            "gain_over": self.gain_over,
        }
