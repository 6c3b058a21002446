"""The I/O layers a file went through, and traffic the application did not ask for.

``file_layers``: which interfaces (HDF5, PnetCDF, MPI-IO, POSIX, STDIO) recorded a set of files, top-most first,
so that advice names the layer the program itself calls (an HDF5 property, a PnetCDF hint, an MPI-IO hint, or the
program's own requests) instead of a layer beneath it.

``read-modify-write``: MPI-IO (ROMIO) data sieving on independent writes, the read step of collective buffering
on collective ones, and partial-block writes of libraries layered on it, read a file region, patch it in memory
and write it back.  The fingerprint in Darshan's counters: a file the application writes through MPI-IO while
reading (almost) nothing through MPI-IO, yet whose POSIX record reads many bytes, or reads many times (reads
of the holes past the end of a file being written return 0 bytes and still cost a request each).  With DXT, each such read is followed by a write of the same process at the same
offset and length, which is counted as evidence.  The cost is the POSIX read time on those files.
"""

from __future__ import annotations

import numpy as np

from ...config import Config
from ...findings import Finding, FindingSpec
from ...profile import OP, JobProfile
from ...units import fmt_bytes, fmt_pct
from ..metrics import files_column, group_sum, lustre_stripe, memo, metrics_of, pcol
from ._common import file_cost, finding, top_files, top_procs


# the interfaces a program calls, top-most first, with the Darshan modules that record each (the order of
# parallel._LEVELS: HDF5 and PnetCDF sit on MPI-IO, which sits on POSIX)
INTERFACES = (("HDF5", ("H5F", "H5D")), ("PnetCDF", ("PNETCDF_FILE", "PNETCDF_VAR")), ("MPI-IO", ("MPI-IO",)),
              ("POSIX", ("POSIX",)), ("STDIO", ("STDIO",)))


def file_layers(profile: JobProfile, fids: np.ndarray) -> tuple[str, ...]:
    """The interfaces with a record of any of these file ids, top-most first (e.g. ``("PnetCDF", "MPI-IO",
    "POSIX")``).  A dataset (H5D) or variable (PNETCDF_VAR) record names its file by ``file_rec_id``."""
    fids = np.asarray(fids)
    out = []
    for name, mods in INTERFACES:
        for mod in mods:
            t = profile.module(mod)
            if t is not None and np.isin(t["file_rec_id"] if "file_rec_id" in t else t["file_id"], fids).any():
                out.append(name)
                break
    return tuple(out)


def mpiio_calls(profile: JobProfile, fids: np.ndarray) -> dict[str, int]:
    """MPI-IO calls on these files, from their MPI-IO records: ``reads``, ``writes`` (independent, collective and
    non-blocking) and the ``collective_reads``/``collective_writes`` among them (all 0 without MPI-IO)."""
    mp = profile.module("MPI-IO")
    on = np.isin(mp["file_id"], fids) if mp is not None else None
    n = {k: (int(pcol(profile, "MPI-IO", f"MPIIO_{k}", "f8")[on].sum()) if on is not None else 0)
         for k in ("INDEP_READS", "COLL_READS", "NB_READS", "INDEP_WRITES", "COLL_WRITES", "NB_WRITES")}
    return {"reads": n["INDEP_READS"] + n["COLL_READS"] + n["NB_READS"],
            "writes": n["INDEP_WRITES"] + n["COLL_WRITES"] + n["NB_WRITES"],
            "collective_reads": n["COLL_READS"], "collective_writes": n["COLL_WRITES"]}


def on_lustre(profile: JobProfile, fids: np.ndarray) -> bool:
    """Whether any of these files is on Lustre: a LUSTRE record of it, or its mount's file-system type."""
    fs, found = files_column(profile, np.asarray(fids), "fs_type")
    return bool(lustre_stripe(profile, fids)[1].any() or any(str(v).lower() == "lustre" for v in fs[found].tolist()))


