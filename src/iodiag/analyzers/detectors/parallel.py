"""Across processes: straggler-process, rank-imbalance, inactive-ranks.

Skew findings cost wall time, not process-seconds: the job waits for its
slowest process.  Their ``est_cost_s`` is the excess of the slowest process
over the median one, in job seconds, and their severity its share of the run
like every finding's, so a straggler that doubles the run's I/O is "high" even
when it is one process of a thousand.  "I/O on the critical path" is the time
model's ``io_wall_s`` (analyzers/timemodel.py), the one definition of it.
"""

from __future__ import annotations

import numpy as np

from ...config import Config
from ...findings import Finding, FindingSpec
from ...profile import JobProfile
from ...units import fmt_bytes, fmt_pct
from ..batches import process_batches
from ..metrics import (col, file_paths, group_sum, isin, lustre_osts, median, metrics_of, nprocs_of, pcol, peer_mask,
                       robust_z, std_file_ids)
from ._common import finding, top_files
from ..timemodel import time_model_of

# highest interface first: the level at which the application itself asks for data
_LEVELS = (("H5D", "H5D"), ("PNETCDF_VAR", "PNETCDF_VAR"), ("MPI-IO", "MPIIO"), ("POSIX", "POSIX"), ("STDIO", "STDIO"))


def _proc_times(profile: JobProfile) -> np.ndarray:
    """Per-process I/O seconds: the time model's (``TimeModel.proc_io_s``, wall seconds over every layer: the
    POSIX level, MPI-IO time beyond the POSIX time beneath it, HDF5, PnetCDF, DFS; the union of a complete trace's
    intervals plus the metadata seconds it does not hold), so a process slow in MPI-IO is seen as one."""
    return np.asarray(time_model_of(profile).proc_io_s, "f8")


def _rows_of(profile: JobProfile, proc: int) -> tuple[np.ndarray, np.ndarray]:
    """Level rows of one process: its own records plus shared records naming it as the slowest rank (weighted by its share)."""
    lv = metrics_of(profile).level
    pr = profile.processes
    log = int(pr["log"][proc]) if proc < len(pr) else 0
    rank = int(pr["rank"][proc]) if proc < len(pr) else proc
    tot = lv["read_s"] + lv["write_s"] + lv["meta_s"]
    shared = (lv["proc"] < 0) & (lv["log"] == log) & (lv["slow_rank"] == rank)
    w = np.where(shared, np.divide(lv["slow_s"], tot, out=np.zeros(len(lv)), where=tot > 0).clip(0, 1), 1.0)
    return (lv["proc"] == proc) | shared, w


def detect_straggler_process(profile: JobProfile, cfg: Config) -> list[Finding]:
    c = cfg.stragglers
    if len(profile.processes) < c.min_processes:
        return []  # active processes are peers, at most one per process row
    m = metrics_of(profile)
    x = _proc_times(profile)
    active = (x > 0) & peer_mask(profile, m)
    if active.sum() < c.min_processes:
        return []
    z, med, mad = robust_z(x[active])
    excess = x[active] - med
    # a process that is slow because it carries more bytes is rank-imbalance, not a straggler
    b = m.proc_bytes[active]
    heavy = b >= cfg.access.imbalance_ratio * max(median(b), 1.0)
    slow = (z > c.mad_factor) & (excess >= max(c.min_excess_s, c.min_excess_share * med)) & ~heavy
    if not slow.any():
        return []
    procs = np.flatnonzero(active)[slow]
    order = np.argsort(-x[procs])
    procs = procs[order]
    worst = int(procs[0])
    lv = m.level
    tm = time_model_of(profile)
    mine, wgt = _rows_of(profile, worst)
    t_row = (lv["read_s"] + lv["write_s"] + lv["meta_s"]) * wgt
    split = {k: float((lv[k] * wgt)[mine].sum()) for k in ("read_s", "write_s", "meta_s")}
    ev = {"stragglers": int(len(procs)), "processes_with_io": int(active.sum()), "median_io_s": med, "mad_io_s": mad,
          "slowest_io_s": float(x[worst]), "slowest_robust_z": float(z[slow][order][0]),
          "slowest_excess_s": float(x[worst] - med), **{f"slowest_{k}": v for k, v in split.items()},
          "source": "dxt" if tm.basis == "ops" else "counters"}
    above = _above_posix_s(profile, tm, worst)
    ev.update({f"slowest_{k}": v for k, v in above.items() if v > 0})
    both = {**split, **above}
    what = max(both, key=both.get) if any(both.values()) else "I/O"
    what = _WHAT.get(what, what.replace("_s", ""))
    ost = _common_ost(profile, procs)
    ev.update(ost)
    ev.update(_finish_and_host(profile, procs, np.flatnonzero(active)))
    files = _files_of(profile, worst, lv["file_id"][mine], t_row[mine], cfg.report.top_files)
    # the job waits for its slowest process: its excess over the median (wall seconds already) is what it costs
    wall = float(x[worst] - med)
    return [finding(cfg, profile, STRAGGLER_PROCESS.id, f"{len(procs)} process(es) spend far longer in I/O than their peers "
                    f"(slowest {x[worst]:.2f} s vs median {med:.2f} s)", wall_s=wall, evidence=ev, files=files,
                    processes=[int(p) for p in procs[: cfg.report.top_processes]],
                    facts={"worst": worst, "what": what, "file": files[0] if files else None})]


