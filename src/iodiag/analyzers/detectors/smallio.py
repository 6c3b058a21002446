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
from ...findings import Finding, FindingSpec
from ...profile import OP, JobProfile
from ...units import fmt_bytes
from ..metrics import (SIZE_BUCKETS, group_sum, isin, lustre_stripe, merge_counts, metrics_of, mode_of,
                       module_sums, nprocs_of, ops_group_chunks, pcol, posix_reopens, previous_rows, size_hist,
                       small_bucket_count, std_file_ids)
from ..context import job_context
from ._common import file_cost, finding, proc_weights, top_files, top_procs
from .layers import file_layers, rmw_ids


def _dxt_pattern(profile: JobProfile, fids: np.ndarray, size: int, buf: int, not_read: np.ndarray) -> dict:
    n = n_consec = n_repeat = before = after = 0
    steps: dict[int, int] = {}
    open_len, open_bytes = 0, 0.0  # the run of consecutive ops still open at the end of the previous batch

    def small(t):  # the program's small ops: not the reads of files in ``not_read`` (read-modify-write's)
        keep = (t["length"] < size) & isin(t["file_id"], fids)
        return keep & ~((t["op"] == OP["read"]) & isin(t["file_id"], not_read)) if len(not_read) else keep

    # batches of the sorted small ops (bounded memory); a run or a group may continue into the next batch
    for t, same, prev in ops_group_chunks(profile, small):
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


def _layer_facts(profile: JobProfile, fids: np.ndarray, small_reads_f: np.ndarray, hist: np.ndarray) -> dict:
    """What the advice needs to name a change at the program's own layer, for the small-io files ``fids`` (sorted;
    ``small_reads_f`` their small POSIX reads, ``hist`` the small ops per size bucket): the interfaces on them, the
    commonest small size (bucket edges in bytes), whether they are on Lustre, the most processes sharing one of
    them (collective I/O merges requests across processes, not the calls of one), their STDIO reads+writes, and
    their MPI-IO calls: reads and writes, how many collective, and the small POSIX reads of files the program
    writes through MPI-IO but never reads through it (reads the MPI-IO layer issues itself, e.g. the
    read-modify-write of collective buffering)."""
    j = int(np.argmax(hist))
    m = metrics_of(profile)
    ranks = m.file_ranks[isin(m.file_ids, fids)]
    out = {"layers": file_layers(profile, fids), "small_size": (int(SIZE_BUCKETS[j - 1][1]) if j else 0, int(SIZE_BUCKETS[j][1])),
           "lustre": bool(lustre_stripe(profile, fids)[1].any()), "max_ranks_per_file": int(ranks.max()) if len(ranks) else 0}
    st = profile.module("STDIO")
    if st is not None:  # stdio's own reads/writes never reach the POSIX counters (Darshan does not see libc's calls)
        on = isin(st["file_id"], fids)
        out["stdio_ops"] = int(pcol(profile, "STDIO", "STDIO_READS", "f8")[on].sum() + pcol(profile, "STDIO", "STDIO_WRITES", "f8")[on].sum())
    mp = profile.module("MPI-IO")
    if mp is None:
        return out
    pos = np.minimum(np.searchsorted(fids, mp["file_id"]), len(fids) - 1)
    on = fids[pos] == mp["file_id"]
    g = {k: group_sum(pos[on], pcol(profile, "MPI-IO", f"MPIIO_{k}", "f8")[on], len(fids))
         for k in ("INDEP_READS", "COLL_READS", "NB_READS", "INDEP_WRITES", "COLL_WRITES", "NB_WRITES")}
    reads = g["INDEP_READS"] + g["COLL_READS"] + g["NB_READS"]
    writes = g["INDEP_WRITES"] + g["COLL_WRITES"] + g["NB_WRITES"]
    if not (reads + writes).any():
        return out
    out["mpiio"] = {"reads": int(reads.sum()), "writes": int(writes.sum()), "collective_reads": int(g["COLL_READS"].sum()),
                    "collective_writes": int(g["COLL_WRITES"].sum())}
    out["unasked_small_reads"] = int(small_reads_f[(writes > 0) & (reads == 0)].sum())
    return out


def _may_hit(profile: JobProfile, cfg: Config) -> bool:
    """No file can hold min_ops small ops when the whole job has fewer."""
    nb, _ = small_bucket_count(cfg.small_io.size_bytes)
    tot = module_sums(profile, "POSIX")
    return sum(tot.get(f"POSIX_SIZE_{k}_{b}", 0.0) for k in ("READ", "WRITE") for b, _ in SIZE_BUCKETS[:nb]) >= cfg.small_io.min_ops


def detect_small_io(profile: JobProfile, cfg: Config) -> list[Finding]:
    got = _detect_posix(profile, cfg)
    return got if got else _detect_stdio(profile, cfg)


