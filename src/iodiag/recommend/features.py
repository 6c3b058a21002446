"""Features of a planned run or of a recorded job: what the recommender's trees look at.

A *scenario* is what a user cannot change without changing the science: the workload kind (a conversion or a
read), the access pattern (time slice, point series, whole variable, conversion) and the array (shape, bytes per
element, hence its size, the number of steps along the leading dimension and the bytes of one step).  A *setting*
is what they can change: the chunk layout and size, the compressor, the Zarr format, the Dask workers.  The trees
take the scenario and answer with a setting (classifier) or take both and answer with the relative performance
(regressor).

Features come from two places, with the same names:

* a workload's results record (``iodiag.workload-result/1``, written by ``iodiag.workloads.convert``/``read``):
  the parameters, shape, chunks and format as planned and run (``planned_features``);
* a job profile (``job_features``): the Zarr arrays' own metadata (``JobInfo.arrays``: the ``.zarray`` /
  ``zarr.json`` documents the job's snapshot recorded when it ended, or for a job without one those read live
  at report time, which ``based_on`` then says; ``analyzers/readers/arrays.py``), the I/O counters (operation
  sizes, metadata share, files, processes; ``analyzers/metrics.py``, ``timemodel.py``), the Dask task stream
  (``tasktime.py``), the file system of the files and Lustre striping from LUSTRE records.  A job recorded by
  ``iodiag run`` around an iodiag workload also has its results record in the job folder, which fills in what
  counters cannot say (the access pattern); it is read whether or not the command's parameters are given (it
  is a file of the job folder, never the live store); without one the features say so (``based_on``) and only
  what was measured is used.

Every job's features also carry its wall time (``wall_s``) and the time of the phase the trained model's ratio is
for (``phase_s``: a conversion's write phase, a read's pattern time, from the results record; ``phase_from`` says
so); for a job without one, ``estimated_phase`` estimates it from the Dask task stream or the span of the data
files' I/O.  The calibration turns the model's ratio into a whole-run gain with them (``recommend/calibration.py``).

Everything here is pure apart from reading a job's results record (and, for a job without a snapshot or a planned
run, a read store's metadata); nothing prints, scikit-learn is never imported.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..units import fmt_bytes

FEATURES_VERSION = 1  # bump when a feature's meaning changes: models trained before then are stale

# the scenario inputs of each workload's trees (what a user cannot change) and the setting inputs of the regressor
SCENARIO_INPUTS: dict[str, tuple[str, ...]] = {
    "convert": ("array_mb", "n_lead", "step_mb"),
    "read": ("pattern", "array_mb", "n_lead", "step_mb"),
}
SETTING_INPUTS: dict[str, tuple[str, ...]] = {
    "convert": ("chunk_mb", "compressor", "workers"),
    "read": ("layout", "chunk_mb", "compressor", "zarr_format"),
}
LAYOUTS = ("step", "sub-step", "block", "pencil", "other")
PENCIL_SPLIT = 4  # pencil layout: the whole leading axis, the last two dimensions cut in 4 x 4
BLOCK_MB = 16.0  # block layout: ~16 MB along the leading dimension, the other dimensions whole

BASED_ON_PARAMS = "workload parameters and measured features"
BASED_ON_MEASURED = "measured features only (no workload parameters: the job has no iodiag results record)"
BASED_ON_PARAMS_NO_RECORD = ("workload parameters and measured features (the run left no results record, so the "
                             "array's shape and timings are the measured ones)")


# ----------------------------------------------------------------------------------------------- geometry
def nbytes(shape: Sequence[int], itemsize: int) -> int:
    return int(math.prod(int(s) for s in shape) * int(itemsize))


def n_chunks(shape: Sequence[int], chunks: Sequence[int]) -> int:
    return int(math.prod(math.ceil(int(s) / max(int(c), 1)) for s, c in zip(shape, chunks)))


def layout_of(shape: Sequence[int], chunks: Sequence[int] | None) -> str:
    """The chunk layout as a class, from geometry alone: ``step`` (one leading step per chunk, the rest whole:
    (1, ·, ·, ·)), ``sub-step`` (one step cut further), ``block`` (several steps, the rest whole), ``pencil``
    (the whole leading axis, the rest cut), ``other``.  Contiguous data (no chunks) is one block."""
    if not chunks:
        return "block"
    shape, chunks = [int(s) for s in shape], [min(int(c), int(s)) for c, s in zip(chunks, shape)]
    rest_whole = chunks[1:] == shape[1:]
    if chunks[0] == 1 and shape[0] > 1:
        return "step" if rest_whole else "sub-step"
    if rest_whole:
        return "block"
    if chunks[0] == shape[0]:
        return "pencil"
    return "other"


def layout_chunks(layout: str, shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The chunk shape of a layout class for an array (the inverse of ``layout_of`` for the trained classes)."""
    shape = tuple(int(s) for s in shape)
    if layout == "step":
        return (1, *shape[1:])
    if layout == "block":
        return chunks_for_mb(shape, itemsize, BLOCK_MB)
    if layout == "pencil":
        if len(shape) < 3:
            return (shape[0], *(max(1, math.ceil(s / PENCIL_SPLIT)) for s in shape[1:]))
        return (shape[0], *shape[1:-2], *(max(1, math.ceil(s / PENCIL_SPLIT)) for s in shape[-2:]))
    raise ValueError(f"no chunk shape for layout {layout!r}")


