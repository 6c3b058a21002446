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

from ..analyzers.detectors import FINDING_IDS
from ..analyzers.summary import job_totals
from ..analyzers.nputil import isin, median, unique
from ..findings import Finding
from ..analyzers.counters import module_sums, pcol
from ..analyzers.metrics import angle_file_ids, files_column
from ..profile import JobProfile

FORMAT_VERSION = 1

SIZE_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")
# the bins as people read them (Darshan's edges are powers of 1024 above 100 B)
SIZE_BIN_LABELS = ("≤ 100 B", "100 B – 1 KiB", "1 – 10 KiB", "10 – 100 KiB", "100 KiB – 1 MiB", "1 – 4 MiB", "4 – 10 MiB",
                   "10 – 100 MiB", "100 MiB – 1 GiB", "> 1 GiB")
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

    @property
    def get(self):
        """dict.get of the column sums: get(name, 0.0)."""
        return self._sums.get

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


_FILE_COLS = (("POSIX", "POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN", "POSIX_MAX_BYTE_READ", "POSIX_MAX_BYTE_WRITTEN"),
              ("STDIO", "STDIO_BYTES_READ", "STDIO_BYTES_WRITTEN", "STDIO_MAX_BYTE_READ", "STDIO_MAX_BYTE_WRITTEN"),
              ("MPI-IO", "MPIIO_BYTES_READ", "MPIIO_BYTES_WRITTEN", None, None))


def _files(profile: JobProfile, *mods: _Mod) -> tuple:
    """Per data file (sorted ids; not <STDOUT> and friends): bytes read, bytes written, size (largest offset + 1)
    and whether a shared record names it.  A few records are grouped in Python, many with NumPy: the same
    sums in the same order (bincount adds row by row from 0.0, as the dicts do)."""
    cols = [(np.asarray(m.t["file_id"], dtype="u8"), m.col(br), m.col(bw),
             np.maximum(m.col(mr), m.col(mw)) + 1 if mr else np.zeros(len(m.t)), m.t["rank"] < 0)
            for m, (_, br, bw, mr, mw) in zip(mods, _FILE_COLS) if m]
    if sum(len(c[0]) for c in cols) <= 64:
        paths = profile.path_of()
        acc: dict[int, list] = {}
        for ids, r, w, x, s in cols:
            for i, rv, wv, xv, sv in zip(ids.tolist(), r.tolist(), w.tolist(), x.tolist(), s.tolist()):
                a = acc.setdefault(i, [0.0, 0.0, 0.0, 0.0])
                a[0] += rv
                a[1] += wv
                a[2] = max(a[2], float(xv))
                a[3] = max(a[3], 1.0 if sv else 0.0)
        keep = [i for i in sorted(acc) if not paths.get(i, "").startswith("<")]
        return keep, *([acc[i][j] for i in keep] for j in range(4))  # type: ignore[return-value]
    ids = np.concatenate([c[0] for c in cols])
    uniq, inv = np.unique(ids, return_inverse=True)
    # ids named "<...>" (<STDOUT>, <unnamed ...>) are few: find them once among the paths, then compare ids
    special = angle_file_ids(profile)
    data = ~isin(uniq, special) if len(special) else np.ones(len(uniq), bool)
    rb = np.bincount(inv, weights=np.concatenate([c[1] for c in cols]), minlength=len(uniq))
    wb = np.bincount(inv, weights=np.concatenate([c[2] for c in cols]), minlength=len(uniq))
    # per-file maxima (order does not matter): maximum.reduceat over the rows grouped by file
    order = np.argsort(inv, kind="stable")
    first = np.searchsorted(inv[order], np.arange(len(uniq)))
    mx = np.maximum(np.maximum.reduceat(np.concatenate([c[3] for c in cols]).astype("f8")[order], first), 0.0)
    sh = (np.bincount(inv, weights=np.concatenate([c[4] for c in cols]), minlength=len(uniq)) > 0).astype("f8")
    return uniq[data], rb[data], wb[data], mx[data], sh[data]