_WHAT = {"mpiio_beyond_posix_s": "MPI-IO calls (beyond the POSIX I/O beneath them)",
         "upper_layers_beyond_s": "HDF5/PnetCDF/DFS calls"}


def _above_posix_s(profile: JobProfile, tm, proc: int) -> dict[str, float]:
    """The process's seconds in the layers above the POSIX level that its POSIX-level seconds do not hold
    (process-seconds, as the ``slowest_read_s``/``write_s``/``meta_s`` split): MPI-IO beyond its POSIX time, and
    what HDF5, PnetCDF and DFS/DAOS add beyond those two (``TimeModel.proc_layer_s``)."""
    out = {}
    posix = metrics_of(profile).proc_io_s
    mpiio = float(tm.proc_mpiio_wait_s[proc]) if len(tm.proc_mpiio_wait_s) > proc else 0.0
    out["mpiio_beyond_posix_s"] = mpiio
    if len(tm.proc_layer_s) > proc and len(posix) > proc:
        out["upper_layers_beyond_s"] = max(float(tm.proc_layer_s[proc]) - float(posix[proc]) - mpiio, 0.0)
    return out


def _files_of(profile: JobProfile, proc: int, fids: np.ndarray, secs: np.ndarray, k: int) -> list[str]:
    """The process's top files: per file the larger of its POSIX-level and its MPI-IO seconds (a layer's time
    holds the time of the layer beneath it: never their sum), so a process slow in MPI-IO names its MPI-IO files."""
    mp = profile.module("MPI-IO")
    if mp is not None:
        mine = mp["proc"] == proc
        if mine.any():
            from ..timemodel import module_row_times

            ids = np.concatenate([fids, mp["file_id"][mine].astype(fids.dtype)])
            uq, inv = np.unique(ids, return_inverse=True)
            low = np.bincount(inv[: len(fids)], weights=secs, minlength=len(uq))
            up = np.bincount(inv[len(fids):], weights=module_row_times(profile, "MPI-IO")[mine], minlength=len(uq))
            fids, secs = uq, np.maximum(low, up)
    return top_files(profile, fids, secs, k)


def _finish_and_host(profile: JobProfile, procs: np.ndarray, peers: np.ndarray) -> dict:
    """When the stragglers' last I/O ended (vs the median peer) and whether they share one host."""
    m = metrics_of(profile)
    start = profile.job.start_s or 0.0
    if m.dxt_complete:
        end = np.full(m.nprocs, -np.inf)
        for o in (b for parts in process_batches(profile.ops, ("proc", "end_s")) for b in parts):  # maxima: any grouping
            np.maximum.at(end, np.clip(o["proc"], 0, m.nprocs - 1), o["end_s"] - start)
    else:
        lv = m.level
        own = (lv["proc"] >= 0) & (lv["reads"] + lv["writes"] > 0)
        end = np.full(m.nprocs, -np.inf)
        np.maximum.at(end, lv["proc"][own], np.maximum(lv["read_end_s"], lv["write_end_s"])[own])
    end[end <= 0] = -np.inf
    out = {}
    ok = np.isfinite(end[peers])
    if ok.any() and np.isfinite(end[procs]).any():
        out = {"median_last_data_op_end_s": median(end[peers][ok]), "stragglers_last_data_op_end_s": float(np.nanmax(np.where(np.isfinite(end[procs]), end[procs], np.nan)))}
    hosts = profile.processes["host"][procs].astype(str) if len(profile.processes) else []
    if len(hosts) > 1 and all(hosts) and len(set(hosts)) == 1:
        out["stragglers_host"] = str(hosts[0])
    return out