def chunks_for_mb(shape: Sequence[int], itemsize: int, target_mb: float) -> tuple[int, ...]:
    """What ``convert --chunk-mb`` makes of a target size (the workload's own rule: cut the leading dims first)."""
    from ..workloads import chunks_for_target

    return tuple(int(c) for c in chunks_for_target(tuple(int(s) for s in shape), int(itemsize), float(target_mb)))


def _geometry(shape: Sequence[int], itemsize: int, chunks: Sequence[int] | None) -> dict[str, Any]:
    shape = [int(s) for s in shape]
    out: dict[str, Any] = {
        "shape": tuple(shape),
        "itemsize": int(itemsize),
        "array_mb": nbytes(shape, itemsize) / 1e6,
        "n_lead": shape[0] if shape else 1,
        "step_mb": nbytes(shape[1:], itemsize) / 1e6,
    }
    if chunks:
        ch = tuple(min(int(c), s) for c, s in zip(chunks, shape))
        out.update(chunks=ch, chunk_mb=nbytes(ch, itemsize) / 1e6, n_chunks=n_chunks(shape, ch),
                   layout=layout_of(shape, ch))
    else:
        out.update(chunks=None, chunk_mb=out["array_mb"], n_chunks=1, layout=layout_of(shape, None))
    return out


