"""What a fix must fit and what it may answer (recommend/fixes.py's vocabulary): the job's facts from its own
counters (``JobFacts``: layers, directions, processes, file system, runtime), the context a fix reads
(``FixContext``), ``NoSetting`` (why no setting helps) and how a change's gain can be known (``IO_ONLY`` /
``RESHAPES``, read by recommend/gains.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..config import Config
from ..findings import Finding
from .recommendation import Recommendation


# how a recommendation's gain can be known (Recommendation.gain)
IO_ONLY = "io-only"  # the change acts inside the I/O calls only: the time model bounds its gain


RESHAPES = "reshapes-work"  # the change also changes work outside the I/O calls: no bound


@dataclass(frozen=True)
class NoSetting:
    """Why no setting of the program or its environment can remove a finding's cost."""

    why: str


@dataclass(frozen=True)
class JobFacts:
    """What a change must fit, from the job's own counters."""

    layers: frozenset[str]  # "HDF5", "PnetCDF", "MPI-IO", "POSIX", "STDIO" (modules with records)
    reads: bool  # the job read data (any layer)
    writes: bool  # the job wrote data
    nprocs: int
    lustre: bool
    python: bool
    dask: bool
    mpi: bool
    arrays: tuple[Mapping[str, Any], ...]
    runtime_s: float | None
    io_wall_s: float
    files: int = 0  # files with records

    @property
    def top(self) -> str:
        """The top-most I/O layer the program calls."""
        return next((x for x in ("HDF5", "PnetCDF", "MPI-IO", "STDIO", "POSIX") if x in self.layers), "POSIX")


def job_facts(profile) -> JobFacts:
    from ..analyzers.context import job_context
    from ..analyzers.metrics import level_total
    from ..analyzers.timemodel import time_model_of

    have = lambda *mods: any(profile.module(m) is not None for m in mods)  # noqa: E731
    layers = {name for name, mods in (("HDF5", ("H5F", "H5D")), ("PnetCDF", ("PNETCDF_FILE", "PNETCDF_VAR")),
                                      ("MPI-IO", ("MPI-IO",)), ("STDIO", ("STDIO",)), ("POSIX", ("POSIX",)))
              if have(*mods)}
    ctx = job_context(profile)
    tm = time_model_of(profile)
    return JobFacts(layers=frozenset(layers), reads=_data_bytes(profile, "read") > 0,
                    writes=_data_bytes(profile, "written") > 0, nprocs=int(profile.job.nprocs or 1),
                    lustre=have("LUSTRE"), python=bool(ctx.python), dask=bool(ctx.dask), mpi=bool(ctx.mpi),
                    arrays=tuple(profile.job.arrays or ()), runtime_s=profile.job.runtime_s, io_wall_s=tm.io_wall_s,
                    files=int(len(profile.files)))


def _data_bytes(profile, rw: str) -> float:
    """Bytes read or written at the POSIX level, without the terminal and pipes (<STDIN>, <STDOUT>, <STDERR>): a
    program that prints its progress does not write data (advice would otherwise say "write fewer files" to a
    job that only reads them, or hint collective writes to a job that only reads)."""
    import numpy as np

    from ..analyzers.metrics import isin, level_total, pcol, std_file_ids

    total = float(level_total(profile, f"bytes_{rw}"))
    std = std_file_ids(profile)
    if total <= 0 or not len(std):
        return total
    for mod in ("POSIX", "STDIO"):
        t = profile.module(mod)
        if t is not None:
            total -= float(np.clip(pcol(profile, mod, f"{mod}_BYTES_{rw.upper()}", "f8")[isin(t["file_id"], std)], 0, None).sum())
    return max(total, 0.0)


@dataclass
class FixContext:
    """What a fix may need beyond its finding: the profile, the Config, the workload's parameters (None when the
    job was not an iodiag workload) and the other findings (to stay consistent with them)."""

    profile: Any
    cfg: Config
    params: Mapping[str, Any] | None
    findings: Sequence[Finding] = field(default_factory=tuple)

    def has(self, fid: str) -> Finding | None:
        return next((g for g in self.findings if g.id == fid), None)


Fix = Callable[[Finding, JobFacts, FixContext], "Recommendation | NoSetting | None"]