def _common_ost(profile: JobProfile, procs: np.ndarray) -> dict:
    """The Lustre OST most over-represented among the stragglers' files."""
    lus = profile.module("LUSTRE")
    if lus is None or not len(procs):
        return {}
    strag = np.isin(lus["proc"], procs)
    if not strag.any():
        return {}
    row, ost = lustre_osts(profile)
    def count(mask):
        ids = ost[mask[row]]
        return np.bincount(ids, minlength=1) if len(ids) else np.zeros(1, "i8")
    a, b = count(strag), count(~strag)
    n = max(len(a), len(b))
    a, b = np.pad(a, (0, n - len(a))), np.pad(b, (0, n - len(b)))
    ratio = (a / max(strag.sum(), 1)) / ((b + 1) / max((~strag).sum(), 1))
    o = int(np.argmax(ratio))
    if a[o] < 2 or a[o] < 0.5 * strag.sum():
        return {}
    return {"suspect_ost": o, "suspect_ost_straggler_files": int(a[o]), "suspect_ost_other_files": int(b[o])}


def _data_bytes(profile: JobProfile, m) -> np.ndarray:
    """Bytes each process moved to and from files: stdin/stdout/stderr left out (a rank printing a log is not
    an I/O imbalance), and DFS bytes added (DFS over DAOS does not reach POSIX)."""
    b = np.asarray(m.proc_bytes, "f8").copy()
    lv = m.level
    if len(lv):
        std = file_paths(profile)[1][m.file_idx] & (lv["proc"] >= 0)
        if std.any():
            rb = (lv["bytes_read"] + lv["bytes_written"]).astype("f8")
            b -= np.bincount(lv["proc"][std], weights=rb[std], minlength=m.nprocs)[: m.nprocs]
    dfs = profile.module("DFS")
    if dfs is not None:
        own = dfs["proc"] >= 0
        db = col(dfs, "DFS_BYTES_READ", "f8") + col(dfs, "DFS_BYTES_WRITTEN", "f8")
        b += np.bincount(dfs["proc"][own], weights=db[own], minlength=m.nprocs)[: m.nprocs]
        if (~own).any():  # a shared DFS record: its bytes spread over the processes
            b += float(db[~own].sum()) / max(m.nprocs, 1)
    return np.maximum(b, 0.0)


