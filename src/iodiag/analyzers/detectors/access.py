"""Access-pattern checks: random-access, misaligned, redundant-read.

``random-access`` uses Darshan's definition (an op whose offset is below the
end of the previous one is not sequential) and, with a complete DXT trace,
discounts a constant backward step (a strided sweep that wraps) and re-reads
of the same offset: those have cheaper fixes than random I/O.
"""

from __future__ import annotations

import numpy as np

from ...config import Config
from ...findings import Finding, FindingSpec
from ...profile import JobProfile
from ...units import fmt_bytes, fmt_pct
from ..metrics import (col, group_sum, isin, level_total, lustre_stripe, merge_counts, metrics_of, mode_of,
                       module_sums, on_parallel_fs, ops_group_chunks, pcol, posix_reopens, previous_rows,
                       std_file_ids)
from ._common import file_cost, finding, top_files
from ..context import job_context
from .layers import file_layers, mpiio_calls, rmw_files, rmw_ids


def _per_file(profile: JobProfile, names: list[str], fidx, n) -> list[np.ndarray]:
    return [group_sum(fidx, pcol(profile, "POSIX", k, "f8"), n) for k in names]


def _may_random(profile: JobProfile, cfg: Config) -> bool:
    """A file's non-sequential ops are at most its reads + writes, at most the job's: fewer than min_ops, no hit."""
    tot = module_sums(profile, "POSIX")
    return tot.get("POSIX_READS", 0.0) + tot.get("POSIX_WRITES", 0.0) >= cfg.access.min_ops


def _may_misalign(profile: JobProfile, cfg: Config) -> bool:
    """No file can have min_ops misaligned requests when the whole job has fewer."""
    return module_sums(profile, "POSIX").get("POSIX_FILE_NOT_ALIGNED", 0.0) >= cfg.access.min_ops


def _dxt_random(profile: JobProfile, fids: np.ndarray) -> tuple[int, int]:
    """(random ops, ops) of POSIX reads/writes on these files, after removing consecutive/strided/repeat steps."""
    n = n_back = 0
    steps: dict[int, int] = {}
    for t, same, prev in ops_group_chunks(profile, lambda t: isin(t["file_id"], fids)):  # bounded batches
        off = t["offset"]
        p_off, p_ln = previous_rows(t, prev, "offset"), previous_rows(t, prev, "length")
        d = off - p_off
        back = same & (off < p_off + p_ln) & (d != 0)
        n += len(t)
        n_back += int(back.sum())
        merge_counts(steps, d[back])
    if not n_back:
        return 0, n
    return n_back - mode_of(steps)[1], n


def detect_random_access(profile: JobProfile, cfg: Config) -> list[Finding]:
    t = profile.module("POSIX")
    if t is None:
        return []
    if not _may_random(profile, cfg):
        return []
    c = cfg.access
    fids, fidx = np.unique(t["file_id"], return_inverse=True)
    r, w, sr, sw, rt, wt = _per_file(profile, ["POSIX_READS", "POSIX_WRITES", "POSIX_SEQ_READS", "POSIX_SEQ_WRITES",
                                         "POSIX_F_READ_TIME", "POSIX_F_WRITE_TIME"], fidx, len(fids))
    nonseq = (r - sr) + (w - sw)
    ops = r + w
    # the first access after a re-open starts where Darshan's offset restarted (0; it cannot see O_APPEND), not
    # past the previous access: a file whose backward steps its re-opens explain (opened around every access) is
    # re-opened, not read or written at random (metadata-storm covers the opens).  Each process's first open of
    # a file is no re-open.  A file that still hits keeps Darshan's counts.
    reopen_f = group_sum(fidx, posix_reopens(profile), len(fids))
    beyond = np.maximum(nonseq - reopen_f, 0.0)
    hit = (beyond >= c.min_ops) & (beyond >= c.random_share * np.maximum(ops, 1))
    hit &= ~isin(fids, std_file_ids(profile))  # a terminal or pipe has no offsets to sort
    if not hit.any():
        return []
    m = metrics_of(profile)
    n_nonseq, n_ops = int(nonseq[hit].sum()), int(ops[hit].sum())
    ev = {"non_sequential_ops": n_nonseq, "ops": n_ops, "non_sequential_share": n_nonseq / max(n_ops, 1),
          "non_sequential_reads": int((r - sr)[hit].sum()), "non_sequential_writes": int((w - sw)[hit].sum())}
    if len(profile.ops):  # a partial trace is still a sample of the pattern
        rnd, n = _dxt_random(profile, fids[hit])
        ev.update(dxt_random_ops=rnd, dxt_ops=n, dxt_complete=m.dxt_complete)
        if rnd < c.random_share * max(n, 1):
            return []  # the backward steps are one constant stride (a wrapping sweep): small-io covers it
        n_nonseq = rnd
    cost_f = (rt * (r - sr) / np.maximum(r, 1) + wt * (w - sw) / np.maximum(w, 1)) * hit
    return [finding(cfg, profile, RANDOM_ACCESS.id, f"{fmt_pct(ev['non_sequential_share'])} of {n_ops:,} accesses jump backwards (random)",
                    **file_cost(profile, fids, cost_f), evidence=ev,
                    facts={"backward_ops": n_nonseq},
                    files=top_files(profile, fids, cost_f, cfg.report.top_files))]


