"""Shared files: shared-file-contention and no-collective-io.

A file is shared when a shared record (rank -1) or several processes' records
or DXT ops name it.  Contention is reported for POSIX writes to a shared file
that MPI-IO collective calls do not coordinate; no-collective-io for MPI-IO
files accessed by several ranks with independent calls only.
"""

from __future__ import annotations

import numpy as np

from ..nputil import unique
from ...config import Config
from ...findings import Finding, FindingSpec
from ...profile import OPS_MODULE, JobProfile
from ..metrics import (col, file_paths, group_sum, level_total, lustre_stripe, metrics_of, module_sums,
                       nprocs_of, on_parallel_fs, ops_procs_per_file)
from ._common import file_cost, finding, top_files


def _ranks_per_file(profile: JobProfile, fids: np.ndarray) -> np.ndarray:
    m = metrics_of(profile)
    out = np.zeros(len(fids), "i8")
    k = np.searchsorted(m.file_ids, fids)
    ok = (k < len(m.file_ids)) & (m.file_ids[np.minimum(k, len(m.file_ids) - 1)] == fids)
    out[ok] = m.file_ranks[k[ok]]
    u, c = ops_procs_per_file(profile)
    if len(u):
        j = np.searchsorted(u, fids)
        hit = (j < len(u)) & (u[np.minimum(j, len(u) - 1)] == fids)
        out[hit] = np.maximum(out[hit], c[j[hit]])
    return out