def detect_rank_imbalance(profile: JobProfile, cfg: Config) -> list[Finding]:
    if len(profile.processes) < cfg.stragglers.min_processes:
        return []  # peers are at most one per process row
    m, c = metrics_of(profile), cfg.access
    peers = peer_mask(profile, m)
    if peers.sum() < cfg.stragglers.min_processes:
        return []
    b = np.where(peers, _data_bytes(profile, m), 0.0)
    if b.max() <= 0:
        return []
    med = median(b[peers])
    ratio = float(b.max() / med) if med > 0 else float("inf")
    if ratio < c.imbalance_ratio:
        return []
    heavy = np.flatnonzero(peers & (b >= c.imbalance_ratio * max(med, 1.0)))
    tm = time_model_of(profile)
    t = tm.proc_io_s[peers]  # wall seconds in I/O per process
    ev = {"max_bytes": float(b.max()), "median_bytes": med, "max_over_median": ratio if np.isfinite(ratio) else None,
          "heavy_processes": int(len(heavy)), "share_of_bytes_on_heavy": float(b[heavy].sum() / b.sum()),
          "max_io_s": float(t.max()), "median_io_s": median(t)}
    wall = float(t.max() - median(t))
    wait = tm.proc_mpiio_wait_s[peers] if len(tm.proc_mpiio_wait_s) else np.zeros(0)
    heavy_first = int(np.flatnonzero(peers)[np.argmax(b[peers])])
    if len(wait) and wait.any():
        # in collective MPI-IO calls the light processes wait for the heavy ones (the aggregators): the part
        # of their MPI-IO wait that is the heaviest process's own POSIX work (what it does while they wait),
        # less what a balanced share of the bytes would still take (mean instead of max bytes per process),
        # is this imbalance's; the rest of the wait (the exchange, the CPU) is not told apart by counters
        med_wait = median(wait)
        heavy_posix = float(metrics_of(profile).proc_io_s[heavy_first])
        balanced = float(b[peers].mean() / b.max())
        charged = min(med_wait, heavy_posix) * (1 - balanced)
        ev["median_mpiio_wait_s"] = med_wait
        ev["heaviest_posix_s"] = heavy_posix
        ev["collective_wait_charged_s"] = charged
        wall = min(wall + charged, tm.io_wall_s)
    facts: dict = {"collective": False}
    mp = profile.module("MPI-IO")
    if mp is not None:
        mb = col(mp, "MPIIO_BYTES_READ", "f8") + col(mp, "MPIIO_BYTES_WRITTEN", "f8")
        if not ((mp["rank"] < 0).any() or mb.sum() == 0):
            per = group_sum(mp["proc"], mb, m.nprocs)[: m.nprocs]
            ev["mpiio_max_over_median"] = float(per.max() / max(median(per), 1))
        cw, cr = float(col(mp, "MPIIO_COLL_WRITES").sum()), float(col(mp, "MPIIO_COLL_READS").sum())
        facts["collective"] = bool(cw + cr)
        if cw + cr:  # the direction of the collective calls (the aggregators' hint is romio_cb_read or _write)
            facts["collective_rw"] = "write" if cw >= cr else "read"
        mw, mr = (float(sum(col(mp, f"MPIIO_{k}_{rw}S").sum() for k in ("INDEP", "COLL", "NB"))) for rw in ("WRITE", "READ"))
        if mw + mr:  # the direction of the MPI-IO calls (POSIX writes beside MPI-IO reads are not MPI-IO's)
            facts["mpiio_rw"] = "write" if mw >= mr else "read"
    heavy_sorted = heavy[np.argsort(-b[heavy])]
    lv = m.level
    mine, w = _rows_of(profile, int(heavy_sorted[0]))
    fb = (lv["bytes_read"] + lv["bytes_written"]) * np.where(lv["proc"] < 0, np.divide(lv["slow_bytes"], np.maximum(lv["bytes_read"] + lv["bytes_written"], 1)).clip(0, 1), 1.0)
    fb = np.where(isin(lv["file_id"], std_file_ids(profile)), 0.0, fb)  # a terminal or pipe is no file to spread
    files = top_files(profile, lv["file_id"][mine], fb[mine], cfg.report.top_files)
    lus = profile.module("LUSTRE")
    fst = profile.files["fs_type"] if "fs_type" in profile.files else np.zeros(0, object)
    facts["lustre"] = lus is not None or any(str(x).lower() == "lustre" for x in set(fst.tolist()))  # OSTs to stripe over
    if files and lus is not None:
        named = profile.files["file_id"][profile.files["path"] == files[0]]  # the last id of that path, as a reversed dict gives
        fid = int(named[-1]) if len(named) else None
        sc = lus["stripe_count"][lus["file_id"] == fid] if fid is not None else []
        if len(sc):
            ev["top_file_stripe_count"] = int(sc.max())
            facts["top_file"] = files[0]
    # (the header's "h" metadata is not the application's hints: it is what Darshan used to write its own log)
    return [finding(cfg, profile, RANK_IMBALANCE.id, f"{len(heavy)} of {int(peers.sum())} processes move {fmt_pct(ev['share_of_bytes_on_heavy'])} "
                    f"of the bytes (max {fmt_bytes(b.max())} vs median {fmt_bytes(med)})",
                    wall_s=wall, evidence=ev, files=files,
                    processes=[int(p) for p in heavy_sorted[: cfg.report.top_processes]],
                    facts=facts)]


def _data_ops(profile: JobProfile, mod: str, pre: str) -> np.ndarray:
    if mod == "MPI-IO":  # MPI-IO counts its calls by kind: a rank in a collective call takes part in the I/O
        return sum(pcol(profile, mod, f"MPIIO_{k}_{rw}") for k in ("INDEP", "COLL", "SPLIT", "NB")
                   for rw in ("READS", "WRITES"))
    return pcol(profile, mod, f"{pre}_READS") + pcol(profile, mod, f"{pre}_WRITES")


# records of one module of a log lost (damage, a newer module format, a record cap): a rank whose share was lost
# has no records there, as an idle rank has none
_RECORDS_LOST = ("truncated", "newer-format", "partial-module")


def _logs_with_lost_records(profile: JobProfile, mods: tuple[str, ...]) -> np.ndarray | None:
    """Log indices (``processes["log"]``) of the logs whose records of any of ``mods`` were lost; None when a
    loss cannot be tied to a log of the process table (then every log is taken as damaged)."""
    paths = {i.path for i in profile.issues_seen if i.kind in _RECORDS_LOST and i.module in mods}
    if not paths:
        return np.zeros(0, "i8")
    pr = profile.processes
    hit = np.isin(pr["log_path"].astype(str), list(paths))
    if not hit.any():
        return None
    return np.unique(pr["log"][hit])