def _collective(calls: dict[str, int]) -> bool:
    """Whether collective MPI-IO calls accessed the files (``mpiio_calls``)."""
    return calls["collective_reads"] + calls["collective_writes"] > 0


def detect_misaligned(profile: JobProfile, cfg: Config) -> list[Finding]:
    t = profile.module("POSIX")
    if t is None:
        return []
    if not _may_misalign(profile, cfg):
        return []
    c = cfg.access
    fids, fidx = np.unique(t["file_id"], return_inverse=True)
    r, w, na, br, bw, rt, wt = _per_file(profile, ["POSIX_READS", "POSIX_WRITES", "POSIX_FILE_NOT_ALIGNED",
                                             "POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN", "POSIX_F_READ_TIME",
                                             "POSIX_F_WRITE_TIME"], fidx, len(fids))
    # a LUSTRE record proves a parallel file system even when an obfuscated name hides the mount
    parallel = on_parallel_fs(profile, fids, c.parallel_fs)
    ops = r + w
    # the reads of a read-modify-write are the MPI-IO layer's (that finding costs them): the mean request and
    # the time are the program's own; the counter of misaligned requests does not split reads from writes
    own = ~isin(fids, rmw_ids(profile, cfg))
    mean = (br * own + bw) / np.maximum(r * own + w, 1)
    rt = rt * own
    # small requests are always misaligned; small-io owns them
    hit = parallel & (na >= c.min_ops) & (na >= c.alignment_share * np.maximum(ops, 1)) & (mean >= cfg.small_io.size_bytes)
    if not hit.any():
        return []
    m = metrics_of(profile)
    align = np.zeros(len(fids))
    np.maximum.at(align, fidx, col(t, "POSIX_FILE_ALIGNMENT", "f8"))
    ranks = np.zeros(len(fids))
    ranks[np.searchsorted(fids, m.file_ids[np.isin(m.file_ids, fids)])] = m.file_ranks[np.isin(m.file_ids, fids)]
    # a misaligned request of s bytes shares a partial stripe/lock of A bytes with its neighbour at each end:
    # about A/s of it is extra work (all of it when s < A); a lone writer pays a fifth of that (no lock ping-pong)
    stripe = lustre_stripe(profile, fids)[0]
    a_f = np.where(stripe != 0, stripe, align)
    factor = np.minimum(1.0, a_f / np.maximum(mean, 1)) * np.where(ranks >= 2, 1.0, 0.2)
    cost_f = (rt + wt) * na / np.maximum(ops, 1) * factor * hit
    i = int(np.argmax(cost_f))
    a = int(a_f[i])
    ev = {"misaligned_ops": int(na[hit].sum()), "ops": int(ops[hit].sum()), "alignment_bytes": a,
          "lustre_stripe_bytes": int(stripe[i]), "mean_request_bytes": float(mean[i]),
          "files": int(hit.sum())}
    return [finding(cfg, profile, MISALIGNED.id, f"{int(na[hit].sum()):,} of {int(ops[hit].sum()):,} requests are not aligned to "
                    f"{fmt_bytes(a)} file-system blocks", **file_cost(profile, fids, cost_f), evidence=ev,
                    facts={"layers": file_layers(profile, fids[hit]),  # the advice names the top-most one
                           "collective": _collective(mpiio_calls(profile, fids[hit])),
                           "written": bool(bw[hit].sum() > 0)},
                    files=top_files(profile, fids, cost_f, cfg.report.top_files))]


