"""fsync-per-write: a file synced to stable storage after (about) every write.

POSIX_FSYNCS + POSIX_FDSYNCS per POSIX_WRITES of a file, from the counters.  Darshan counts the time of
fsync/fdatasync inside POSIX_F_WRITE_TIME (not the metadata time), so the time the syncs cost cannot be told
apart from the writes': the finding's cost is the write time of those files, an upper bound (the writes
themselves remain; the syncs, all but one per file or per checkpoint, go).  The write sizes come from the
size histogram (POSIX_SIZE_WRITE_*).
"""

from __future__ import annotations

import numpy as np

from ...config import Config
from ...findings import Finding, FindingSpec
from ...profile import JobProfile
from ...units import fmt_bytes
from ..metrics import SIZE_BUCKETS, group_sum, isin, level_total, nprocs_of, pcol, size_hist, std_file_ids
from ._common import file_cost, finding, proc_weights, top_files, top_procs


def _may_hit(profile: JobProfile, cfg: Config) -> bool:
    """No file can have min_syncs syncs when the whole job has fewer."""
    return level_total(profile, "fsyncs") + level_total(profile, "fdsyncs") >= cfg.sync.min_syncs


def detect_fsync_per_write(profile: JobProfile, cfg: Config) -> list[Finding]:
    t = profile.module("POSIX")
    if t is None or not _may_hit(profile, cfg):
        return []
    c = cfg.sync
    fs_ = pcol(profile, "POSIX", "POSIX_FSYNCS", "f8")
    fds = pcol(profile, "POSIX", "POSIX_FDSYNCS", "f8")
    writes = pcol(profile, "POSIX", "POSIX_WRITES", "f8")
    wt = pcol(profile, "POSIX", "POSIX_F_WRITE_TIME", "f8")
    fids, fidx = np.unique(t["file_id"], return_inverse=True)
    sync_f = group_sum(fidx, fs_ + fds, len(fids))
    writes_f = group_sum(fidx, writes, len(fids))
    hit = (sync_f >= c.min_syncs) & (writes_f > 0) & (sync_f >= c.min_per_write * writes_f)
    hit &= ~isin(fids, std_file_ids(profile))
    if not hit.any():
        return []
    rows = hit[fidx]
    n_sync, n_fsync, n_fdsync = int(sync_f[hit].sum()), int(fs_[rows].sum()), int(fds[rows].sum())
    n_writes = int(writes_f[hit].sum())
    bytes_w = float(pcol(profile, "POSIX", "POSIX_BYTES_WRITTEN", "f8")[rows].sum())
    hist = size_hist(t, "POSIX_SIZE_WRITE_")[rows].sum(0)
    j = int(np.argmax(hist))
    lo = int(SIZE_BUCKETS[j - 1][1]) if j else 0
    hi = SIZE_BUCKETS[j][1]
    write_s_f = group_sum(fidx, wt, len(fids)) * hit  # fsync time is inside the write time: the bound
    # (the first four are what the terminal shows)
    ev = {"syncs": n_sync, "writes": n_writes, "mean_write_bytes": bytes_w / max(n_writes, 1), "files": int(hit.sum()),
          "fsyncs": n_fsync, "fdatasyncs": n_fdsync, "syncs_per_write": n_sync / max(n_writes, 1),
          "bytes_written": bytes_w,
          "common_write_size_min_bytes": lo, "common_write_size_max_bytes": None if not np.isfinite(hi) else int(hi),
          "writes_in_common_size": int(hist[j]),
          "write_s_bound": float(write_s_f.sum())}
    procs = proc_weights(profile, t, rows, (fs_ + fds)[rows], nprocs_of(profile))
    size = f"{fmt_bytes(lo)}–{fmt_bytes(hi)}" if np.isfinite(hi) else f"≥ {fmt_bytes(lo)}"
    # the mechanism first, then the counts: short enough for two lines of an 80-column terminal
    call = "fsync/fdatasync" if n_fsync and n_fdsync else ("fdatasync" if n_fdsync else "fsync")
    every = "every" if n_sync >= 0.95 * n_writes else "most"
    nf = int(hit.sum())
    return [finding(cfg, profile, FSYNC_PER_WRITE.id,
                    f"{call} after {every} write: {n_sync:,} syncs for {n_writes:,} writes (most {size}) on "
                    f"{nf:,} file{'s' if nf != 1 else ''}",
                    **file_cost(profile, fids, write_s_f), evidence=ev,
                    facts={"mean_write_bytes": bytes_w / max(n_writes, 1), "fdatasync": n_fdsync > 0},
                    files=top_files(profile, fids, write_s_f + 1e-12 * hit, cfg.report.top_files),
                    processes=top_procs(procs, cfg.report.top_processes))]


FSYNC_PER_WRITE = FindingSpec(
    id="fsync-per-write", seq=19, detect=detect_fsync_per_write,
    fires="a file has ≥ `min_syncs` fsync + fdatasync calls and ≥ `min_per_write` of them per write",
    cost="write time of those files: an upper bound (Darshan counts fsync time inside POSIX_F_WRITE_TIME)",
    config_keys=("sync.min_per_write", "sync.min_syncs"),
    notes=("evidence: sync and write counts, the commonest write size (size histogram), the write seconds that "
           "bound the syncs' cost",),
    admin_action="Tell these users that a sync per write makes every write wait for the storage: sync once per file "
                 "or per checkpoint (or fdatasync), not after every write.",
)
SPECS = (FSYNC_PER_WRITE,)