def detect_inactive_ranks(profile: JobProfile, cfg: Config) -> list[Finding]:
    if len(profile.processes) < 2:
        return []  # eligible ranks are at most one per process row
    n = nprocs_of(profile)
    logs = profile.processes["log"]
    # only ranks of one parallel program (a log of >= 2 processes); separate 1-process logs are separate programs
    eligible = np.zeros(n, bool)
    eligible[profile.processes["proc"]] = np.bincount(logs)[logs] >= 2 if len(logs) else False
    if eligible.sum() < 2:
        return []
    lost_ranks = 0
    for mod, pre in _LEVELS:
        # a rank whose records of this level (or of a level above it, which would have been judged instead) were
        # lost to damage looks idle here: its log's ranks are not judged, and the claim says how many were left out
        lost = _logs_with_lost_records(profile, (mod,))
        if lost is None:
            return []
        if len(lost):
            gone = np.zeros(n, bool)
            gone[profile.processes["proc"][np.isin(logs, lost)]] = True
            lost_ranks += int((eligible & gone).sum())
            eligible &= ~gone
            if eligible.sum() < 2:
                return []
        t = profile.module(mod)
        if t is None:
            continue
        ops = _data_ops(profile, mod, pre)
        if ops.sum() == 0:
            continue
        if ((t["rank"] < 0) & (ops > 0)).any():
            return []  # a shared record hides which ranks did the work
        per = np.bincount(t["proc"][ops > 0], weights=ops[ops > 0], minlength=n)[:n]
        idle = np.flatnonzero((per == 0) & eligible)
        if not len(idle):
            return []
        n = int(eligible.sum())
        io_wall = time_model_of(profile).io_wall_s
        cost = io_wall * len(idle) / n  # I/O the idle ranks could have taken off the critical path
        ev = {"inactive_processes": int(len(idle)), "processes": n, "level": mod,
              "data_ops_on_active": int(per[eligible].sum()), "critical_io_s": io_wall}
        if lost_ranks:
            ev["processes_with_lost_records"] = lost_ranks
        return [finding(cfg, profile, INACTIVE_RANKS.id, f"{len(idle)} of {n} processes issue no {mod} reads or writes",
                        wall_s=cost, evidence=ev, processes=[int(p) for p in idle[: cfg.report.top_processes]])]
    return []


RANK_IMBALANCE = FindingSpec(
    id="rank-imbalance", seq=8, detect=detect_rank_imbalance,
    fires="max/median bytes per process ≥ `imbalance_ratio`",
    cost="slowest − median process I/O time, plus the median process's MPI-IO wait (MPI-IO time beyond its own "
         "POSIX time: collective calls waiting for the aggregators), at most the heaviest process's POSIX seconds, "
         "× (1 − mean/max bytes per process)",
    config_keys=("access.imbalance_ratio", "stragglers.min_processes"),
    admin_action="Help these users spread I/O over ranks (collective buffering, aggregators) instead of funnelling "
                 "it through a few.",
)
STRAGGLER_PROCESS = FindingSpec(
    id="straggler-process", seq=9, detect=detect_straggler_process,
    fires="robust z (median/MAD) of per-process I/O time (the time model's, over every layer: POSIX level, MPI-IO "
          "beyond it, HDF5, PnetCDF, DFS) > `mad_factor`, excess ≥ max(`min_excess_s`, "
          "`min_excess_share` × median), and the process does not carry ≥ `imbalance_ratio` × median bytes (that is "
          "rank-imbalance); names the Lustre OST shared by the stragglers' files",
    cost="excess over the median",
    config_keys=("stragglers.mad_factor", "stragglers.min_excess_s", "stragglers.min_excess_share",
                 "stragglers.min_processes", "access.imbalance_ratio"),
    admin_action="Check the nodes and OSTs these jobs' slow processes used; recurring stragglers point to hardware "
                 "or placement problems.",
)
INACTIVE_RANKS = FindingSpec(
    id="inactive-ranks", seq=11, detect=detect_inactive_ranks,
    fires="in a multi-rank log, ranks with no reads/writes at the highest interface with data (H5D, PNETCDF_VAR, "
          "MPI-IO, POSIX, STDIO); the ranks of a log whose records of that level (or of a level above it) were lost "
          "(a damaged region, a newer module format, a record cap) are not judged: a lost rank is not an idle one",
    cost="critical path × idle share",
    admin_action="Point these users at fewer I/O ranks or aggregated I/O; idle ranks hold core-hours while a few do "
                 "the I/O.",
)
SPECS = (RANK_IMBALANCE, STRAGGLER_PROCESS, INACTIVE_RANKS)
