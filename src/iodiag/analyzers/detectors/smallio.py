"""small-io: many requests below the size threshold, split by what would fix them.

Counters give, per file, how many reads/writes fall in Darshan's size buckets
below ``small_io.size_bytes`` and their share of the file's read/write time.
With a complete DXT trace the pattern of the small ops is measured exactly:
``consecutive`` (offset continues the previous op: a buffer merges them),
``strided`` (a constant offset step: read whole blocks or relayout), or
``random``.  Without DXT the same split comes from CONSEC/STRIDE counters.
"""

from __future__ import annotations

import numpy as np

from ...config import Config
from ...findings import Finding
from ...profile import JobProfile
from ..metrics import (SIZE_BUCKETS, fmt_bytes, group_sum, isin, merge_counts, metrics_of, mode_of, module_sums,
                       ops_group_chunks, previous_rows, size_hist, small_bucket_count, std_file_ids)
from ..context import job_context
from ._common import file_cost, finding, pct, top_files, top_procs


def _dxt_pattern(profile: JobProfile, fids: np.ndarray, size: int, buf: int) -> dict:
    n = n_consec = n_repeat = before = after = 0
    steps: dict[int, int] = {}
    open_len, open_bytes = 0, 0.0  # the run of consecutive ops still open at the end of the previous batch
    # batches of the sorted small ops (bounded memory); a run or a group may continue into the next batch
    for t, same, prev in ops_group_chunks(profile, lambda t: (t["length"] < size) & isin(t["file_id"], fids)):
        off, ln = t["offset"], t["length"]
        p_off, p_ln = previous_rows(t, prev, "offset"), previous_rows(t, prev, "length")
        consec = same & (off == p_off + p_ln)
        step = off - p_off
        other = same & ~consec
        repeat = other & (step == 0)
        merge_counts(steps, step[other & ~repeat])
        n += len(t)
        n_consec += int(consec.sum())
        n_repeat += int(repeat.sum())
        # runs of consecutive ops; with a buffer of `buf` bytes a run costs ceil(bytes / buf) requests.
        # run 0 of the batch continues the open run (empty when the first row starts a new one)
        run = np.cumsum(~consec)
        run_len = np.bincount(run)
        run_bytes = np.bincount(run, weights=ln)
        open_len += int(run_len[0])
        open_bytes += float(run_bytes[0])
        if len(run_len) > 1:
            if open_len > 1:
                before += open_len
                after += int(np.ceil(open_bytes / buf))
            done = slice(1, len(run_len) - 1)  # runs closed inside this batch
            multi = run_len[done] > 1
            before += int(run_len[done][multi].sum())
            after += int(np.ceil(run_bytes[done][multi] / buf).sum())
            open_len, open_bytes = int(run_len[-1]), float(run_bytes[-1])
    if not n:
        return {}
    if open_len > 1:
        before += open_len
        after += int(np.ceil(open_bytes / buf))
    stride, n_stride = mode_of(steps) if steps else (0, 0)
    return dict(dxt_small_ops=n, consecutive_ops=n_consec, strided_ops=n_stride, stride_bytes=stride,
                same_offset_ops=n_repeat, random_ops=n - n_consec - n_stride - n_repeat,
                ops_in_consecutive_runs=before, requests_after_buffering=after)


def _may_hit(profile: JobProfile, cfg: Config) -> bool:
    """No file can hold min_ops small ops when the whole job has fewer."""
    nb, _ = small_bucket_count(cfg.small_io.size_bytes)
    tot = module_sums(profile, "POSIX")
    return sum(tot.get(f"POSIX_SIZE_{k}_{b}", 0.0) for k in ("READ", "WRITE") for b, _ in SIZE_BUCKETS[:nb]) >= cfg.small_io.min_ops


def detect_small_io(profile: JobProfile, cfg: Config) -> list[Finding]:
    t = profile.module("POSIX")
    if t is None:
        return []
    if not _may_hit(profile, cfg):
        return []
    c = cfg.small_io
    nb, edge = small_bucket_count(c.size_bytes)
    reads, writes = t["POSIX_READS"].clip(0), t["POSIX_WRITES"].clip(0)
    sr = size_hist(t, "POSIX_SIZE_READ_")[:, :nb].sum(1)
    sw = size_hist(t, "POSIX_SIZE_WRITE_")[:, :nb].sum(1)
    rt, wt = t["POSIX_F_READ_TIME"].clip(0), t["POSIX_F_WRITE_TIME"].clip(0)
    cost_row = rt * sr / np.maximum(reads, 1) + wt * sw / np.maximum(writes, 1)
    fids, fidx = np.unique(t["file_id"], return_inverse=True)
    small_f = group_sum(fidx, (sr + sw).astype("f8"), len(fids))
    ops_f = group_sum(fidx, (reads + writes).astype("f8"), len(fids))
    hit = (small_f >= c.min_ops) & (small_f >= c.min_share * np.maximum(ops_f, 1))
    hit &= ~isin(fids, std_file_ids(profile))  # writes to a terminal or pipe are not file I/O to tune
    if not hit.any():
        return []
    m = metrics_of(profile)
    rows = hit[fidx]
    cost_f = group_sum(fidx, cost_row, len(fids))
    n_small, n_ops = int((sr + sw)[rows].sum()), int((reads + writes)[rows].sum())
    consec = (t["POSIX_CONSEC_READS"].clip(0) + t["POSIX_CONSEC_WRITES"].clip(0))[rows].sum()
    strides = sum(t[f"POSIX_STRIDE{i}_COUNT"].clip(0)[rows].sum() for i in range(1, 5))
    s1 = t["POSIX_STRIDE1_STRIDE"][rows]
    ev = {"small_threshold_bytes": edge, "small_reads": int(sr[rows].sum()), "small_writes": int(sw[rows].sum()),
          "small_share_of_ops": n_small / max(n_ops, 1), "files_with_small_io": int(hit.sum()),
          "consecutive_ops_counter": int(consec), "strided_ops_counter": int(strides),
          "top_stride_gap_bytes": int(s1[np.argmax(t["POSIX_STRIDE1_COUNT"][rows])]) if rows.any() else 0}
    pat = _dxt_pattern(profile, fids[hit], edge, c.buffer_bytes) if len(profile.ops) else {}
    if pat:
        pat["dxt_complete"] = m.dxt_complete  # a partial trace is a sample: its counts are lower bounds
    ev.update(pat)
    ev["_python"] = job_context(profile).python  # advice in the program's own terms (dropped from the evidence)
    procs = group_sum(np.clip(t["proc"][rows], 0, None), (sr + sw)[rows].astype("f8"), m.nprocs)
    top = top_files(profile, fids, np.where(hit, cost_f + 1e-12, 0), cfg.report.top_files)
    if top and top[0].lower().endswith((".nc", ".nc4", ".h5", ".hdf5", ".he5")):
        ev["array_file"] = top[0]
    return [finding(cfg, profile, "small-io", f"{n_small:,} of {n_ops:,} reads/writes are smaller than {fmt_bytes(edge)}",
                    **file_cost(profile, fids, cost_f * hit), evidence={k: v for k, v in ev.items() if k != "_python"},
                    recommendation=_advice(ev, pat, n_small, c.buffer_bytes),
                    files=top, processes=top_procs(procs, cfg.report.top_processes))]


