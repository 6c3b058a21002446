"""metadata-storm and many-small-files: time lost to opens, stats, seeks and syncs.

Rates are the peak 1-second bin of metadata ops when the ops table has them
(embedded collector), else the average over the job's run time.  The cost of
both findings is the metadata seconds Darshan measured (plus read/write time
of the small files for many-small-files).
"""

from __future__ import annotations

from collections import Counter

from pathlib import Path

import numpy as np

from ...config import Config
from ...findings import Finding, FindingSpec
from ...profile import OP, JobProfile
from ...units import fmt_bytes, fmt_pct
from ..batches import process_batches
from ..metrics import file_paths, group_sum, isin, level_total, median, metrics_of, pcol, std_file_ids
from ..nputil import percentile
from ..timemodel import meta_span_rows
from ._common import file_cost, finding, proc_weights, top_files, top_procs
from ..zarrpath import path_kind
from ._zarr import chunk_grids

KINDS = ("python-import", "zarr-chunk", "netcdf-hdf5")  # kinds of files whose metadata time is told apart

_META_CODES = [OP[k] for k in ("open", "stat", "seek", "fsync", "readdir", "mkdir", "rename", "unlink")]


def _peak_rate(profile: JobProfile) -> tuple[float, dict[str, int]]:
    starts, kinds = [], np.zeros(len(OP), "i8")
    # one bounded batch at a time when the ops are a source: counts and a minimum, exact in any grouping
    for o in (b for parts in process_batches(profile.ops, ("op", "start_s")) for b in parts):
        m = np.isin(o["op"], _META_CODES)
        starts.append(o["start_s"][m])
        kinds += np.bincount(o["op"][m], minlength=len(OP))
    t = np.concatenate(starts) if starts else np.zeros(0)
    if not len(t):
        return 0.0, {}
    bins = np.bincount(((t - t.min()) // 1.0).astype("i8"))
    return float(bins.max()), {k: int(kinds[OP[k]]) for k in ("readdir", "mkdir", "rename", "unlink") if kinds[OP[k]]}


def _may_storm(profile: JobProfile, cfg: Config) -> bool:
    """Whether detect_metadata_storm can find a reason, from job totals (no level table).  Without ops its
    counts are these exact integer totals; the time share is checked with a margin far wider than the
    rounding difference of summing seconds per module instead of over the level table."""
    c = cfg.metadata
    if profile.module("POSIX") is None and profile.module("STDIO") is None:
        return False
    if len(profile.ops):
        return True  # peak rates and extra op kinds come from the ops
    counts = {k: level_total(profile, k) for k in ("opens", "stats", "seeks", "fsyncs")}
    n_meta = sum(counts.values())
    if n_meta < c.min_ops:
        return False
    if n_meta / max(profile.job.runtime_s or 0.0, 1e-3) >= c.rate_per_s:
        return True
    data_ops = level_total(profile, "reads") + level_total(profile, "writes")
    if counts["opens"] >= c.min_ops and counts["opens"] / max(data_ops, 1) >= c.opens_per_data_op:
        return True
    meta = level_total(profile, "meta_s")
    total = meta + level_total(profile, "read_s") + level_total(profile, "write_s")
    if (meta / total if total > 0 else 0.0) >= c.time_share * (1 - 1e-6):
        return True
    std_ids = std_file_ids(profile)
    for mod in ("POSIX", "STDIO"):  # reopened (process, file) pairs
        t = profile.module(mod)
        if t is not None:
            hit = (t["proc"] >= 0) & (pcol(profile, mod, f"{mod}_OPENS") >= c.reopen_count)
            if hit.any() and (hit & ~isin(t["file_id"], std_ids)).any():
                return True
    return False


def _may_many(profile: JobProfile, cfg: Config) -> bool:
    """At least small_files.count POSIX-level records (each small file has one)."""
    return sum(len(t) for t in (profile.module("POSIX"), profile.module("STDIO")) if t is not None) >= cfg.small_files.count


ZARR_META = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")


def _zarr_meta_use(profile: JobProfile, lv, path: str) -> str | None:
    """For a Zarr metadata document or a file in a ``.zarr`` store, "append" when the job writes files of its
    array or group (each to_zarr(append_dim=...) call reads it and writes it anew through a temp file), else
    "read" (each open_zarr reads the metadata and the coordinates' chunks again); None otherwise."""
    folder, _, name = path.rpartition("/")
    if ".zarr/" in path:
        folder = path[: path.index(".zarr/") + 5]
    elif name not in ZARR_META:
        return None
    paths = profile.path_of()
    written = np.unique(lv["file_id"][lv["bytes_written"] > 0]).tolist()  # files written, each once
    return "append" if any(str(paths.get(int(f), "")).startswith(folder + "/") for f in written) else "read"


def detect_metadata_storm(profile: JobProfile, cfg: Config) -> list[Finding]:
    c = cfg.metadata
    if not _may_storm(profile, cfg):
        return []
    m = metrics_of(profile)
    lv = m.level
    # fseek/ftell on a STDIO stream move a position inside the stream's buffer, not file-system metadata: a
    # stream's seeks are not counted, and the STDIO metadata seconds of a stream with more of them than
    # reopen_count per open are its positioning (small-io's STDIO advice names it), not metadata
    stream = lv["module"] == "STDIO" if len(lv) else np.zeros(0, bool)
    positioning = stream & (lv["seeks"] >= c.reopen_count * np.maximum(lv["opens"], 1))
    meta_row = np.where(positioning, 0.0, lv["meta_s"])
    counts = {k: int(lv[k][~stream].sum()) if k == "seeks" else int(lv[k].sum()) for k in ("opens", "stats", "seeks", "fsyncs")}
    peak, extra = _peak_rate(profile)
    n_meta = sum(counts.values()) + sum(extra.values())
    if n_meta < c.min_ops or not len(lv):
        return []
    runtime = max(profile.job.runtime_s or 0.0, 1e-3)
    avg = n_meta / runtime
    meta_s = float(meta_row.sum()) if positioning.any() else m.meta_s
    share = meta_s / m.total_io_s if m.total_io_s else 0.0
    data_ops = int((lv["reads"] + lv["writes"]).sum())
    opens_per_op = counts["opens"] / max(data_ops, 1)
    own = lv["proc"] >= 0
    std_ids = m.file_ids[file_paths(profile)[1]]  # the level rows' files named <STDIN> etc.
    # stdin/stdout/stderr "opens" are dup'd descriptors of a terminal or pipe, not file-system metadata
    reopen = own & (lv["opens"] >= c.reopen_count) & ~np.isin(lv["file_id"], std_ids)
    reasons = []
    if share >= c.time_share:
        reasons.append(f"metadata is {fmt_pct(share)} of I/O time")
    if max(peak, avg) >= c.rate_per_s:
        reasons.append(f"{max(peak, avg):,.0f} metadata ops/s ({'peak 1 s' if peak else 'average'})")
    if counts["opens"] >= c.min_ops and opens_per_op >= c.opens_per_data_op:
        reasons.append(f"{counts['opens']:,} opens for {data_ops:,} reads/writes ({opens_per_op:.2f} per access)")
    if reopen.any():
        reasons.append(f"{int(reopen.sum())} (process, file) pairs opened >= {c.reopen_count} times")
    if not reasons:
        return []
    ev = {**{f"{k}_count": v for k, v in counts.items()}, **{f"{k}_count": v for k, v in extra.items()},
          "metadata_s": meta_s, "read_write_s": m.rw_s, "metadata_time_share": share, "avg_rate_per_s": avg,
          "peak_rate_per_s": peak or None, "opens_per_data_op": opens_per_op,
          "max_opens_one_file_one_process": int(lv["opens"][own].max()) if own.any() else 0}
    facts: dict = {"data_ops": data_ops}
    if reopen.any():
        i = np.flatnonzero(reopen)[np.argmax(lv["opens"][reopen])]
        facts["reopened"] = {"path": profile.path_of().get(int(lv["file_id"][i]), "?"), "opens": int(lv["opens"][i]),
                             "process": int(lv["proc"][i]), "writes": int(lv["writes"][i])}
        zarr = _zarr_meta_use(profile, lv, facts["reopened"]["path"])
        if zarr:
            facts["reopened"]["zarr"] = zarr
    if opens_per_op >= c.opens_per_data_op and counts["opens"] >= c.min_ops:
        facts["opened_files"] = int(np.count_nonzero(group_sum(m.file_idx, lv["opens"].astype("f8"), len(m.file_ids)) > 0))
        # the most processes opening one file (a record reduced over the ranks: all of them): 1 when every process
        # re-opens files of its own, not the same files as the others
        opener = (lv["opens"] > 0).astype("f8") * np.where(lv["proc"] >= 0, 1.0, float(max(m.nprocs, 2)))
        facts["openers_per_file"] = int(group_sum(m.file_idx, opener, len(m.file_ids)).max()) if len(lv) else 0
    facts["many"] = {k: counts[k] >= (c.min_ops // 10 if k == "fsyncs" else c.min_ops) for k in ("stats", "seeks", "fsyncs")}
    meta_f = group_sum(m.file_idx, meta_row, len(m.file_ids))
    kinds = np.array([path_kind(x) for x in file_paths(profile)[0].tolist()], dtype=object)
    facts["kinds"] = []  # (kind, its share of the metadata time, files, file system), in the order advice lists them
    for kind in KINDS:
        k_s = float(meta_f[kinds == kind].sum())
        if meta_s > 0 and k_s >= 0.3 * meta_s:
            ev[f"{kind}_metadata_s"] = k_s
            fst = profile.files["fs_type"][np.isin(profile.files["file_id"], m.file_ids[kinds == kind])]
            fs_name = max(set(fst.tolist()), key=fst.tolist().count) if len(fst) else ""
            facts["kinds"].insert(0, {"kind": kind, "share": k_s / meta_s, "files": int((kinds == kind).sum()),
                                      "fs": fs_name,  # files of this kind written (a read-only job has no temp files)
                                      "written": bool(m.file_stats["bytes_written"][kinds == kind].sum() > 0)})
    # a Python program (Dask tasks, Python imports among its files, or a python executable): the advice may name
    # xarray's way of opening once; an MPI or C job gets the advice without it
    exe = Path(str(profile.job.exe or "").split(" ", 1)[0]).name
    facts["python"] = bool(len(profile.tasks) or (kinds == "python-import").any() or exe.startswith("python"))
    return [finding(cfg, profile, METADATA_STORM.id, "metadata storm: " + "; ".join(reasons),
                    **file_cost(profile, m.file_ids, meta_f, meta_span_rows(profile)), evidence=ev, facts=facts,
                    files=top_files(profile, m.file_ids, meta_f, cfg.report.top_files),
                    processes=top_procs(proc_weights(profile, lv, None, meta_row, m.nprocs), cfg.report.top_processes))]


def detect_many_small_files(profile: JobProfile, cfg: Config) -> list[Finding]:
    c = cfg.small_files
    if not _may_many(profile, cfg):
        return []
    m = metrics_of(profile)
    fs = m.file_stats
    if not len(m.file_ids):
        return []
    p, std = file_paths(profile)
    data = (fs["bytes_read"] + fs["bytes_written"]) > 0
    real = ~std
    small = real & data & (fs["size_bytes"] < c.size_bytes)
    opened_only = real & ~data & (fs["opens"] > 0)
    if small.sum() < c.count:
        return []
    sizes = fs["size_bytes"][small]
    cost_f = (fs["meta_s"] + fs["read_s"] + fs["write_s"]) * small
    cost = float(cost_f.sum())
    dirs = Counter(_dirname(x) for x in p[small].tolist())
    top_n = max(dirs.values())
    top_dir = str(min(d for d, k in dirs.items() if k == top_n))  # the first in sorted order, as np.unique gives
    total = float(sizes.sum())
    mean = total / len(sizes)
    k = max(int(c.target_chunk_bytes // max(mean, 1)), 1)
    after = int(np.ceil(len(sizes) / k))
    grids = chunk_grids(p, fs["bytes_written"] + fs["bytes_read"])
    ev = {"small_files": int(small.sum()), "opened_without_data_files": int(opened_only.sum()),
          "size_threshold_bytes": c.size_bytes, "median_file_bytes": median(sizes),
          "p90_file_bytes": percentile(sizes, 90), "total_bytes": total, "mean_file_bytes": mean,
          "files_in_top_directory": top_n, "directories": len(dirs), "time_on_small_files_s": cost}
    if grids:
        return [finding(cfg, profile, MANY_SMALL_FILES.id, f"{int(small.sum()):,} files smaller than {fmt_bytes(c.size_bytes)} "
                        f"({fmt_bytes(total)} in total), chunk files of {len(grids)} Zarr array(s)",
                        **file_cost(profile, m.file_ids, cost_f), evidence={**ev, **_zarr_evidence(grids, c.zarr_chunk_bytes)},
                        facts={"zarr_grids": grids, "target_chunk_bytes": c.zarr_chunk_bytes,
                               "wrote": bool(fs["bytes_written"][small].sum() > 0)},
                        files=top_files(profile, m.file_ids, np.where(small, fs["meta_s"] + 1e-12, 0), cfg.report.top_files))]
    facts = {"small_files": int(small.sum()), "top_directory": top_dir, "target_file_bytes": c.target_chunk_bytes,
             "files_per_target": k, "files_after": after}
    w = np.where(small, fs["meta_s"] + fs["read_s"] + fs["write_s"] + 1e-12, 0)
    return [finding(cfg, profile, MANY_SMALL_FILES.id, f"{int(small.sum()):,} files smaller than {fmt_bytes(c.size_bytes)} "
                    f"({fmt_bytes(total)} in total)", **file_cost(profile, m.file_ids, cost_f), evidence=ev,
                    facts=facts, files=top_files(profile, m.file_ids, w, cfg.report.top_files))]


def _dirname(path: str) -> str:
    """``os.path.dirname`` of a str path (same steps, without its per-call type dispatch)."""
    head = path[:path.rfind("/") + 1]
    return head.rstrip("/") or head


def _zarr_evidence(grids: dict, target: float) -> dict:
    name = max(grids, key=lambda a: grids[a]["chunks"])
    g = grids[name]
    return {"zarr_arrays": len(grids), "zarr_chunk_files": int(sum(a["chunks"] for a in grids.values())),
            "largest_array": name, "largest_array_chunk_grid": list(g["grid"]),
            "largest_array_mean_chunk_bytes": g["mean_chunk_bytes"]}


METADATA_STORM = FindingSpec(
    id="metadata-storm", seq=2, detect=detect_metadata_storm,
    fires="≥ `min_ops` opens+stats+seeks+fsyncs and any of: metadata ≥ `time_share` of I/O time; ≥ `rate_per_s` "
          "ops/s (peak 1 s bin from ops, else average); opens per read/write ≥ `opens_per_data_op`; a (process, "
          "file) opened ≥ `reopen_count` times",
    cost="metadata seconds, in wall time: one process's part of a shared record (rank -1) at most the record's "
         "open timestamp span (OPEN_END − OPEN_START)",
    config_keys=("metadata.min_ops", "metadata.time_share", "metadata.rate_per_s", "metadata.reopen_count",
                 "metadata.opens_per_data_op"),
    notes=("metadata time is attributed to Python imports (.py/.pyc/.so), Zarr chunk files, NetCDF/HDF5 files; each "
           "≥ 30 % gets its own advice",),
    admin_action="Ask these users to open files once and keep them open, and to avoid stat/seek loops; for many "
                 "files, point them at a node-local or metadata-light scratch.",
)
MANY_SMALL_FILES = FindingSpec(
    id="many-small-files", seq=3, detect=detect_many_small_files,
    fires="≥ `count` files with data, each < `size_bytes` (4 MiB)",
    cost="metadata + read/write seconds on them",
    config_keys=("small_files.count", "small_files.size_bytes", "small_files.target_chunk_bytes",
                 "small_files.zarr_chunk_bytes"),
    notes=("for Zarr stores the chunk grid is rebuilt from chunk-file paths (`A/c/i/j/k`, `.partial` temp names "
           "folded in) and a per-dimension merge plan to ~`zarr_chunk_bytes` is given",),
    admin_action="Recommend packing small files (HDF5/NetCDF containers, Zarr with larger chunks, tar) in the user "
                 "docs; consider a small-file-friendly file system for these projects.",
)
SPECS = (METADATA_STORM, MANY_SMALL_FILES)
