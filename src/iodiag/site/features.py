"""Per-job and per-program features: one flat row of numbers per job.

The row layout is the contract between site ingest, the site report and the
recommender, which learns site defaults from it:

* **keys** (``job_key``, ``dir``, ``day``, ``month``, ``job_id``, ``user``,
  ``uid``, ``exe``; programs add ``program``) identify a job and group it;
* **features** are plain numbers with units in their names (``*_bytes``,
  ``*_s``, ``*_share``, counts of ops as Darshan names them) that describe
  what the job asked of the file system (volumes, op-size histograms,
  metadata ratios, process counts, modules, file-system type, Lustre
  striping, HDF5 chunking);
* **labels** are the findings the detectors returned for the job: the
  ragged ``finding_ids``/``finding_severities``/``finding_costs_s`` lists
  and, for every id of the stable vocabulary, ``finding_<id>`` (bool) and
  ``finding_<id>_cost_s`` (estimated seconds, 0 when absent, NaN when the
  detector gave no estimate), so that a model can be trained on
  ``features -> finding_<id>_cost_s`` without parsing lists.

Everything here is computed from the ``JobProfile`` that ``build_profile``
gives; no log is parsed in this module.
"""

from __future__ import annotations

import math
import os
from typing import Any, Sequence

import numpy as np

from ..findings import FINDING_IDS, Finding
from ..analyzers.metrics import median, module_sums, pcol
from ..profile import JobProfile

FORMAT_VERSION = 1

SIZE_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")
# lower edge of each bin in bytes, for plots and quantiles
SIZE_BIN_LOW_BYTES = (0, 100, 1024, 10 * 1024, 100 * 1024, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30)
SEVERITY_ORDER = ("high", "medium", "low", "info")


def _fid(fid: str) -> str:
    return fid.replace("-", "_")


# name -> arrow type name ('str', 'f8', 'i8', 'bool', 'list<str>', 'list<f8>')
KEY_COLUMNS: dict[str, str] = {
    "job_key": "str", "dir": "str", "day": "str", "month": "str", "job_id": "str", "user": "str",
    "uid": "i8", "exe": "str", "exes": "str",
}
META_COLUMNS: dict[str, str] = {
    "n_programs": "i8", "n_logs": "i8", "n_logs_failed": "i8", "start_s": "f8", "end_s": "f8",
    "runtime_s": "f8", "runtime_derived": "bool", "nprocs": "i8", "core_hours": "f8",
    "darshan_version": "str", "modules": "str", "partial": "bool", "partial_modules": "str",
    "n_issues": "i8", "fs_types": "str", "fs_type_main": "str",
}
FEATURE_COLUMNS: dict[str, str] = {
    "bytes_read": "f8", "bytes_written": "f8", "io_time_s": "f8", "read_time_s": "f8",
    "write_time_s": "f8", "meta_time_s": "f8", "io_time_share": "f8",
    "n_files": "i8", "n_files_shared": "i8", "n_files_read": "i8", "n_files_written": "i8",
    "max_file_bytes": "f8",
    "posix_reads": "f8", "posix_writes": "f8", "posix_bytes_read": "f8", "posix_bytes_written": "f8",
    "posix_opens": "f8", "posix_stats": "f8", "posix_seeks": "f8", "posix_fsyncs": "f8",
    "posix_meta_ops": "f8", "posix_read_time_s": "f8", "posix_write_time_s": "f8", "posix_meta_time_s": "f8",
    "posix_meta_time_share": "f8", "posix_meta_ops_per_data_op": "f8",
    "posix_mean_read_bytes": "f8", "posix_mean_write_bytes": "f8", "posix_common_access_bytes": "f8",
    "posix_ops_lt_100k_share": "f8", "posix_seq_share": "f8", "posix_consec_share": "f8",
    "posix_file_misaligned_share": "f8", "posix_file_alignment_bytes": "f8", "posix_rw_switches": "f8",
    **{f"posix_size_read_{b.lower()}": "f8" for b in SIZE_BINS},
    **{f"posix_size_write_{b.lower()}": "f8" for b in SIZE_BINS},
    "mpiio_indep_ops": "f8", "mpiio_coll_ops": "f8", "mpiio_coll_share": "f8", "mpiio_bytes_read": "f8",
    "mpiio_bytes_written": "f8", "mpiio_time_s": "f8",
    "stdio_ops": "f8", "stdio_bytes_read": "f8", "stdio_bytes_written": "f8", "stdio_time_s": "f8",
    "stdio_bytes_share": "f8",
    "h5f_opens": "f8", "h5d_reads": "f8", "h5d_writes": "f8", "h5d_bytes_read": "f8", "h5d_bytes_written": "f8",
    "h5d_chunk_bytes_median": "f8", "pnetcdf_files": "f8",
    "lustre_files": "i8", "lustre_stripe_size_median_bytes": "f8", "lustre_stripe_count_median": "f8",
    "lustre_stripe_count_max": "f8",
    "uses_mpiio": "bool", "uses_stdio": "bool", "uses_hdf5": "bool", "uses_pnetcdf": "bool",
}
FINDING_COLUMNS: dict[str, str] = {
    "n_findings": "i8", "worst_severity": "str", "findings_cost_s": "f8",
    "finding_ids": "list<str>", "finding_severities": "list<str>", "finding_costs_s": "list<f8>",
    **{c: t for fid in FINDING_IDS for c, t in ((f"finding_{_fid(fid)}", "bool"), (f"finding_{_fid(fid)}_cost_s", "f8"))},
}
JOB_COLUMNS: dict[str, str] = {**KEY_COLUMNS, **META_COLUMNS, **FEATURE_COLUMNS, **FINDING_COLUMNS, "run": "i8"}
PROGRAM_COLUMNS: dict[str, str] = {**KEY_COLUMNS, "program": "str", **META_COLUMNS, **FEATURE_COLUMNS, **FINDING_COLUMNS, "run": "i8"}
ERROR_COLUMNS: dict[str, str] = {
    "job_key": "str", "dir": "str", "day": "str", "path": "str", "name": "str", "kind": "str", "cause": "str",
    "loaded": "bool", "run": "i8",
}
LOG_COLUMNS: dict[str, str] = {
    "dir": "str", "name": "str", "size": "i8", "mtime_ns": "i8", "status": "str", "job_key": "str", "run": "i8",
}
DAY_COLUMNS: dict[str, str] = {"dir": "str", "n_logs": "i8", "signature": "str", "run": "i8"}