def _may_reread(profile: JobProfile, cfg: Config) -> bool:
    """The per-file test of detect_redundant_read without the level table: the POSIX then STDIO records
    are the level rows, grouped and summed with the same expressions as metrics_of (same numbers); a few
    records are grouped in Python floats (the same operations in the same order)."""
    c = cfg.access
    if level_total(profile, "bytes_read") < c.redundant_min_bytes:
        return False
    mods = [mod for mod in ("POSIX", "STDIO") if profile.module(mod) is not None]
    get = lambda mod, k: pcol(profile, mod, f"{mod}_{k}")  # noqa: E731
    if sum(len(profile.module(mod)) for mod in mods) <= 64:
        acc: dict[int, list[float]] = {}
        for mod in mods:
            cols = [get(mod, k).tolist() for k in ("BYTES_READ", "BYTES_WRITTEN", "MAX_BYTE_READ", "MAX_BYTE_WRITTEN")]
            for fid, r, w, mr, mw in zip(profile.module(mod)["file_id"].tolist(), *cols):
                a = acc.setdefault(fid, [0.0, 0.0, 0.0])
                a[0], a[1], a[2] = a[0] + r, a[1] + w, max(a[2], max(mr, mw) + 1.0)
        return any(br + bw != 0 and size > 0 and br >= c.redundant_min_bytes and br / max(size, 1) >= c.redundant_factor
                   for br, bw, size in acc.values())
    fids, fidx = np.unique(np.concatenate([profile.module(mod)["file_id"] for mod in mods]), return_inverse=True)
    cat = lambda k: np.concatenate([get(mod, k) for mod in mods])  # noqa: E731
    br = group_sum(fidx, cat("BYTES_READ").astype("f8"), len(fids))
    bw = group_sum(fidx, cat("BYTES_WRITTEN").astype("f8"), len(fids))
    size = np.zeros(len(fids))
    np.maximum.at(size, fidx, np.maximum(cat("MAX_BYTE_READ"), cat("MAX_BYTE_WRITTEN")) + 1.0)
    size[(br + bw) == 0] = 0
    return bool(((size > 0) & (br >= c.redundant_min_bytes) & (br / np.maximum(size, 1) >= c.redundant_factor)).any())


_NETCDF_NAMES = (".nc", ".nc4", ".cdf", ".netcdf")
NC_PROBE_BYTES = 4 << 20  # netCDF-C's nc_open reads up to this much of the file in one fread (NC_infermodel)


def _open_probe(profile: JobProfile, fids: np.ndarray) -> dict:
    """The bytes of the re-read files that netCDF-C's open reads to infer the format: nc_open (NC_infermodel ->
    readmagic) fopens the file and freads up to 4 MiB of it at every open, so a NetCDF file opened n times is read
    n times over whatever the program asks.  STDIO records of NetCDF-named files with one fread per fopen, each
    at most 4 MiB: {"probe_bytes", "probe_opens"}; {} when there are none."""
    t = profile.module("STDIO")
    if t is None or not len(t) or not len(fids):
        return {}
    paths = profile.path_of()
    rows = isin(t["file_id"], fids) & np.array([str(paths.get(int(f), "")).lower().endswith(_NETCDF_NAMES)
                                                 for f in t["file_id"].tolist()], dtype=bool)
    reads, opens = pcol(profile, "STDIO", "STDIO_READS")[rows], pcol(profile, "STDIO", "STDIO_OPENS")[rows]
    nbytes = pcol(profile, "STDIO", "STDIO_BYTES_READ")[rows]
    probe = (reads > 0) & (reads <= opens) & (nbytes <= reads * NC_PROBE_BYTES)
    if not probe.any():
        return {}
    return {"probe_bytes": float(nbytes[probe].sum()), "probe_opens": int(opens[probe].sum())}