def rmw_files(profile: JobProfile, cfg: Config) -> np.ndarray:
    """Mask over ``metrics.file_ids``: files whose POSIX reads the layer above did not request: written through
    MPI-IO, read through MPI-IO at most ``rmw_upper_read_share`` of the POSIX bytes read, and read through POSIX
    either ``rmw_min_bytes`` or more, or ``rmw_min_reads`` times or more taking ``rmw_min_read_s`` (reads of the
    holes beyond the end of a file being written return nothing, yet each is a request; MPI-IO then issued at
    most the same share of the reads).  Other detectors leave these reads to read-modify-write."""
    c = cfg.access
    key = ("rmw_files", c.rmw_upper_read_share, c.rmw_min_bytes, c.rmw_min_reads, c.rmw_min_read_s)
    d = memo(profile)  # four detectors ask
    if key not in d:
        d[key] = _rmw_files(profile, c)
        d[key].setflags(write=False)
    return d[key]


def _rmw_files(profile: JobProfile, c) -> np.ndarray:
    m = metrics_of(profile)
    mp = profile.module("MPI-IO")
    out = np.zeros(len(m.file_ids), bool)
    if mp is None or not len(m.file_ids):
        return out
    pos = np.searchsorted(m.file_ids, mp["file_id"])
    ok = (pos < len(m.file_ids)) & (m.file_ids[np.minimum(pos, len(m.file_ids) - 1)] == mp["file_id"])
    up = {k: np.zeros(len(m.file_ids)) for k in ("r", "w", "ops")}
    np.add.at(up["r"], pos[ok], pcol(profile, "MPI-IO", "MPIIO_BYTES_READ", "f8")[ok])
    np.add.at(up["w"], pos[ok], pcol(profile, "MPI-IO", "MPIIO_BYTES_WRITTEN", "f8")[ok])
    for k in ("INDEP_READS", "COLL_READS", "NB_READS"):
        np.add.at(up["ops"], pos[ok], pcol(profile, "MPI-IO", f"MPIIO_{k}", "f8")[ok])
    fs = m.file_stats
    br, reads = fs["bytes_read"], fs["reads"]
    many = (reads >= c.rmw_min_reads) & (fs["read_s"] >= c.rmw_min_read_s) & (up["ops"] <= c.rmw_upper_read_share * reads)
    return (up["w"] > 0) & (up["r"] <= c.rmw_upper_read_share * br) & ((br >= c.rmw_min_bytes) | many) & (fs["writes"] > 0)


def rmw_ids(profile: JobProfile, cfg: Config) -> np.ndarray:
    """The file ids of ``rmw_files``."""
    return metrics_of(profile).file_ids[rmw_files(profile, cfg)]


def _dxt_pairs(profile: JobProfile, fids: np.ndarray) -> tuple[int, int]:
    """(POSIX reads followed by a write of the same process, file, offset and length; POSIX reads) in DXT."""
    o = profile.ops
    sel = (o["module"] == 0) & (o["op"] <= OP["write"]) & np.isin(o["file_id"], fids)
    if not sel.any():
        return 0, 0
    cols = [o[c][sel] for c in ("proc", "file_id", "offset", "length", "op", "start_s")]
    k = np.lexsort((cols[5], cols[3], cols[2], cols[1], cols[0]))
    pr, f, off, ln, op = (x[k] for x in cols[:5])
    pair = (pr[1:] == pr[:-1]) & (f[1:] == f[:-1]) & (off[1:] == off[:-1]) & (ln[1:] == ln[:-1]) \
        & (op[:-1] == OP["read"]) & (op[1:] == OP["write"])
    return int(pair.sum()), int((op == OP["read"]).sum())


