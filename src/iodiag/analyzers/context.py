"""What kind of program a job is, for advice in its own terms (pure functions of the profile).

A recommendation must name a change the user can make in the code they run: ``open_dataset(chunks=...)`` is
advice for a Python/xarray script, ``H5Pset_chunk`` or ROMIO hints for a C/Fortran MPI code, ``client.scatter``
for a Dask job.  The kind is read from what the collector saw: the executables, whether Dask tasks were
captured, whether MPI-IO (or a log of several ranks) was used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..profile import JobProfile
from .counters import memo


@dataclass(frozen=True)
class JobContext:
    python: bool  # the processes run a Python interpreter
    dask: bool  # a Dask task stream was captured
    mpi: bool  # MPI-IO was used, or one log holds several ranks

    @property
    def kind(self) -> str:
        return "dask" if self.dask else "mpi" if self.mpi else "python" if self.python else "native"


def _is_python(exe: str) -> bool:
    base = os.path.basename(str(exe).split()[0]) if exe else ""
    return base.startswith(("python", "ipython", "pypy")) or base in ("dask-worker", "dask", "jupyter")


def job_context(profile: JobProfile) -> JobContext:
    d = memo(profile)
    ctx = d.get("context")
    if ctx is None:
        pr = profile.processes
        exes = [profile.job.exe] + (pr["exe"].astype(str).tolist()[:64] if len(pr) else [])
        multi_rank = bool(len(pr)) and int(max(pr["log"].tolist() or [0])) + 1 < len(pr)
        ctx = d["context"] = JobContext(python=any(_is_python(e) for e in exes if e), dask=bool(len(profile.tasks)),
                                        mpi=profile.module("MPI-IO") is not None or multi_rank)
    return ctx