def _bytes_by_fs(profile: JobProfile, uniq, rb, wb) -> dict[str, float]:
    """File-system type ("unknown" when none) -> bytes read + written of the files, added file by file in order."""
    if isinstance(uniq, list):
        fs_of = dict(zip(profile.files["file_id"].tolist(), profile.files["fs_type"].tolist()))
        by_fs: dict[str, float] = {}
        for fid, r, w in zip(uniq, rb, wb):
            fs = fs_of.get(fid) or "unknown"
            by_fs[fs] = by_fs.get(fs, 0.0) + (r + w)
        return by_fs
    fs, found = files_column(profile, uniq, "fs_type")  # sorted or not, the files table is searched right
    fs = np.where(found, fs, None)
    names: dict[str, int] = {}
    code = np.zeros(len(uniq), "i8")
    for v in set(fs.tolist()):  # a few distinct types (one object each, from the mount table)
        code[fs == v] = names.setdefault(v or "unknown", len(names))
    # bincount adds each bin's values in order from 0.0, as by_fs[fs] += r + w does
    tot = np.bincount(code, weights=rb + wb, minlength=len(names)).tolist()
    return {name: tot[c] for name, c in names.items()}


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
    _posix_features(f, px)
    _mpiio_stdio_features(f, mp, st)
    tot = _job_volume_features(f, profile, px, mp, st)
    _library_features(f, mp, st, h5f, h5d, pnc)
    _file_features(f, profile, tot, px, st, mp)
    _lustre_features(f, lus)
    return f


# column sums by name (0 when absent); a + b + c adds in the order sum() would, from 0
def _posix_features(f: dict[str, Any], px: "_Mod") -> None:
    """POSIX counts, bytes, times, shares (metadata, small, sequential, misaligned) and the size bins."""
    PX = px.get
    reads, writes = PX("POSIX_READS", 0.0), PX("POSIX_WRITES", 0.0)
    f["posix_reads"], f["posix_writes"] = reads, writes
    f["posix_bytes_read"], f["posix_bytes_written"] = PX("POSIX_BYTES_READ", 0.0), PX("POSIX_BYTES_WRITTEN", 0.0)
    f["posix_opens"] = (PX("POSIX_OPENS", 0.0) + PX("POSIX_FILENOS", 0.0) + PX("POSIX_DUPS", 0.0))
    f["posix_stats"] = PX("POSIX_STATS", 0.0)
    f["posix_seeks"] = PX("POSIX_SEEKS", 0.0)
    f["posix_fsyncs"] = (PX("POSIX_FSYNCS", 0.0) + PX("POSIX_FDSYNCS", 0.0))
    f["posix_meta_ops"] = f["posix_opens"] + f["posix_stats"] + f["posix_seeks"] + f["posix_fsyncs"] + PX("POSIX_RENAME_SOURCES", 0.0)
    f["posix_read_time_s"] = PX("POSIX_F_READ_TIME", 0.0)
    f["posix_write_time_s"] = PX("POSIX_F_WRITE_TIME", 0.0)
    f["posix_meta_time_s"] = PX("POSIX_F_META_TIME", 0.0)
    ptime = f["posix_read_time_s"] + f["posix_write_time_s"] + f["posix_meta_time_s"]
    f["posix_meta_time_share"] = _div(f["posix_meta_time_s"], ptime)
    f["posix_meta_ops_per_data_op"] = _div(f["posix_meta_ops"], reads + writes)
    f["posix_mean_read_bytes"] = _div(f["posix_bytes_read"], reads)
    f["posix_mean_write_bytes"] = _div(f["posix_bytes_written"], writes)
    f["posix_common_access_bytes"] = _common_access(px)
    small = sum(PX(n, 0.0) for n in _SMALL_BIN_NAMES)
    f["posix_ops_lt_100k_share"] = _div(small, reads + writes)
    f["posix_seq_share"] = _div((PX("POSIX_SEQ_READS", 0.0) + PX("POSIX_SEQ_WRITES", 0.0)), reads + writes)
    f["posix_consec_share"] = _div((PX("POSIX_CONSEC_READS", 0.0) + PX("POSIX_CONSEC_WRITES", 0.0)), reads + writes)
    f["posix_file_misaligned_share"] = _div(PX("POSIX_FILE_NOT_ALIGNED", 0.0), reads + writes)
    al = px.col("POSIX_FILE_ALIGNMENT")
    f["posix_file_alignment_bytes"] = float(al.max()) if len(al) else math.nan
    f["posix_rw_switches"] = PX("POSIX_RW_SWITCHES", 0.0)
    for key, name in _BIN_NAMES:
        f[key] = PX(name, 0.0)


