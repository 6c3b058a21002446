"""The advice text of the metadata findings (metadata-storm, many-small-files): what the opens, stats and seeks
went to (Python imports, Zarr chunk files, NetCDF/HDF5 files, a file re-opened at every step) and how to have
fewer of them.  Part of recommend/rules.py's ``advise`` (its ``_ADVICE`` table), kept apart for size; pure.
"""

from __future__ import annotations

from typing import Mapping

from ..config import Config
from ..findings import Finding
from ..units import fmt_bytes, fmt_pct
from .chunks import merge_plan


_KIND_ADVICE = {
    "python-import": "is Python importing modules (.py/.pyc/.so) from {fs}: install the "
                     "environment on node-local disk or in a container/squashfs image, or pre-stage it",
    "zarr-chunk": "is Zarr chunk files (an open, a temp file and a rename per chunk): use fewer, larger chunks "
                  "or Zarr v3 sharding (see many-small-files)",
    "netcdf-hdf5": "is NetCDF/HDF5 files being opened and queried: open each file once per process and reuse "
                   "it",
}


def _metadata_storm(f: Finding, cfg: Config) -> str:
    ev, facts = f.evidence, f.facts
    opens = int(ev["opens_count"])
    advice = []
    for k in facts.get("kinds", ()):
        text = _KIND_ADVICE[k["kind"]].replace("{fs}", f"{k['fs'] or 'the file system'}")
        if k["kind"] == "zarr-chunk" and k.get("written") is False:  # read only: an open per chunk, no temp file
            text = text.replace("an open, a temp file and a rename per chunk", "an open per chunk read")
        if k["kind"] == "netcdf-hdf5" and facts.get("reopened"):
            text = text.split(":", 1)[0]  # the re-opened file's advice below says what to do, once
        elif k["kind"] == "netcdf-hdf5" and facts.get("python"):
            text += "; with xarray pass the opened Dataset to tasks instead of reopening per task"
        advice.append(f"{fmt_pct(k['share'])} of the metadata time ({k['files']:,} file{'' if k['files'] == 1 else 's'}) {text}")
    if facts.get("reopened"):
        r = facts["reopened"]
        if r.get("zarr") == "append":  # Zarr metadata: no handle to keep, every to_zarr call reads and rewrites it
            advice.append(f"{r['path']} is opened {r['opens']:,} times by process {r['process']}: it is part of a Zarr "
                          f"store that every to_zarr(append_dim=...) call reads and writes anew: append many steps "
                          f"per call (xr.concat a batch of steps, then one to_zarr)")
        elif r.get("zarr") == "read":
            advice.append(f"{r['path']} is opened {r['opens']:,} times by process {r['process']}: it is part of a Zarr "
                          f"store, read again at every open of the store (no handle to keep): open the store once "
                          f"(xr.open_zarr before the loop) and index the Dataset per step")
        else:
            advice.append(f"{r['path']} is opened {r['opens']:,} times by process {r['process']}: open it once "
                          f"per process and reuse the handle"
                          + (" (xarray: open_dataset once and pass the Dataset to tasks)"
                             if facts.get("python") and not r.get("writes") else ""))
    if facts.get("opened_files") is not None:
        opened, data_ops = facts["opened_files"], facts["data_ops"]
        if opened * 10 <= opens and facts.get("openers_per_file", 2) <= 1:  # each process re-opens its own files
            advice.append(f"{opens:,} opens of only {opened:,} file(s), each opened by one process only: every process "
                          f"re-opens its own file(s); open each once and keep the handle")
        elif opened * 10 <= opens and opens >= 10 * opened * facts.get("openers_per_file", 0):
            # more opens than files x processes: each process re-opens them (a collective open per step, ...)
            per = opens / max(opened * facts["openers_per_file"], 1)
            advice.append(f"{opens:,} opens of only {opened:,} file(s) by {facts['openers_per_file']:,} processes: "
                          f"each process opens them ~{per:,.0f} times; open once per process and keep the handle")
        elif opened * 10 <= opens:  # many opens of a few files: the files are not the problem
            advice.append(f"{opens:,} opens of only {opened:,} file(s): each process opens the same file(s); "
                          f"open once and share the handle (MPI-IO/HDF5 collective open, or one opener per node)")
        else:
            advice.append(f"{opens:,} opens for {data_ops:,} accesses: each file is opened for about one "
                          f"access; write fewer, larger files (consolidate, Zarr sharding, HDF5 container)")
    many = facts.get("many", {})
    if many.get("stats"):
        advice.append(f"{int(ev['stats_count']):,} stat calls: cache existence/size checks instead of asking the file system")
    if many.get("seeks"):
        advice.append(f"{int(ev['seeks_count']):,} seeks: use pread/pwrite with explicit offsets")
    if many.get("fsyncs"):
        advice.append(f"{int(ev['fsyncs_count']):,} fsync calls: sync once per file at the end")
    if not advice:
        advice.append("reduce open/stat traffic: keep files open, avoid per-op existence checks")
    return "; ".join(advice)


def _many_small_files(f: Finding, cfg: Config) -> str:
    ev, facts = f.evidence, f.facts
    if facts.get("zarr_grids"):
        return _zarr_advice(facts["zarr_grids"], facts["target_chunk_bytes"])
    n, k, after = facts["small_files"], facts["files_per_target"], facts["files_after"]
    kinds = "HDF5/NetCDF container, Zarr with sharding, or an archive"
    if after <= 1:  # all of them fit in one file of the target size: say so, not "~397,294 of today's files each"
        how = (f"pack them into one file ({kinds}): all {fmt_bytes(float(ev['total_bytes']))} of them fit in one "
               f"file of up to {fmt_bytes(facts['target_file_bytes'])}")
    else:
        how = (f"pack them into fewer files ({kinds}) of up to {fmt_bytes(facts['target_file_bytes'])}, "
               f"~{min(k, n):,} of today's files each")
    return (f"{n:,} files averaging {fmt_bytes(ev['mean_file_bytes'])} (median {fmt_bytes(float(ev['median_file_bytes']))}), "
            f"most in {facts['top_directory']} ({int(ev['files_in_top_directory']):,}): {how}; expected files {n:,} -> {after:,} "
            f"(opens -{fmt_pct(1 - after / n)})")


def _zarr_advice(grids: Mapping[str, dict], target: float) -> str:
    parts, before, after = [], 0, 0
    for name, g in sorted(grids.items(), key=lambda kv: -kv[1]["chunks"]):
        factors, new_bytes, files = merge_plan(g["grid"], g["mean_chunk_bytes"], target)
        before, after = before + g["chunks"], after + files
        if len(parts) < 2 and (any(f > 1 for f in factors) or not parts):  # not a 1-chunk coordinate as 2nd
            dims = " and ".join(f"x{f} along dimension {d} ({g['grid'][d]} chunks)" for d, f in enumerate(factors) if f > 1)
            parts.append(f"{name.rsplit('/', 1)[-1]}: chunk grid {tuple(g['grid'])} of ~{fmt_bytes(g['mean_chunk_bytes'])} "
                         f"per chunk file; rechunk {dims or 'not needed'} -> ~{fmt_bytes(new_bytes)} per chunk")
    return ("; ".join(parts) + f"; expected chunk files {before:,} -> {after:,} (-{fmt_pct(1 - after / max(before, 1))}), "
            "or keep the chunks and group them with Zarr v3 sharding (ShardingCodec) so one file holds many chunks")