def _advice(ev: dict, pat: dict, n_small: int, buf: int) -> str:
    """Advice per pattern; from the DXT trace when there is one, and from the counters for what a partial
    trace did not see (e.g. reads issued after the trace buffer filled)."""
    counters = dict(base=n_small, consec=ev["consecutive_ops_counter"], strided=ev["strided_ops_counter"],
                    stride=ev["top_stride_gap_bytes"], what="gap between accesses")
    parts: dict[str, str] = {}
    if pat:
        trace = dict(base=pat["dxt_small_ops"], consec=pat["consecutive_ops"], strided=pat["strided_ops"],
                     stride=pat["stride_bytes"], what="offset step", same=pat["same_offset_ops"],
                     before=pat["ops_in_consecutive_runs"], after=pat["requests_after_buffering"])
        _parts(trace, ev, buf, parts)
    if not pat or not pat.get("dxt_complete", True):
        _parts(counters, ev, buf, parts, random=not pat)  # counters cannot tell re-reads from random ones
    lead = (f"(DXT kept {pat['dxt_small_ops']:,} of {n_small:,} small ops; the rest is from counters) "
            if pat and not pat.get("dxt_complete", True) else "")
    if not parts:
        parts["random"] = f"{n_small:,} small ops show no sequential or strided pattern: aggregate them (MPI-IO " \
                          "collective buffering, a read cache, or larger chunks)"
    return lead + "; ".join(parts.values())


def _parts(n: dict, ev: dict, buf: int, parts: dict, random: bool = True) -> None:
    base = max(n["base"], 1)
    if n["consec"] >= 0.2 * base and "consec" not in parts:
        gain = (f"; expected small requests {n['before']:,} -> {n['after']:,} ({pct(1 - n['after'] / max(n['before'], 1))} "
                "fewer)" if n.get("after") else "")
        how = (f"open(..., buffering={buf})" if ev.get("_python") else f"a {fmt_bytes(buf)} buffer (setvbuf, or "
               "gather the pieces in memory)")
        parts["consec"] = (f"{n['consec']:,} small ops continue the previous offset: buffer them ({how}, or write "
                           f"whole {fmt_bytes(buf)} chunks / a larger Zarr/HDF5 chunk){gain}")
    if n["strided"] >= 0.2 * base and "strided" not in parts:
        parts["strided"] = (f"{n['strided']:,} small ops step through the file at a constant {n['what']} of {n['stride']:,} B "
                            "(strided, not random): read the whole strided region in large blocks and slice in memory, "
                            f"or rechunk/relayout so the fields read together are contiguous; each {n['stride']:,} B step "
                            "now costs one request")
        if ev.get("array_file"):
            how = ("request many steps at once (larger Dask chunks along that dimension, e.g. "
                   "open_dataset(chunks={'time': 24}))" if ev.get("_python") else
                   "read or write many steps per call (a larger hyperslab / start-count along that dimension)")
            parts["strided"] += (f"; {ev['array_file']} is NetCDF/HDF5: a {n['stride']:,} B step is one record/slab of the "
                                 f"variable, so each step is a separate request; {how} or rechunk the file "
                                 "(nccopy -c / h5repack -l)")
    if n.get("same", 0) >= 0.2 * base and "same" not in parts:
        parts["same"] = (f"{n['same']:,} small ops re-access the offset of the previous op (the same bytes again, typical "
                         "of HDF5/NetCDF metadata lookups): cache them (larger HDF5 metadata cache, "
                         "H5Pset_meta_block_size, or open the file once per process)")
    rnd = n["base"] - n["consec"] - n["strided"] - n.get("same", 0)
    if random and rnd >= 0.2 * base and "random" not in parts:
        parts["random"] = (f"{rnd:,} small ops have no sequential or strided pattern: aggregate them (MPI-IO "
                           "collective buffering, a read cache, or larger chunks)")