def _mpiio_stdio_features(f: dict[str, Any], mp: "_Mod", st: "_Mod") -> None:
    """MPI-IO independent and collective operations, bytes and time; STDIO operations, bytes and time."""
    MP, ST = mp.get, st.get
    f["mpiio_indep_ops"] = (MP("MPIIO_INDEP_READS", 0.0) + MP("MPIIO_INDEP_WRITES", 0.0) + MP("MPIIO_SPLIT_READS", 0.0) + MP("MPIIO_SPLIT_WRITES", 0.0) + MP("MPIIO_NB_READS", 0.0) + MP("MPIIO_NB_WRITES", 0.0))
    f["mpiio_coll_ops"] = (MP("MPIIO_COLL_READS", 0.0) + MP("MPIIO_COLL_WRITES", 0.0))
    f["mpiio_coll_share"] = _div(f["mpiio_coll_ops"], f["mpiio_coll_ops"] + f["mpiio_indep_ops"])
    f["mpiio_bytes_read"], f["mpiio_bytes_written"] = MP("MPIIO_BYTES_READ", 0.0), MP("MPIIO_BYTES_WRITTEN", 0.0)
    f["mpiio_time_s"] = (MP("MPIIO_F_READ_TIME", 0.0) + MP("MPIIO_F_WRITE_TIME", 0.0) + MP("MPIIO_F_META_TIME", 0.0))

    f["stdio_ops"] = (ST("STDIO_OPENS", 0.0) + ST("STDIO_FDOPENS", 0.0) + ST("STDIO_READS", 0.0) + ST("STDIO_WRITES", 0.0) + ST("STDIO_SEEKS", 0.0) + ST("STDIO_FLUSHES", 0.0))
    f["stdio_bytes_read"], f["stdio_bytes_written"] = ST("STDIO_BYTES_READ", 0.0), ST("STDIO_BYTES_WRITTEN", 0.0)
    stime = (ST("STDIO_F_READ_TIME", 0.0) + ST("STDIO_F_WRITE_TIME", 0.0) + ST("STDIO_F_META_TIME", 0.0))
    f["stdio_time_s"] = stime


def _job_volume_features(f: dict[str, Any], profile: JobProfile, px: "_Mod", mp: "_Mod", st: "_Mod"):
    """The job's bytes and read/write/metadata times across layers; the job totals they come from."""
    MP, ST = mp.get, st.get
    # the job's bytes are the report's (analyzers.summary.job_totals: POSIX and STDIO are disjoint layers, MPI-IO
    # sits on POSIX and only counts when no layer beneath it was recorded); times by the same rule
    tot = job_totals(profile)
    no_posix = not px
    f["bytes_read"], f["bytes_written"] = float(tot.bytes_read), float(tot.bytes_written)
    f["read_time_s"] = f["posix_read_time_s"] + ST("STDIO_F_READ_TIME", 0.0) + (MP("MPIIO_F_READ_TIME", 0.0) if no_posix else 0.0)
    f["write_time_s"] = f["posix_write_time_s"] + ST("STDIO_F_WRITE_TIME", 0.0) + (MP("MPIIO_F_WRITE_TIME", 0.0) if no_posix else 0.0)
    f["meta_time_s"] = f["posix_meta_time_s"] + ST("STDIO_F_META_TIME", 0.0) + (MP("MPIIO_F_META_TIME", 0.0) if no_posix else 0.0)
    f["io_time_s"] = f["read_time_s"] + f["write_time_s"] + f["meta_time_s"]
    f["stdio_bytes_share"] = _div(f["stdio_bytes_read"] + f["stdio_bytes_written"], f["bytes_read"] + f["bytes_written"])
    return tot