class _Mod:
    """Column sums of one module's counters table (0 when absent), shared with the detectors.

    All columns are summed in one NumPy pass per counter array (negative values, Darshan's
    'not measured', count as 0): far cheaper than one reduction per counter.
    """

    def __init__(self, profile: JobProfile, name: str) -> None:
        self.t = profile.module(name)
        self._profile, self._name = profile, name
        self._sums = module_sums(profile, name) if self.t is not None else {}

    def __bool__(self) -> bool:
        return self.t is not None

    def s(self, *names: str) -> float:
        if self.t is None:
            return 0.0
        get = self._sums.get
        if len(names) == 1:
            return float(get(names[0], 0.0))
        return float(sum(get(n, 0.0) for n in names))

    def col(self, name: str) -> np.ndarray:
        """The column with negatives as 0; integer counters stay integers (same values as float64 below 2**53)."""
        if self.t is None or name not in self.t:
            return np.zeros(0)
        return pcol(self._profile, self._name, name, "i8" if self.t[name].dtype.kind in "iu" else "f8")


def _div(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def _common_access(px: _Mod) -> float:
    """The access size with the most counted accesses (ties: the smallest size)."""
    if not px:
        return math.nan
    vals = np.concatenate([px.col(f"POSIX_ACCESS{i}_ACCESS") for i in range(1, 5)])
    cnts = np.concatenate([px.col(f"POSIX_ACCESS{i}_COUNT") for i in range(1, 5)])
    if len(vals) <= 256:  # a few records: a dict is cheaper than unique + bincount (same sums, same order)
        acc: dict[float, float] = {}
        for v, c in zip(vals.tolist(), cnts.tolist()):
            if c > 0:
                acc[v] = acc.get(v, 0.0) + c
        return float(min(acc, key=lambda v: (-acc[v], v))) if acc else math.nan
    keep = cnts > 0
    if not keep.any():
        return math.nan
    u, inv = np.unique(vals[keep], return_inverse=True)
    w = np.bincount(inv, weights=cnts[keep])
    return float(u[int(np.argmax(w))])


def _h5_chunk_bytes(h5d: _Mod) -> float:
    if not h5d or "H5D_DATATYPE_SIZE" not in h5d.t:
        return math.nan
    t = h5d.t
    dims = np.stack([np.asarray(t[f"H5D_CHUNK_SIZE_D{i}"], "f8") for i in range(1, 6)], axis=1)
    ndims = np.asarray(t["H5D_DATASPACE_NDIMS"], "f8")
    chunked = (dims[:, 0] > 0) & (ndims > 0)
    if not chunked.any():
        return math.nan
    d = np.where(dims[chunked] > 0, dims[chunked], 1.0)
    b = d.prod(axis=1) * np.maximum(np.asarray(t["H5D_DATATYPE_SIZE"], "f8")[chunked], 1.0)
    return median(b)


_BIN_NAMES = tuple((f"posix_size_{rw.lower()}_{b.lower()}", f"POSIX_SIZE_{rw}_{b}") for rw in ("READ", "WRITE") for b in SIZE_BINS)
_SMALL_BIN_NAMES = tuple(f"POSIX_SIZE_{rw}_{b}" for rw in ("READ", "WRITE") for b in SIZE_BINS[:4])


def extract_features(profile: JobProfile) -> dict[str, Any]:
    """Numbers describing what a job asked of the file system."""
    px = _Mod(profile, "POSIX")
    mp = _Mod(profile, "MPI-IO")
    st = _Mod(profile, "STDIO")
    h5f = _Mod(profile, "H5F")
    h5d = _Mod(profile, "H5D")
    pnc = _Mod(profile, "PNETCDF_FILE")
    lus = _Mod(profile, "LUSTRE")
    f: dict[str, Any] = {}

    reads, writes = px.s("POSIX_READS"), px.s("POSIX_WRITES")
    f["posix_reads"], f["posix_writes"] = reads, writes
    f["posix_bytes_read"], f["posix_bytes_written"] = px.s("POSIX_BYTES_READ"), px.s("POSIX_BYTES_WRITTEN")
    f["posix_opens"] = px.s("POSIX_OPENS", "POSIX_FILENOS", "POSIX_DUPS")
    f["posix_stats"] = px.s("POSIX_STATS")
    f["posix_seeks"] = px.s("POSIX_SEEKS")
    f["posix_fsyncs"] = px.s("POSIX_FSYNCS", "POSIX_FDSYNCS")
    f["posix_meta_ops"] = f["posix_opens"] + f["posix_stats"] + f["posix_seeks"] + f["posix_fsyncs"] + px.s("POSIX_RENAME_SOURCES")
    f["posix_read_time_s"] = px.s("POSIX_F_READ_TIME")
    f["posix_write_time_s"] = px.s("POSIX_F_WRITE_TIME")
    f["posix_meta_time_s"] = px.s("POSIX_F_META_TIME")
    ptime = f["posix_read_time_s"] + f["posix_write_time_s"] + f["posix_meta_time_s"]
    f["posix_meta_time_share"] = _div(f["posix_meta_time_s"], ptime)
    f["posix_meta_ops_per_data_op"] = _div(f["posix_meta_ops"], reads + writes)
    f["posix_mean_read_bytes"] = _div(f["posix_bytes_read"], reads)
    f["posix_mean_write_bytes"] = _div(f["posix_bytes_written"], writes)
    f["posix_common_access_bytes"] = _common_access(px)
    small = sum(px.s(n) for n in _SMALL_BIN_NAMES)
    f["posix_ops_lt_100k_share"] = _div(small, reads + writes)
    f["posix_seq_share"] = _div(px.s("POSIX_SEQ_READS", "POSIX_SEQ_WRITES"), reads + writes)
    f["posix_consec_share"] = _div(px.s("POSIX_CONSEC_READS", "POSIX_CONSEC_WRITES"), reads + writes)
    f["posix_file_misaligned_share"] = _div(px.s("POSIX_FILE_NOT_ALIGNED"), reads + writes)
    al = px.col("POSIX_FILE_ALIGNMENT")
    f["posix_file_alignment_bytes"] = float(al.max()) if len(al) else math.nan
    f["posix_rw_switches"] = px.s("POSIX_RW_SWITCHES")
    for key, name in _BIN_NAMES:
        f[key] = px.s(name)

    f["mpiio_indep_ops"] = mp.s("MPIIO_INDEP_READS", "MPIIO_INDEP_WRITES", "MPIIO_SPLIT_READS", "MPIIO_SPLIT_WRITES", "MPIIO_NB_READS", "MPIIO_NB_WRITES")
    f["mpiio_coll_ops"] = mp.s("MPIIO_COLL_READS", "MPIIO_COLL_WRITES")
    f["mpiio_coll_share"] = _div(f["mpiio_coll_ops"], f["mpiio_coll_ops"] + f["mpiio_indep_ops"])
    f["mpiio_bytes_read"], f["mpiio_bytes_written"] = mp.s("MPIIO_BYTES_READ"), mp.s("MPIIO_BYTES_WRITTEN")
    f["mpiio_time_s"] = mp.s("MPIIO_F_READ_TIME", "MPIIO_F_WRITE_TIME", "MPIIO_F_META_TIME")

    f["stdio_ops"] = st.s("STDIO_OPENS", "STDIO_FDOPENS", "STDIO_READS", "STDIO_WRITES", "STDIO_SEEKS", "STDIO_FLUSHES")
    f["stdio_bytes_read"], f["stdio_bytes_written"] = st.s("STDIO_BYTES_READ"), st.s("STDIO_BYTES_WRITTEN")
    stime = st.s("STDIO_F_READ_TIME", "STDIO_F_WRITE_TIME", "STDIO_F_META_TIME")
    f["stdio_time_s"] = stime

    # POSIX and STDIO are disjoint layers (fread's own read() calls are not intercepted);
    # MPI-IO sits on POSIX, so it only counts when a log has no POSIX module.
    no_posix = not px
    f["bytes_read"] = f["posix_bytes_read"] + f["stdio_bytes_read"] + (f["mpiio_bytes_read"] if no_posix else 0.0)
    f["bytes_written"] = f["posix_bytes_written"] + f["stdio_bytes_written"] + (f["mpiio_bytes_written"] if no_posix else 0.0)
    f["read_time_s"] = f["posix_read_time_s"] + st.s("STDIO_F_READ_TIME") + (mp.s("MPIIO_F_READ_TIME") if no_posix else 0.0)
    f["write_time_s"] = f["posix_write_time_s"] + st.s("STDIO_F_WRITE_TIME") + (mp.s("MPIIO_F_WRITE_TIME") if no_posix else 0.0)
    f["meta_time_s"] = f["posix_meta_time_s"] + st.s("STDIO_F_META_TIME") + (mp.s("MPIIO_F_META_TIME") if no_posix else 0.0)
    f["io_time_s"] = f["read_time_s"] + f["write_time_s"] + f["meta_time_s"]
    f["stdio_bytes_share"] = _div(f["stdio_bytes_read"] + f["stdio_bytes_written"], f["bytes_read"] + f["bytes_written"])

    f["h5f_opens"] = h5f.s("H5F_OPENS")
    f["h5d_reads"], f["h5d_writes"] = h5d.s("H5D_READS"), h5d.s("H5D_WRITES")
    f["h5d_bytes_read"], f["h5d_bytes_written"] = h5d.s("H5D_BYTES_READ"), h5d.s("H5D_BYTES_WRITTEN")
    f["h5d_chunk_bytes_median"] = _h5_chunk_bytes(h5d)
    f["pnetcdf_files"] = float(len(np.unique(pnc.t["file_id"]))) if pnc else 0.0
    f["uses_mpiio"], f["uses_stdio"] = bool(mp), bool(st)
    f["uses_hdf5"], f["uses_pnetcdf"] = bool(h5f or h5d), bool(pnc)

    # files: data files touched through POSIX/STDIO/MPI-IO (not <STDOUT> and friends)
    ids_l, rb_l, wb_l, mx_l, sh_l = [], [], [], [], []
    for mod, br, bw, mr, mw in (
        (px, "POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN", "POSIX_MAX_BYTE_READ", "POSIX_MAX_BYTE_WRITTEN"),
        (st, "STDIO_BYTES_READ", "STDIO_BYTES_WRITTEN", "STDIO_MAX_BYTE_READ", "STDIO_MAX_BYTE_WRITTEN"),
        (mp, "MPIIO_BYTES_READ", "MPIIO_BYTES_WRITTEN", None, None),
    ):
        if not mod:
            continue
        ids_l.append(np.asarray(mod.t["file_id"], dtype="u8"))
        rb_l.append(mod.col(br))
        wb_l.append(mod.col(bw))
        mx_l.append(np.maximum(mod.col(mr), mod.col(mw)) + 1 if mr else np.zeros(len(mod.t["file_id"])))
        sh_l.append((mod.t["rank"] < 0).astype("f8"))
    if ids_l:
        ids = np.concatenate(ids_l)
        uniq, inv = np.unique(ids, return_inverse=True)
        paths = profile.path_of()
        data = np.fromiter((not paths.get(int(i), "").startswith("<") for i in uniq.tolist()), dtype=bool, count=len(uniq))
        rb = np.bincount(inv, weights=np.concatenate(rb_l), minlength=len(uniq))
        wb = np.bincount(inv, weights=np.concatenate(wb_l), minlength=len(uniq))
        mx = np.zeros(len(uniq))
        np.maximum.at(mx, inv, np.concatenate(mx_l))
        sh = np.zeros(len(uniq))
        np.maximum.at(sh, inv, np.concatenate(sh_l))
        uniq, rb, wb, mx, sh = uniq[data], rb[data], wb[data], mx[data], sh[data]
    else:
        uniq = np.zeros(0, "u8")
        rb = wb = mx = sh = np.zeros(0)
    f["n_files"] = int(len(uniq))
    f["n_files_read"] = int((rb > 0).sum())
    f["n_files_written"] = int((wb > 0).sum())
    f["n_files_shared"] = int((sh > 0).sum())
    f["max_file_bytes"] = float(mx.max()) if len(mx) else math.nan

    # file systems: the one that moved the most bytes is the job's main one
    fs_of = dict(zip(profile.files["file_id"].tolist(), profile.files["fs_type"].tolist()))
    by_fs: dict[str, float] = {}
    for fid, moved in zip(uniq.tolist(), (rb + wb).tolist()):
        fs = fs_of.get(fid) or "unknown"
        by_fs[fs] = by_fs.get(fs, 0.0) + moved
    f["fs_types"] = ",".join(sorted(by_fs))
    f["fs_type_main"] = max(by_fs, key=lambda k: (by_fs[k], k)) if by_fs else ""

    if lus:
        f["lustre_files"] = int(len(np.unique(lus.t["file_id"])))
        ss, sc = lus.col("stripe_size"), lus.col("stripe_count")
        f["lustre_stripe_size_median_bytes"] = median(ss) if len(ss) else math.nan
        f["lustre_stripe_count_median"] = median(sc) if len(sc) else math.nan
        f["lustre_stripe_count_max"] = float(sc.max()) if len(sc) else math.nan
    else:
        f["lustre_files"] = 0
        f["lustre_stripe_size_median_bytes"] = f["lustre_stripe_count_median"] = f["lustre_stripe_count_max"] = math.nan
    return f


def finding_columns(findings: Sequence[Finding]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fid in FINDING_IDS:
        out[f"finding_{_fid(fid)}"] = False
        out[f"finding_{_fid(fid)}_cost_s"] = 0.0
    ids, sev, cost = [], [], []
    for fnd in findings:
        c = float(fnd.est_cost_s) if fnd.est_cost_s is not None else math.nan
        ids.append(fnd.id)
        sev.append(fnd.severity)
        cost.append(c)
        col = f"finding_{_fid(fnd.id)}"
        if col in out:
            out[col] = True
            prev = out[col + "_cost_s"]
            out[col + "_cost_s"] = c if math.isnan(c) or math.isnan(prev) else prev + c
    out["finding_ids"], out["finding_severities"], out["finding_costs_s"] = ids, sev, cost
    out["n_findings"] = len(ids)
    out["worst_severity"] = min(sev, key=SEVERITY_ORDER.index) if sev else ""
    out["findings_cost_s"] = float(np.nansum(cost)) if cost else 0.0
    return out


def job_meta(profile: JobProfile) -> dict[str, Any]:
    job = profile.job
    pt = profile.processes
    busy = np.clip(np.asarray(pt["end_s"], "f8") - np.asarray(pt["start_s"], "f8"), 0, None)
    if len(job.logs) == 1 and job.runtime_s is not None and not job.runtime_derived:
        busy = np.full(len(pt), float(job.runtime_s))  # the header's run time (Darshan rounds it up)
    return {
        "uid": job.uid if job.uid is not None else -1,
        "start_s": float(job.start_s) if job.start_s is not None else math.nan,
        "end_s": float(job.end_s) if job.end_s is not None else math.nan,
        "runtime_s": float(job.runtime_s) if job.runtime_s is not None else math.nan,
        "runtime_derived": bool(job.runtime_derived),
        "nprocs": int(job.nprocs),
        # process-hours: sum over processes of their own run time (non-MPI jobs
        # have many short processes; nprocs x job span would overcount them)
        "core_hours": float(busy.sum()) / 3600.0,
        "darshan_version": job.darshan_version or "",
        "modules": ",".join(job.modules),
        "partial": bool(job.partial_modules),
        "partial_modules": ",".join(job.partial_modules),
        "n_issues": len(profile.issues_seen),
    }


def exe_name(exe: str) -> str:
    return os.path.basename(exe) if exe else ""