def detect_read_modify_write(profile: JobProfile, cfg: Config) -> list[Finding]:
    if profile.module("MPI-IO") is None:
        return []
    hit = rmw_files(profile, cfg)
    if not hit.any():
        return []
    m = metrics_of(profile)
    fs = m.file_stats
    cost_f = fs["read_s"] * hit
    br, bw = float(fs["bytes_read"][hit].sum()), float(fs["bytes_written"][hit].sum())
    ev = {"files": int(hit.sum()), "posix_bytes_read": br, "posix_reads": int(fs["reads"][hit].sum()),
          "posix_bytes_written": bw, "posix_read_s": float(cost_f.sum()),
          "posix_read_share_of_posix_io_s": float(cost_f.sum() / max(m.total_io_s, 1e-12))}
    mp = profile.module("MPI-IO")
    upper = np.isin(mp["file_id"], m.file_ids[hit])
    ev["mpiio_bytes_read"] = float(pcol(profile, "MPI-IO", "MPIIO_BYTES_READ", "f8")[upper].sum())
    if len(profile.ops):
        pairs, reads = _dxt_pairs(profile, m.file_ids[hit])
        ev.update(dxt_reads_rewritten_same_extent=pairs, dxt_posix_reads=reads)
    # which ROMIO step reads: data sieving of independent writes, or the collective buffering of collective ones
    # (on Lustre its own hint turns it off); the advice picks the hint from these
    calls = mpiio_calls(profile, m.file_ids[hit])
    facts = {"mpiio": {"writes": calls["writes"], "collective_writes": calls["collective_writes"]},
             "lustre": on_lustre(profile, m.file_ids[hit]), "layers": file_layers(profile, m.file_ids[hit])}
    ev.update(mpiio_writes=calls["writes"], mpiio_collective_writes=calls["collective_writes"])
    pair_txt = (f"; {fmt_pct(ev['dxt_reads_rewritten_same_extent'] / max(ev['dxt_posix_reads'], 1))} of the traced reads "
                "are rewritten at the same offset and length" if ev.get("dxt_posix_reads") else "")
    n = int(hit.sum())
    what = (f"{fmt_bytes(br)} read back from {n} file(s)" if br >= cfg.access.rmw_min_bytes else
            f"{ev['posix_reads']:,} POSIX reads ({fmt_bytes(br)} returned) of {n} file(s)")
    # the processes whose POSIX reads of those files took longest (the aggregators, for collective buffering);
    # records Darshan reduced over all ranks (no single process) are left out
    px = profile.module("POSIX")
    rows = np.isin(px["file_id"], m.file_ids[hit]) & (px["proc"] >= 0)
    read_s = group_sum(px["proc"][rows], pcol(profile, "POSIX", "POSIX_F_READ_TIME", "f8")[rows].clip(0), m.nprocs)
    return [finding(cfg, profile, READ_MODIFY_WRITE.id,
                    f"{what} the program only writes (MPI-IO read {fmt_bytes(ev['mpiio_bytes_read'])}){pair_txt}",
                    **file_cost(profile, m.file_ids, cost_f), evidence=ev, facts=facts,
                    files=top_files(profile, m.file_ids, cost_f + 1e-12 * hit, cfg.report.top_files),
                    processes=top_procs(read_s, cfg.report.top_processes))]


READ_MODIFY_WRITE = FindingSpec(
    id="read-modify-write", seq=17, detect=detect_read_modify_write,
    fires="a file written through MPI-IO whose MPI-IO reads are ≤ `rmw_upper_read_share` of its POSIX reads, read "
          "through POSIX either ≥ `rmw_min_bytes`, or ≥ `rmw_min_reads` times taking ≥ `rmw_min_read_s` "
          "process-seconds (reads of the holes past the end of a file being written return 0 B, e.g. E3SM's "
          "306,537): ROMIO data sieving of independent writes, the read step of collective buffering, or "
          "partial-block writes reading what they write; with DXT, counts reads followed by a write of the same "
          "process, offset and length; `redundant-read` skips such files, and `small-io` and `misaligned` leave "
          "their reads out (counted once)",
    cost="POSIX read time on those files",
    config_keys=("access.rmw_upper_read_share", "access.rmw_min_bytes", "access.rmw_min_reads",
                 "access.rmw_min_read_s"),
    notes=("the hint by how the files are written: independent → `romio_ds_write=disable`; collective on Lustre → "
           "`romio_lustre_ds_in_coll=disable`; collective elsewhere → no hint turns it off (make each collective "
           "write's pieces cover its range); a \"What to change\" entry when a hint applies (through `PNETCDF_HINTS` "
           "for PnetCDF)",),
    admin_action="Recommend aligned, full-block writes (independent MPI-IO writes: data sieving off; collective "
                 "writes on Lustre: romio_lustre_ds_in_coll=disable; aligned HDF5 chunks).",
)
SPECS = (READ_MODIFY_WRITE,)