# ----------------------------------------------------------------------------------------------- planned runs
def planned_features(record: Mapping[str, Any], *, pattern: str | None = None,
                     snapshot: Mapping[str, Any] | None = None, cwd: str | None = None) -> dict[str, Any]:
    """Features of one run from its workload results record (convert or read).

    For a read record with several patterns, ``pattern`` picks one; without it the pattern that took longest is
    the job's (the one a change would help most) and the others are listed under ``other_patterns``.  A read
    store's compressor comes from ``snapshot`` (the job's ``meta/snapshot.json``; relative store paths are taken
    from ``cwd``) when given, else from the store as it is now (``live_metadata`` then names it)."""
    wl = record.get("workload")
    params = dict(record.get("params") or {})
    shape = record.get("shape")
    if wl not in ("convert", "read") or not shape:
        return {"workload": wl, "based_on": BASED_ON_PARAMS, "missing": ["shape"] if not shape else ["workload"]}
    itemsize = _itemsize(record)
    f: dict[str, Any] = {"workload": wl, "based_on": BASED_ON_PARAMS, "params": params}
    f.update(_geometry(shape, itemsize, record.get("chunks")))
    if wl == "convert":
        f.update(pattern="conversion", compressor=str(params.get("compressor") or "none"),
                 zarr_format=int(params.get("zarr_format") or 2), workers=int(params.get("workers") or 1),
                 threads=int(params.get("threads") or 1), chunk_mb_target=params.get("chunk_mb"),
                 dask_tasks=record.get("n_tasks"), source=params.get("src"), target=params.get("dst"),
                 dims=record.get("dims"),
                 time_s=(record.get("timings_s") or {}).get("write"))
    else:
        pats = record.get("patterns") or {}
        if pattern is None and pats:
            pattern = max(pats, key=lambda p: float(pats[p].get("total_s") or 0.0))
        f.update(pattern=pattern, other_patterns=[p for p in pats if p != pattern], store=params.get("path"),
                 store_format=record.get("format"), time_s=(pats.get(pattern) or {}).get("total_s"))
        fmt = str(record.get("format") or "")
        if fmt.startswith("zarr"):
            f["zarr_format"] = int(fmt[-1])
            meta = record.get("array")  # what the workload saw (records written since issue 25)
            if not isinstance(meta, Mapping):
                meta = _store_meta(params.get("path"), params.get("variable"), snapshot, cwd)
                if meta and snapshot is None:
                    f["live_metadata"] = [str(params.get("path"))]
            if meta:
                f["compressor"] = meta.get("compressor", "none")
                f["dims"] = meta.get("dims")
    return f


def _itemsize(record: Mapping[str, Any]) -> int:
    if record.get("chunk_MB") and record.get("chunks"):
        n = math.prod(int(c) for c in record["chunks"])
        if n:
            return max(1, round(float(record["chunk_MB"]) * 1e6 / n))
    return 4  # the workloads write float32


def _store_meta(path: str | None, variable: str | None, snapshot: Mapping[str, Any] | None = None,
                cwd: str | None = None) -> dict | None:
    """The Zarr metadata of a read workload's variable (compressor, format): from the job's snapshot when
    given, else from the store when it is still there."""
    if not path or not variable:
        return None
    from ..analyzers.readers.arrays import array_meta

    if snapshot is not None:
        return array_meta(os.path.join(cwd or "", path, variable), snapshot.get("zarr") or {})
    return array_meta(os.path.join(path, variable))


def results_record(folder: str | os.PathLike) -> dict | None:
    """The workload results record an ``iodiag run`` job folder holds (``results.json``), or None."""
    p = Path(folder) / "results.json"
    try:
        rec = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and str(rec.get("schema", "")).startswith("iodiag.workload-result/") else None


def _job_folder(profile) -> Path | None:
    from ..analyzers.locate import job_folder  # finding a job in the store is the analyzers' business

    return job_folder(profile)