def _library_features(f: dict[str, Any], mp: "_Mod", st: "_Mod", h5f: "_Mod", h5d: "_Mod", pnc: "_Mod") -> None:
    """HDF5 and PnetCDF use and volumes; which layers the job used."""
    H5F, H5D = h5f.get, h5d.get
    f["h5f_opens"] = H5F("H5F_OPENS", 0.0)
    f["h5d_reads"], f["h5d_writes"] = H5D("H5D_READS", 0.0), H5D("H5D_WRITES", 0.0)
    f["h5d_bytes_read"], f["h5d_bytes_written"] = H5D("H5D_BYTES_READ", 0.0), H5D("H5D_BYTES_WRITTEN", 0.0)
    f["h5d_chunk_bytes_median"] = _h5_chunk_bytes(h5d)
    f["pnetcdf_files"] = float(len(unique(pnc.t["file_id"]))) if pnc else 0.0
    f["uses_mpiio"], f["uses_stdio"] = bool(mp), bool(st)
    f["uses_hdf5"], f["uses_pnetcdf"] = bool(h5f or h5d), bool(pnc)


def _file_features(f: dict[str, Any], profile: JobProfile, tot, px: "_Mod", st: "_Mod", mp: "_Mod") -> None:
    # files: the job's data files (job_totals.data_files: not <STDOUT> and friends); read, written, shared and
    # the largest from the per-file sums of POSIX/STDIO/MPI-IO
    uniq, rb, wb, mx, sh = _files(profile, px, st, mp)
    f["n_files"] = tot.data_files
    if isinstance(uniq, list):  # a few records, grouped in Python
        f["n_files_read"] = sum(1 for x in rb if x > 0)
        f["n_files_written"] = sum(1 for x in wb if x > 0)
        f["n_files_shared"] = sum(1 for x in sh if x > 0)
        f["max_file_bytes"] = float(max(mx)) if mx else math.nan
    else:
        f["n_files_read"], f["n_files_written"] = int((rb > 0).sum()), int((wb > 0).sum())
        f["n_files_shared"] = int((sh > 0).sum())
        f["max_file_bytes"] = float(mx.max()) if len(mx) else math.nan

    # file systems: the one that moved the most bytes is the job's main one
    by_fs = _bytes_by_fs(profile, uniq, rb, wb)
    f["fs_types"] = ",".join(sorted(by_fs))
    f["fs_type_main"] = max(by_fs, key=lambda k: (by_fs[k], k)) if by_fs else ""


def _lustre_features(f: dict[str, Any], lus: "_Mod") -> None:
    """Lustre files and their striping (medians, widest stripe count)."""
    if lus:
        f["lustre_files"] = int(len(unique(lus.t["file_id"])))
        ss, sc = lus.col("stripe_size"), lus.col("stripe_count")
        f["lustre_stripe_size_median_bytes"] = median(ss) if len(ss) else math.nan
        f["lustre_stripe_count_median"] = median(sc) if len(sc) else math.nan
        f["lustre_stripe_count_max"] = float(sc.max()) if len(sc) else math.nan
    else:
        f["lustre_files"] = 0
        f["lustre_stripe_size_median_bytes"] = f["lustre_stripe_count_median"] = f["lustre_stripe_count_max"] = math.nan


_FINDING_DEFAULTS: dict[str, Any] = {c: v for fid in FINDING_IDS for c, v in ((f"finding_{_fid(fid)}", False), (f"finding_{_fid(fid)}_cost_s", 0.0))}


def finding_columns(findings: Sequence[Finding]) -> dict[str, Any]:
    out: dict[str, Any] = dict(_FINDING_DEFAULTS)
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
    if len(cost) < 8:  # what np.nansum gives for fewer than 8 values: 0.0 + each non-NaN value in order
        out["findings_cost_s"] = sum((c for c in cost if not math.isnan(c)), 0.0)
    else:
        out["findings_cost_s"] = float(np.nansum(cost))
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