def _detect_stdio(profile: JobProfile, cfg: Config) -> list[Finding]:
    """Small fread/fwrite calls: STDIO has no size histogram, so a file's calls are small when their mean size
    (bytes / calls) is below ``size_bytes``; each call is then counted small.  The stream's buffer merges them
    before the file system sees them (libc's own reads never reach Darshan's POSIX counters), but every call
    still costs a library call and a copy: the cost is the STDIO read/write seconds of those files, plus their
    STDIO metadata seconds when they hold ≥ ``min_ops`` fseek/ftell calls (positioning the stream per call)."""
    t = profile.module("STDIO")
    c = cfg.small_io
    if t is None:
        return []
    tot = module_sums(profile, "STDIO")
    if tot.get("STDIO_READS", 0.0) + tot.get("STDIO_WRITES", 0.0) < c.min_ops:
        return []
    reads, writes = pcol(profile, "STDIO", "STDIO_READS", "f8"), pcol(profile, "STDIO", "STDIO_WRITES", "f8")
    br, bw = pcol(profile, "STDIO", "STDIO_BYTES_READ", "f8"), pcol(profile, "STDIO", "STDIO_BYTES_WRITTEN", "f8")
    rt, wt = pcol(profile, "STDIO", "STDIO_F_READ_TIME", "f8"), pcol(profile, "STDIO", "STDIO_F_WRITE_TIME", "f8")
    seeks, meta = pcol(profile, "STDIO", "STDIO_SEEKS", "f8"), pcol(profile, "STDIO", "STDIO_F_META_TIME", "f8")
    fids, fidx = np.unique(t["file_id"], return_inverse=True)
    g = lambda a: group_sum(fidx, a, len(fids))  # noqa: E731
    r_f, w_f, br_f, bw_f, sk_f = g(reads), g(writes), g(br), g(bw), g(seeks)
    small_r = (r_f > 0) & (br_f < c.size_bytes * r_f)
    small_w = (w_f > 0) & (bw_f < c.size_bytes * w_f)
    n_f = r_f * small_r + w_f * small_w
    # a file smaller than a large request is read or written whole in a few calls whatever their size
    ext = np.zeros(len(fids))
    np.maximum.at(ext, fidx, np.maximum(pcol(profile, "STDIO", "STDIO_MAX_BYTE_READ", "f8"),
                                        pcol(profile, "STDIO", "STDIO_MAX_BYTE_WRITTEN", "f8")) + 1)
    hit = (n_f >= c.min_ops) & (ext >= c.size_bytes) & ~isin(fids, std_file_ids(profile))
    if not hit.any():
        return []
    positioning = hit & (sk_f >= c.min_ops)
    cost_f = (g(rt) * small_r + g(wt) * small_w + g(meta) * positioning) * hit
    nr, nw = int((r_f * small_r)[hit].sum()), int((w_f * small_w)[hit].sum())
    ev = {"small_threshold_bytes": c.size_bytes, "small_reads": nr, "small_writes": nw, "small_share_of_ops": 1.0,
          "files_with_small_io": int(hit.sum()), "consecutive_ops_counter": 0, "strided_ops_counter": 0,
          "top_stride_gap_bytes": 0, "layer": "STDIO",
          "stdio_mean_read_bytes": float(br_f[hit & small_r].sum() / max((r_f * small_r)[hit].sum(), 1)),
          "stdio_mean_write_bytes": float(bw_f[hit & small_w].sum() / max((w_f * small_w)[hit].sum(), 1)),
          "stdio_seeks": int(sk_f[hit].sum()), "stdio_time_s": float(cost_f.sum())}
    i = int(np.argmax(np.where(hit, n_f, -1)))
    top = top_files(profile, fids, np.where(hit, cost_f + 1e-12, 0), cfg.report.top_files)
    size = max(br_f[i] + bw_f[i], 0.0)
    facts = {"stdio": {"reads": nr, "writes": nw, "seeks": int(sk_f[hit].sum()),
                       "top_file": top[0] if top else None, "top_file_bytes": float(size),
                       "top_file_calls": int(n_f[i])},
             "buffer_bytes": c.buffer_bytes, "python": False}
    procs = proc_weights(profile, t, None, (reads + writes) * hit[fidx], nprocs_of(profile))
    mean = (br_f + bw_f)[hit].sum() / max(n_f[hit].sum(), 1)
    return [finding(cfg, profile, SMALL_IO.id, f"{nr + nw:,} STDIO reads/writes (fread/fwrite) of {fmt_bytes(mean)} on "
                    f"average, below {fmt_bytes(c.size_bytes)}", **file_cost(profile, fids, cost_f), evidence=ev,
                    facts=facts, files=top, processes=top_procs(procs, cfg.report.top_processes))]