# ----------------------------------------------------------------------------------------------- jobs
def job_features(profile, *, metrics=None, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Features of a recorded job: measured ones from its profile, planned ones from its workload parameters.

    ``params`` is the workload's results record (or only its ``params``); when None, the results record in the
    job's folder is used if the job was recorded by ``iodiag run`` around an iodiag workload.  Without either the
    features are measured ones only, ``based_on`` says so and the access pattern is inferred from the counters
    where they can tell it (a job that wrote Zarr chunks converts; one that read the whole array reads it whole).
    """
    from ..analyzers.metrics import metrics_of

    m = metrics if metrics is not None else metrics_of(profile)
    measured = _measured(profile, m)
    record: Mapping[str, Any] | None = None
    folder = _job_folder(profile)
    found = results_record(folder) if folder else None  # a file of the job folder: part of the job
    if params is not None:
        record = params if "workload" in params else None
        if record is None:
            wl = _workload_of_params(params)
            # the command's parameters say which workload ran; its results record, when the run left one in the
            # job folder, also has the array's shape and the phase timings
            record = found if found is not None and found.get("workload") == wl else {"workload": wl,
                                                                                        "params": dict(params)}
    else:
        record = found
    if record is not None and record.get("shape"):
        f = planned_features(record, snapshot=profile.job.snapshot, cwd=(profile.job.metadata or {}).get("cwd"))
    else:
        known = record.get("workload") if record is not None else None
        f = _from_measured(profile, measured, workload=known)
        if record is not None:
            f["params"] = dict(record.get("params") or {})
            if f["params"]:  # the command's parameters are known, its results record is not (a killed or failed run)
                f["based_on"] = BASED_ON_PARAMS_NO_RECORD
    f["measured"] = measured
    for k in ("fs_type", "lustre_stripe_count", "lustre_stripe_size"):
        if measured.get(k) is not None:
            f[k] = measured[k]
    f["missing"] = [k for k in ("workload", "pattern", "array_mb") if f.get(k) is None]
    f["wall_s"] = measured.get("runtime_s")
    # the trained phase from the results record here; an estimate from the profile only when asked
    # (``estimated_phase``: the engine does, for a job the tree advises)
    f["phase_s"], f["phase_from"] = recorded_phase(record, f)
    live = list(dict.fromkeys(f.pop("live_metadata", []) + live_stores(profile)))
    if live:
        f["based_on"] = str(f.get("based_on") or BASED_ON_MEASURED) + live_note(live)
    return f


def recorded_phase(record: Mapping[str, Any] | None, f: Mapping[str, Any]) -> tuple[float | None, str]:
    """(seconds, how found) of the part of the job the trained model's ratio is for (a conversion's write phase,
    a read's pattern time) from the workload's results record; (None, "") without one."""
    if record is not None and record.get("shape"):
        if f.get("workload") == "convert":
            w = (record.get("timings_s") or {}).get("write")
            if w is not None:
                return float(w), "the write phase in the job's results record"
        elif f.get("time_s") is not None:
            return float(f["time_s"]), f"the {f.get('pattern')} pattern's time in the job's results record"
    return None, ""


def estimated_phase(profile) -> tuple[float | None, str]:
    """(seconds, how found) of the trained phase of a job without a results record, from its profile: the span of
    the Dask task stream's compute tasks (a Dask job), else the span of the reads and writes of the job's data
    files (first start to last end); (None, why) when neither is known."""
    t = profile.tasks
    if len(t):
        comp = t["phase"].astype(str) == "compute"
        if comp.any():
            span = float(t["end_s"][comp].max() - t["start_s"][comp].min())
            if span > 0:
                return span, "estimated: the span of the Dask task stream's compute tasks (no results record)"
    span = _io_span(profile)
    if span:
        return span, "estimated: the span of the reads and writes of the job's data files (no results record)"
    return None, "no results record, no Dask task stream and no timed I/O"


def _data_file_ids(profile):
    """The file ids of the job's data: its Zarr stores and NetCDF/HDF5 files, else every file but Python's own
    (modules, extensions) and /proc, /sys, /dev (a Python program reads its imports from the first second on:
    they are not the phase a data layout changes)."""
    import numpy as np

    from ..analyzers.zarrpath import path_kind

    f = profile.files
    if not len(f):
        return np.zeros(0, dtype="i8")
    paths = [str(p) for p in f["path"].tolist()]
    kinds = [path_kind(p) for p in paths]
    data = [k in ("zarr-chunk", "netcdf-hdf5") or ".zarr/" in p for p, k in zip(paths, kinds)]
    if not any(data):
        data = [k != "python-import" and not p.startswith(("/proc/", "/sys/", "/dev/")) for p, k in zip(paths, kinds)]
    return np.asarray(f["file_id"])[np.asarray(data, dtype=bool)]


def _io_span(profile) -> float | None:
    """First read/write start to last read/write end of the job's data files (``_data_file_ids``), over every
    process: from the traced operations when there are any, else from the counters' first-read/write and
    last-read/write timestamps (relative to each log's start)."""
    import numpy as np

    from ..analyzers.batches import process_batches
    from ..profile import OP

    ids = _data_file_ids(profile)
    if not len(ids):
        return None
    if profile.has_dxt:  # folded over each process's bounded batches: a large trace is never held whole
        lo, hi = np.inf, -np.inf
        for batches in process_batches(profile.ops, ("op", "file_id", "start_s", "end_s")):
            for b in batches:
                rw = (b["op"] <= OP["write"]) & np.isin(b["file_id"], ids)
                if rw.any():
                    lo, hi = min(lo, float(b["start_s"][rw].min())), max(hi, float(b["end_s"][rw].max()))
        if hi >= lo:
            return hi - lo
    p = profile.processes
    if not len(p):
        return None
    base = np.zeros(int(p["log"].max()) + 1)
    base[p["log"]] = p["start_s"]
    lo, hi = [], []
    for mod in ("POSIX", "STDIO"):
        t = profile.module(mod)
        if t is None:
            continue
        for word in ("READ", "WRITE"):
            s, e = t.get(f"{mod}_F_{word}_START_TIMESTAMP"), t.get(f"{mod}_F_{word}_END_TIMESTAMP")
            if s is None or e is None:
                continue
            ok = (e > 0) & (e >= s) & np.isin(t["file_id"], ids)
            if ok.any():
                b = base[t["log"][ok]]
                lo.append(float((b + s[ok]).min()))
                hi.append(float((b + e[ok]).max()))
    return max(hi) - min(lo) if lo else None


def live_stores(profile) -> list[str]:
    """The Zarr stores whose metadata this profile read live at report time (a job without a snapshot)."""
    if profile.job.arrays_from != "live":
        return []
    return list(dict.fromkeys(os.path.dirname(a["path"]) for a in profile.job.arrays or []))


def live_note(stores: Sequence[str]) -> str:
    """What ``based_on`` adds when array metadata did not come with the job."""
    shown = ", ".join(stores[:3]) + (f" and {len(stores) - 3} more" if len(stores) > 3 else "")
    return f"; array metadata read live from {shown} at report time (not recorded with the job)"


def _workload_of_params(params: Mapping[str, Any]) -> str | None:
    if "src" in params and "dst" in params:
        return "convert"
    if "path" in params and "patterns" in params:
        return "read"
    return None


def _measured(profile, m) -> dict[str, Any]:
    """Numbers the counters and the task stream give, whatever the workload."""
    import numpy as np

    from ..analyzers.summary import job_totals
    from ..analyzers.tasktime import dask_time_of
    from ..analyzers.timemodel import time_model_of

    out: dict[str, Any] = {"nprocs": int(m.nprocs), "runtime_s": profile.job.runtime_s}
    tot = job_totals(profile)
    rb, wb, ro, wo = tot.bytes_read, tot.bytes_written, tot.reads, tot.writes
    out.update(bytes_read=float(rb), bytes_written=float(wb), reads=float(ro), writes=float(wo),
               mean_read_bytes=float(rb / ro) if ro else None, mean_write_bytes=float(wb / wo) if wo else None,
               files=tot.files,
               meta_share=float(m.meta_s / m.total_io_s) if m.total_io_s > 0 else None)
    tm = time_model_of(profile)
    out["io_share"] = tm.io_share
    dt = dask_time_of(profile)
    if dt is not None:
        out.update(dask_tasks=int(dt.tasks), task_median_s=float(dt.task_median_s), dask_workers=int(dt.workers),
                   dask_threads=int(dt.threads))
    fs = _fs_of(profile, [os.path.dirname(a["path"]) for a in (profile.job.arrays or [])])
    if fs:
        out["fs_type"] = fs
    lus = profile.module("LUSTRE")
    if lus is not None and len(lus):
        out["lustre_stripe_count"] = int(np.median(lus["stripe_count"]))
        out["lustre_stripe_size"] = int(np.median(lus["stripe_size"]))
    arrays = profile.job.arrays or []
    out["zarr_arrays"] = len(arrays)
    return out


def _fs_of(profile, stores: Sequence[str]) -> str | None:
    """The file system the data lives on: the most common type among the files inside the job's Zarr stores,
    else among all its files (Python's own modules, /proc and the like are read by every job; a store says
    where the data is)."""
    if not len(profile.files):
        return None
    paths, kinds = profile.files["path"].tolist(), profile.files["fs_type"].tolist()
    ok = [(str(p), str(k)) for p, k in zip(paths, kinds) if k and str(k) not in ("None", "unknown", "")]
    inside = [k for p, k in ok if any(p.startswith(s.rstrip("/") + "/") for s in stores)]
    pick = inside or [k for _, k in ok]
    return max(sorted(set(pick)), key=pick.count) if pick else None


def _why_no_arrays(profile) -> str:
    if profile.job.snapshot is None:  # a job without a snapshot (or logs given directly): the stores as they are now
        return "the job touched no Zarr store that is still readable here"
    if not len(profile.files):
        return "no file-level I/O was recorded"
    if any(".zarr" in str(p) for p in profile.files["path"].tolist()):
        return "the job's snapshot holds none of the Zarr arrays it touched"
    return "the job touched no Zarr array"


def _from_measured(profile, measured: Mapping[str, Any], workload: str | None = None) -> dict[str, Any]:
    """Scenario and setting from measurements alone: the largest Zarr array the job touched and its I/O.
    ``workload``: the kind the job's command says it is (a conversion killed before it wrote a quarter of the
    array is still a conversion, never advised as a read)."""
    f: dict[str, Any] = {"based_on": BASED_ON_MEASURED, "workload": workload,
                         "pattern": "conversion" if workload == "convert" else None}
    arrays = profile.job.arrays or []
    if not arrays:
        f["why_unknown"] = f"no Zarr array metadata ({_why_no_arrays(profile)})"
        return f
    a = max(arrays, key=lambda x: nbytes(x["shape"], x["itemsize"]))
    f.update(_geometry(a["shape"], a["itemsize"], a["chunks"]))
    f["store"] = os.path.dirname(a["path"])
    if a.get("compressor"):
        f["compressor"] = a["compressor"]
    if a.get("zarr_format"):
        f["zarr_format"] = int(a["zarr_format"])
    f["dims"] = a.get("dims")
    arr_bytes = nbytes(a["shape"], a["itemsize"])
    wrote, read = float(measured.get("bytes_written") or 0), float(measured.get("bytes_read") or 0)
    # a conversion writes the array (stored bytes can be smaller when compressed, hence the margin)
    if workload == "read" and read <= 0:
        f["why_unknown"] = "the read command's run read nothing (did it finish?)"
    elif workload is not None and workload != "read" or workload is None and wrote >= 0.25 * arr_bytes:
        f.update(workload="convert", pattern="conversion")
        if measured.get("dask_workers"):
            f["workers"] = int(measured["dask_workers"])
            f["threads"] = max(1, int(measured.get("dask_threads") or 1) // max(1, int(measured["dask_workers"])))
    elif read > 0:
        f["workload"] = "read"
        if read >= 0.5 * arr_bytes:
            f["pattern"] = "whole"
        else:
            f["why_unknown"] = (f"the job read {fmt_bytes(read, si=True)} of a {fmt_bytes(arr_bytes, si=True)} array: counters "
                                "alone cannot tell a time slice from a point series")
    return f


def scenario_row(workload: str, f: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario inputs of a workload's trees, from features (KeyError when one is missing)."""
    return {k: f[k] for k in SCENARIO_INPUTS[workload]}


def setting_row(workload: str, f: Mapping[str, Any]) -> dict[str, Any]:
    return {k: f[k] for k in SETTING_INPUTS[workload]}


__all__ = ["FEATURES_VERSION", "SCENARIO_INPUTS", "SETTING_INPUTS", "LAYOUTS", "BASED_ON_PARAMS",
           "BASED_ON_MEASURED", "job_features", "planned_features", "results_record", "layout_of",
           "layout_chunks", "chunks_for_mb", "scenario_row", "setting_row", "live_stores", "live_note",
           "recorded_phase", "estimated_phase"]