def _writers_per_file(profile: JobProfile, m) -> np.ndarray:
    """Per file of ``m.file_ids``: at most how many processes wrote it at the POSIX level.  A process's own record
    with writes is one writer; a record Darshan reduced over the ranks (rank -1) may be every rank's, but no more
    processes than the heatmap saw writing at all (a file every rank opened to read and one rank wrote has a
    shared record with writes: one writer, not all of them)."""
    lv = m.level
    out = np.zeros(len(m.file_ids))
    if not len(lv):
        return out
    wrote = lv["writes"] > 0
    own = wrote & (lv["proc"] >= 0)
    if own.any():  # distinct (file, process) pairs
        pairs = unique(m.file_idx[own].astype("i8") * (m.nprocs + 1) + lv["proc"][own])
        out += np.bincount(pairs // (m.nprocs + 1), minlength=len(m.file_ids))[: len(m.file_ids)]
    shared = wrote & (lv["proc"] < 0)
    if shared.any():
        out[m.file_idx[shared]] = np.maximum(out[m.file_idx[shared]], m.nprocs)
    h = profile.heatmap
    if len(h):
        px = (h["module"] == OPS_MODULE["POSIX"]) & (h["write_bytes"] > 0)
        if (h["module"] == OPS_MODULE["POSIX"]).any():
            out = np.minimum(out, len(unique(h["proc"][px])))
    return out


def _mpiio_per_file(mp, fids):
    fidx = np.searchsorted(fids, mp["file_id"])
    g = lambda k: group_sum(fidx, col(mp, k, "f8"), len(fids))  # noqa: E731
    coll = g("MPIIO_COLL_READS") + g("MPIIO_COLL_WRITES")
    indep = g("MPIIO_INDEP_READS") + g("MPIIO_INDEP_WRITES") + g("MPIIO_NB_READS") + g("MPIIO_NB_WRITES")
    small = sum(g(f"MPIIO_SIZE_{rw}_AGG_{b}") for rw in ("READ", "WRITE") for b in ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M"))
    return coll, indep, g("MPIIO_F_READ_TIME") + g("MPIIO_F_WRITE_TIME"), small


def _may_contend(profile: JobProfile, cfg: Config) -> bool:
    """Some file has writes and, without ops, the job has shared_min_ranks processes (ranks per file are
    then m.file_ranks, at most m.nprocs)."""
    if level_total(profile, "writes") <= 0:
        return False
    return bool(len(profile.ops)) or nprocs_of(profile) >= cfg.access.shared_min_ranks


def _may_indep(profile: JobProfile, cfg: Config) -> bool:
    """A hit needs >= 2 ranks and indep >= max(min_ops // 10, 2 * ranks) on one file: the job must have that many."""
    tot = module_sums(profile, "MPI-IO")
    indep = sum(tot.get(f"MPIIO_{k}", 0.0) for k in ("INDEP_READS", "INDEP_WRITES", "NB_READS", "NB_WRITES"))
    return indep >= max(cfg.access.min_ops // 10, 4)


def detect_shared_file_contention(profile: JobProfile, cfg: Config) -> list[Finding]:
    c = cfg.access
    if not _may_contend(profile, cfg):
        return []
    m = metrics_of(profile)
    fs = m.file_stats
    if not len(m.file_ids):
        return []
    if not len(profile.ops) and m.file_ranks.max() < c.shared_min_ranks:
        return []  # without ops, the ranks per file are m.file_ranks
    ranks = np.minimum(_ranks_per_file(profile, m.file_ids), _writers_per_file(profile, m))
    coll = np.zeros(len(m.file_ids))
    mp = profile.module("MPI-IO")
    tot = module_sums(profile, "MPI-IO")
    if mp is not None and tot.get("MPIIO_COLL_READS", 0.0) + tot.get("MPIIO_COLL_WRITES", 0.0) > 0:  # else all 0
        fids = unique(np.concatenate((np.asarray(m.file_ids).ravel(), np.asarray(mp["file_id"]).ravel())))
        fidx = np.searchsorted(fids, mp["file_id"])
        cl = group_sum(fidx, col(mp, "MPIIO_COLL_READS", "f8"), len(fids)) + group_sum(fidx, col(mp, "MPIIO_COLL_WRITES", "f8"), len(fids))
        coll = cl[np.searchsorted(fids, m.file_ids)]
    std = file_paths(profile)[1]
    hit = (ranks >= c.shared_min_ranks) & (fs["writes"] > 0) & (coll == 0) & ~std
    if not hit.any():
        return []
    # writers collide where their regions meet (one stripe/lock unit per boundary): about unit/request of
    # each write is contended, all of it for small interleaved writes; local file systems pay a fifth
    stripe = lustre_stripe(profile, m.file_ids)[0]
    unit = np.where(stripe != 0, stripe, float(1 << 20))
    mean_w = fs["bytes_written"] / np.maximum(fs["writes"], 1)
    par = on_parallel_fs(profile, m.file_ids, c.parallel_fs)
    # independent MPI-IO writes wait for the file's locks inside MPI-IO too: a file's write time is the larger
    # of its POSIX and its MPI-IO write seconds (MPI-IO time includes the POSIX time beneath it)
    write_s = fs["write_s"]
    if mp is not None:
        k = np.searchsorted(m.file_ids, mp["file_id"])
        on = (k < len(m.file_ids)) & (m.file_ids[np.minimum(k, len(m.file_ids) - 1)] == mp["file_id"])
        mw = np.bincount(k[on], weights=col(mp, "MPIIO_F_WRITE_TIME", "f8")[on], minlength=len(m.file_ids))
        write_s = np.maximum(write_s, mw)
    cost_f = write_s * np.minimum(1.0, unit / np.maximum(mean_w, 1)) * np.where(par, 1.0, 0.2) * hit
    i = int(np.argmax(np.where(hit, cost_f + fs["write_s"] * 1e-6 + 1e-12, -1.0)))
    ev = {"shared_files": int(hit.sum()), "max_writers": int(ranks[hit].max()), "writes": int(fs["writes"][hit].sum()),
          "bytes_written": float(fs["bytes_written"][hit].sum()), "write_s": float((write_s * hit).sum()),
          "lock_unit_bytes": float(unit[i]), "parallel_fs": bool(par[i]),
          "mean_write_bytes": float(fs["bytes_written"][i] / max(fs["writes"][i], 1))}
    return [finding(cfg, profile, SHARED_FILE_CONTENTION.id, f"{int(hit.sum())} file(s) written by up to {int(ranks[hit].max())} "
                    "processes without MPI-IO collective coordination", **file_cost(profile, m.file_ids, cost_f),
                    evidence=ev, files=top_files(profile, m.file_ids, cost_f + 1e-12 * hit, cfg.report.top_files),
                    facts={"worst_writers": int(ranks[i]), "worst_bytes_written": float(fs["bytes_written"][i]),
                           "worst_writes": int(fs["writes"][i])})]


def detect_no_collective_io(profile: JobProfile, cfg: Config) -> list[Finding]:
    mp = profile.module("MPI-IO")
    if mp is None:
        return []
    c = cfg.access
    if not _may_indep(profile, cfg):
        return []
    m = metrics_of(profile)
    fids = unique(mp["file_id"])
    coll, indep, t, small = _mpiio_per_file(mp, fids)
    ranks = _ranks_per_file(profile, fids)
    shared_rec = np.isin(fids, mp["file_id"][mp["rank"] < 0])
    ranks = np.where(shared_rec, m.nprocs, ranks)
    hit = (ranks >= 2) & (indep >= np.maximum(c.min_ops // 10, 2 * ranks)) & (indep >= 0.9 * (indep + coll))
    if not hit.any():
        return []
    # collective buffering pays off for requests below ~1 MiB; large contiguous blocks gain little
    small_share = np.clip(small / np.maximum(indep + coll, 1), 0, 1)
    cost_f = t * indep / np.maximum(indep + coll, 1) * small_share * hit
    ev = {"requests_below_1MiB": int(small[hit].sum()), "files": int(hit.sum()), "independent_ops": int(indep[hit].sum()), "collective_ops": int(coll[hit].sum()),
          "max_ranks_per_file": int(ranks[hit].max()), "mpiio_time_s": float(cost_f.sum())}
    # the direction of the independent calls, for the advice (collective reads or writes)
    fidx = np.searchsorted(fids, mp["file_id"])
    on = hit[fidx]
    facts = {f"independent_{rw}s": int(sum(col(mp, f"MPIIO_{k}_{rw.upper()}S", "f8")[on].sum() for k in ("INDEP", "NB")))
             for rw in ("read", "write")}
    # MPI-IO time includes the POSIX time below it: spread over the processes like that POSIX time
    return [finding(cfg, profile, NO_COLLECTIVE_IO.id, f"{int(indep[hit].sum()):,} independent MPI-IO calls on {int(hit.sum())} shared "
                    f"file(s), {int(coll[hit].sum()):,} collective", **file_cost(profile, fids, cost_f),
                    evidence=ev, facts=facts, files=top_files(profile, fids, cost_f + 1e-12 * hit, cfg.report.top_files))]


SHARED_FILE_CONTENTION = FindingSpec(
    id="shared-file-contention", seq=6, detect=detect_shared_file_contention,
    fires="≥ `shared_min_ranks` processes write one file (shared record, per-rank records or DXT) with no MPI-IO "
          "collective writes on it; writers are processes whose records of the file hold writes, a shared record's "
          "no more than the processes the heatmap saw writing",
    cost="write time on those files (the larger of POSIX and MPI-IO write seconds per file)",
    config_keys=("access.shared_min_ranks", "access.parallel_fs"),
    admin_action="Set a default stripe count for shared files, or recommend collective I/O / one file per node to "
                 "the users writing one file from many ranks.",
)
NO_COLLECTIVE_IO = FindingSpec(
    id="no-collective-io", seq=14, detect=detect_no_collective_io,
    fires="MPI-IO file used by ≥ 2 ranks with ≥ 90 % independent calls",
    cost="MPI-IO time × independent share × share of requests < 1 MiB",
    config_keys=("access.min_ops",),
    admin_action="Make collective MPI-IO the default in the site's MPI-IO hints (romio_cb_write/romio_cb_read = "
                 "enable) and document it.",
)
SPECS = (SHARED_FILE_CONTENTION, NO_COLLECTIVE_IO)