def _detect_posix(profile: JobProfile, cfg: Config) -> list[Finding]:
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
    # the reads of a read-modify-write are the MPI-IO layer's, costed by that finding: not the program's small ops
    rmw = rmw_ids(profile, cfg)
    theirs = isin(t["file_id"], rmw) if len(rmw) else np.zeros(len(t), bool)
    if len(rmw):
        reads, sr, rt = np.where(theirs, 0, reads), np.where(theirs, 0, sr), np.where(theirs, 0.0, rt)
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
    consec_r = int(np.where(theirs, 0, t["POSIX_CONSEC_READS"].clip(0))[rows].sum())
    consec_w = int(t["POSIX_CONSEC_WRITES"].clip(0)[rows].sum())
    consec = consec_r + consec_w
    strides = sum(t[f"POSIX_STRIDE{i}_COUNT"].clip(0)[rows].sum() for i in range(1, 5))
    s1 = t["POSIX_STRIDE1_STRIDE"][rows]
    ev = {"small_threshold_bytes": edge, "small_reads": int(sr[rows].sum()), "small_writes": int(sw[rows].sum()),
          "small_share_of_ops": n_small / max(n_ops, 1), "files_with_small_io": int(hit.sum()),
          "consecutive_ops_counter": int(consec), "strided_ops_counter": int(strides),
          "top_stride_gap_bytes": int(s1[np.argmax(t["POSIX_STRIDE1_COUNT"][rows])]) if rows.any() else 0}
    pat = _dxt_pattern(profile, fids[hit], edge, c.buffer_bytes, rmw) if len(profile.ops) else {}
    if pat:
        pat["dxt_complete"] = m.dxt_complete  # a partial trace is a sample: its counts are lower bounds
    ev.update(pat)
    procs = proc_weights(profile, t, rows, (sr + sw)[rows], m.nprocs)
    top = top_files(profile, fids, np.where(hit, cost_f + 1e-12, 0), cfg.report.top_files)
    if top and top[0].lower().endswith((".nc", ".nc4", ".h5", ".hdf5", ".he5")):
        ev["array_file"] = top[0]
    hist = size_hist(t, "POSIX_SIZE_READ_")[rows & ~theirs, :nb].sum(0) + size_hist(t, "POSIX_SIZE_WRITE_")[rows, :nb].sum(0)
    # re-opens of those files (each process's first open of a file is none): a file opened around every access
    # shows no sequential pattern in Darshan's counters (its offset restarts at each open)
    facts = {"python": job_context(profile).python, "buffer_bytes": c.buffer_bytes, "posix_ops": n_ops,
             "reopens": int(posix_reopens(profile)[rows].sum()),
             "consecutive_reads": consec_r, "consecutive_writes": consec_w,
             **_layer_facts(profile, fids[hit], group_sum(fidx, sr.astype("f8"), len(fids))[hit], hist)}
    return [finding(cfg, profile, SMALL_IO.id, f"{n_small:,} of {n_ops:,} reads/writes are smaller than {fmt_bytes(edge)}",
                    **file_cost(profile, fids, cost_f * hit), evidence=ev, facts=facts,
                    files=top, processes=top_procs(procs, cfg.report.top_processes))]


SMALL_IO = FindingSpec(
    id="small-io", seq=1, detect=detect_small_io,
    fires="a file has ≥ `min_ops` reads+writes in Darshan size buckets wholly below `size_bytes` (100 KiB) and they "
          "are ≥ `min_share` of its ops",
    cost="read/write time × small share (by count)",
    config_keys=("small_io.size_bytes", "small_io.min_share", "small_io.min_ops", "small_io.buffer_bytes"),
    notes=("STDIO (no size histogram): a file's fread/fwrite calls are small when their mean size is below "
           "`size_bytes`, ≥ `min_ops` of them, on a file of ≥ `size_bytes`; cost = their STDIO read/write seconds (+ STDIO metadata seconds when "
           "≥ `min_ops` fseek/ftell); advice: read the file whole, a bigger stream buffer (setvbuf), larger calls",
           "with DXT (complete or a partial sample) the small ops are split into consecutive runs (→ requests after a "
           "`buffer_bytes` buffer), constant-stride (stride named), same-offset re-reads, random",
           "a HIGH finding of a program that is not Python gets a \"What to change\" entry at the layer it uses: small "
           "POSIX reads of files written but never read through MPI-IO → the MPI-IO layer's own read-modify-write "
           "(`romio_lustre_ds_in_coll=disable` for collective writes on Lustre, `romio_ds_write=disable` for "
           "independent ones); MPI-IO files shared by ≥ 2 processes → collective calls (HDF5 `H5Pset_dxpl_mpio`, "
           "PnetCDF `*_all`, `MPI_File_*_at_all`) and `romio_cb_read/write=enable` (through `PNETCDF_HINTS` for "
           "PnetCDF); otherwise requests of `buffer_bytes`: HDF5 chunk cache, `setvbuf` where STDIO calls dominate, "
           "the program's own buffer. Python programs get `open(..., buffering=)` for consecutive ops"),
    admin_action="Tell these users to buffer or aggregate I/O (collective MPI-IO, larger HDF5/Zarr chunks, a bigger "
                 "stdio buffer); document a recommended minimum request size.",
)
SPECS = (SMALL_IO,)
