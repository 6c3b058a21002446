"""What a Darshan log lost, said in the log's own terms: a module darshan-util could not decode (a newer
module format, a pre-release writer, damage), a module that hit its record cap, a header whose process count
damage made absurd.  Each becomes a ``LoadIssue`` with its cause and the next step that fits it."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..profile import LoadIssue
from .nputil import unique
from .readers.darshan_lib import MODULE_VERSIONS

PARTIAL_CAUSE = {
    "DXT_POSIX": "the DXT trace buffer filled up (DXT keeps a bounded amount of memory per process)",
    "DXT_MPIIO": "the DXT trace buffer filled up (DXT keeps a bounded amount of memory per process)",
    "HEATMAP": "the heatmap ran out of bins or records",
}



def module_loss(path: str, h: dict[str, Any], mod: str, cause: str) -> LoadIssue:
    """What one module of a log lost, in the log's own terms: the module, its format version against the one
    darshan-util reads, the log format and the Darshan that wrote it; the next step that fits that cause."""
    ver = (h["modules"].get(mod) or {}).get("ver")
    known = MODULE_VERSIONS.get(mod)
    lib_ver = h["metadata"].get("lib_ver") or "?"
    wrote = f"log format {h['log_format']}, written by Darshan {lib_ver}"
    if ver is not None and known is not None and ver > known:
        return LoadIssue(
            path=path, kind="newer-format", module=mod,
            cause=f"the {mod} region is in module format version {ver}; this darshan-util reads {mod} up to version "
                  f"{known} ({wrote}): its records are not decoded",
            next_step=f"{mod} numbers are missing, every other module is reported; read the log with a darshan-util as "
                      f"new as Darshan {lib_ver} (pip install -U darshan) for {mod}")
    pre = any(t in lib_ver for t in ("pre", "rc", "alpha", "beta", "dev"))
    if pre:
        return LoadIssue(
            path=path, kind="truncated", module=mod,
            cause=f"the {mod} region (module format version {ver}) could not be fully decoded; a pre-release Darshan "
                  f"wrote this log ({wrote}) and its {mod} records may not be in the release format: {cause}",
            next_step=f"numbers from {mod} are lower bounds, every other module is reported; a pre-release's "
                      "module formats can differ from any release's darshan-util, so nothing needs re-running for "
                      "the other modules")
    return LoadIssue(
        path=path, kind="truncated", module=mod,
        cause=f"the {mod} region (module format version {ver}, {wrote}) is damaged: {cause}",
        next_step=f"numbers from {mod} are lower bounds, every other module is reported; copy the log again from "
                  "where the job wrote it if the copy may be damaged")


def partial_issue(path: str, mod: str) -> LoadIssue:
    cause = PARTIAL_CAUSE.get(mod, "the module reached its record cap (1,024 records per process by default); later files were not recorded")
    return LoadIssue(
        path=path, kind="partial-module", module=mod, cause=cause,
        next_step="re-run with a DARSHAN_CONFIG_PATH file raising MAX_RECORDS / DXT memory (iodiag run does this)",
    )


MAX_PLAUSIBLE_NPROCS = 10_000_000


def plausible_nprocs(d: dict[str, Any], path: str, issues: list[LoadIssue]) -> int:
    """The header's process count, unless damage made it absurd; then the ranks the decodable modules show."""
    n = int(d["header"]["nprocs"])
    seen = 0
    by_mod: dict[str, np.ndarray] = {}
    for mod, rec in d["mods"].items():
        ranks = rec.get("rank", rec.get("rec_rank"))
        if ranks is not None and len(ranks):
            ok = ranks[(ranks >= 0) & (ranks < min(max(n, 1), MAX_PLAUSIBLE_NPROCS))]
            if len(ok):
                seen = max(seen, int(ok.max()) + 1)
                if n > 100_000:  # only a huge count is checked against the ranks' density (below)
                    by_mod[mod] = unique(ok)
    # a huge count with every rank in the records a thousand times smaller is damage, not a job: a real job
    # of 100,000+ processes that did I/O leaves records of more than its first 0.1 % of ranks
    huge = n > 100_000 and 0 < seen * 1000 < n
    outliers = ""
    if n > 100_000 and not huge and by_mod:
        # the count may be matched by a damaged record: a garbage rank just under a garbage count (a header of
        # 4,456,449 processes and one PNETCDF record of rank 4,456,448, while the HEATMAP ranks say 0-3).  Ranks
        # are dense in a real job: a rank far above a thousand times the distinct ranks below it is damage
        distinct = unique(np.concatenate(list(by_mod.values())))
        keep = distinct + 1 <= 1000 * np.arange(1, len(distinct) + 1)
        cut = int(np.argmin(keep)) if not keep.all() else len(distinct)
        dense = int(distinct[cut - 1]) + 1 if cut else 0
        if cut < len(distinct) and 0 < dense * 1000 < n:
            bad = int(distinct[cut])
            mods = sorted(m for m, r in by_mod.items() if (r >= bad).any())
            outliers = (f"; a rank of {bad:,} in {', '.join(mods)} is damage too (the other ranks, in "
                        f"{', '.join(sorted(m for m in by_mod if m not in mods)) or 'the records'}, go up to {dense - 1:,})")
            huge, seen = True, dense
    if 1 <= n <= MAX_PLAUSIBLE_NPROCS and not huge:
        return n
    fixed = max(min(seen, MAX_PLAUSIBLE_NPROCS), 1)
    issues.append(LoadIssue(path=path, kind="damaged-header", cause=f"the header claims {n:,} processes; using {fixed:,} "
                            f"(largest rank in the decodable records + 1){outliers}",
                            next_step="per-process numbers use the derived count; check the log with darshan-parser"))
    return fixed