def detect_redundant_read(profile: JobProfile, cfg: Config) -> list[Finding]:
    c = cfg.access
    if not _may_reread(profile, cfg):
        return []
    m = metrics_of(profile)
    fs = m.file_stats
    if not len(m.file_ids):
        return []
    br, size = fs["bytes_read"], fs["size_bytes"]
    factor = br / np.maximum(size, 1)
    hit = (size > 0) & (br >= c.redundant_min_bytes) & (factor >= c.redundant_factor)
    hit &= ~rmw_files(profile, cfg)  # reads the MPI-IO layer made to patch its writes are read-modify-write
    if not hit.any():
        return []
    cost_f = fs["read_s"] * (1 - 1 / np.maximum(factor, 1)) * hit
    i = int(np.argmax(np.where(hit, br - size, 0)))
    ev = {"files": int(hit.sum()), "bytes_read": float(br[hit].sum()), "file_bytes": float(size[hit].sum()),
          "read_amplification": float(br[hit].sum() / size[hit].sum()), "worst_file_amplification": float(factor[i]),
          "worst_file_readers": int(m.file_ranks[i])}
    return [finding(cfg, profile, REDUNDANT_READ.id, f"{fmt_bytes(br[hit].sum())} read from files holding {fmt_bytes(size[hit].sum())} "
                    f"({ev['read_amplification']:.1f}x)", **file_cost(profile, m.file_ids, cost_f), evidence=ev,
                    facts={"kind": job_context(profile).kind, **_open_probe(profile, m.file_ids[hit])},
                    files=top_files(profile, m.file_ids, cost_f, cfg.report.top_files))]


RANDOM_ACCESS = FindingSpec(
    id="random-access", seq=4, detect=detect_random_access,
    fires="≥ `min_ops` and ≥ `random_share` of a file's accesses start before the previous one ended (Darshan's SEQ "
          "definition), not counting as many as the file's re-opens (Darshan's offset restarts at each open: a file "
          "opened around every access is re-opened, not random); with DXT, a constant backward step (a wrapping "
          "strided sweep) and same-offset re-reads are not random",
    cost="read/write time × random share",
    config_keys=("access.random_share", "access.min_ops"),
    admin_action="Recommend chunk shapes that match how data is read (e.g. time-series chunks for time-series reads) "
                 "and read-ahead friendly access in the user docs.",
)
MISALIGNED = FindingSpec(
    id="misaligned", seq=5, detect=detect_misaligned,
    fires="file on a parallel FS (`parallel_fs`), ≥ `min_ops` and ≥ `alignment_share` of requests unaligned, mean "
          "request ≥ the small-io size",
    cost="time × unaligned share × min(1, stripe / mean request) (× 0.2 for a single writer)",
    config_keys=("access.alignment_share", "access.min_ops", "access.parallel_fs", "small_io.size_bytes"),
    notes=("the advice names the top-most layer with records of those files (`layers.file_layers`): HDF5 → "
           "`H5Pset_alignment` (a file named `.h5`/`.hdf5`/`.he5` counts as HDF5 when the log has no HDF5 module; a "
           "job that only reads it also gets an `h5repack -t A -a A` copy), PnetCDF → hints "
           "`nc_var_align_size`/`nc_record_align_size` (`PNETCDF_HINTS`), MPI-IO → hint `striping_unit`, "
           "POSIX/STDIO → the program's own request sizes and offsets in multiples of the alignment",),
    admin_action="Publish the file system's block and stripe sizes and recommend aligned request sizes (HDF5 "
                 "H5Pset_alignment, MPI-IO striping hints).",
)
REDUNDANT_READ = FindingSpec(
    id="redundant-read", seq=7, detect=detect_redundant_read,
    fires="bytes read ≥ `redundant_factor` × the file's extent and ≥ `redundant_min_bytes`",
    cost="read time × (1 − 1/factor)",
    config_keys=("access.redundant_factor", "access.redundant_min_bytes"),
    admin_action="Tell these users to read inputs once (cache in memory or node-local storage) instead of re-reading "
                 "the same bytes.",
)
SPECS = (RANDOM_ACCESS, MISALIGNED, REDUNDANT_READ)
