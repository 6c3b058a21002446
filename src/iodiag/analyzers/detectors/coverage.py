"""What the log could not see or says little: partial-log, no-io, stdio-heavy.

partial-log is about evidence, not time: its severity is "medium" when
counter modules hit their record cap (every number is a lower bound), "low"
when only the DXT trace or heatmap was cut, "high" when whole logs were lost.
The recommendation is a DARSHAN_CONFIG_PATH file sized from what was seen:
Darshan keeps DXT segments (32 bytes each) in 1 KiB records, so a trace of S
segments per process needs ``MAX_RECORDS ceil(S*32/1024) DXT_POSIX`` and
MODMEM (MiB) large enough for every module's records (Darshan's runtime docs:
MAX_RECORDS exists only as a config-file setting; MODMEM/NAMEMEM also as
DARSHAN_MODMEM/DARSHAN_NAMEMEM; DXT is enabled with ``MOD_ENABLE DXT_POSIX``).
"""

from __future__ import annotations

import math

import numpy as np

from ..nputil import unique
from ...config import Config
from ...findings import Finding, FindingSpec
from ...profile import OP, JobProfile
from ...units import fmt_bytes, fmt_pct
from ..metrics import col, file_paths, isin, level_total, metrics_of, nprocs_of, pcol, std_file_ids
from ..timemodel import wall_cost_of_rows
from ._common import finding, top_files

_COUNTER_MODS = ("POSIX", "STDIO", "MPI-IO", "H5F", "H5D", "PNETCDF_FILE", "PNETCDF_VAR")
_LOST = ("unreadable", "crashed", "timeout", "missing-log")  # whole logs lost
_MODULE_LOST = ("truncated", "newer-format")  # records of one module of a log lost (the issue names the module)


def _pow2(n: float) -> int:
    return 1 << max(int(math.ceil(math.log2(max(n, 1)))), 0)


def detect_partial_log(profile: JobProfile, cfg: Config) -> list[Finding]:
    issues = profile.issues_seen
    partial = list(profile.job.partial_modules)
    if not partial and not issues:
        return []
    m = metrics_of(profile)
    lines, ev = [], {"partial_modules": partial, "issues": len(issues)}
    mem = 0.0
    # the modules Darshan flagged partial (a record cap or a full DXT buffer): a larger cap would have kept them.
    # Records lost to a damaged or unreadable region are not a cap: no MAX_RECORDS line for them
    capped = {i.module for i in issues if i.kind == "partial-module"}
    cnt = [mod for mod in partial if mod in _COUNTER_MODS and mod in capped]
    if cnt:
        # a partial module may hold no decoded records (not read, or every record lost): the floor applies
        recs = max((int(np.bincount(np.clip(t["proc"], 0, None)).max()) for t in map(profile.module, cnt)
                    if t is not None and len(t)), default=0)
        need = _pow2(max(4 * recs, 4096))
        ev["records_per_process_seen"] = recs
        lines.append(f"MAX_RECORDS {need} {','.join(cnt)}")
        mem += need * 1024 * len(cnt)  # a counter record is < 1 KiB
    dxt = [mod for mod in partial if mod.startswith("DXT_") and mod in capped]
    if dxt:
        lv = m.level
        posix = lv["module"] == "POSIX"
        want = np.bincount(np.clip(lv["proc"][posix], 0, None), weights=(lv["reads"] + lv["writes"])[posix], minlength=m.nprocs)
        o = profile.ops
        px = o["proc"][o["module"] == 0]
        got = np.bincount(np.clip(px, 0, None), minlength=m.nprocs)[: m.nprocs] if len(px) else np.zeros(m.nprocs)
        seg = float(want.max()) if len(want) else 0.0
        ev.update(dxt_segments_recorded=int(got.sum()), posix_ops_counted=int(want.sum()),
                  dxt_missing_share=float(max(1 - got.sum() / max(want.sum(), 1), 0)))
        need = _pow2(max(seg * 32 * 1.25 / 1024, 4096))
        lines.append(f"MAX_RECORDS {need} {','.join(dxt)}")
        mem += need * 1024 * len(dxt)
    lost = [i for i in issues if i.kind in _LOST]
    if lost:
        ev["logs_lost"] = len({i.path for i in lost})
    mod_lost = [i for i in issues if i.kind in _MODULE_LOST]
    ev["issue_kinds"] = sorted({i.kind for i in issues})
    if not lines and not lost and not partial:
        sev = "info"
    else:
        # a whole log lost costs every number of its processes; records lost from a counter module make that
        # module's numbers lower bounds; a trace, heatmap or layout module lost costs detail only
        sev = "high" if lost else ("medium" if cnt or any(i.module in _COUNTER_MODS for i in mod_lost) else "low")
    facts: dict = {}
    if lines:  # the Darshan configuration that would have kept everything
        facts["config_lines"] = lines + ([f"MOD_ENABLE {','.join(dxt)}"] if dxt else [])
        facts["modmem_mib"] = max(_pow2(mem / 2 ** 20 * 1.5), 8)
        facts["namemem_mib"] = _pow2(max(len(profile.files) * 4 * 256 / 2 ** 20, 4))
    if lost:
        facts["lost"] = {"path": lost[0].path, "cause": lost[0].cause, "next_step": lost[0].next_step}
    if mod_lost:
        facts["module_losses"] = [f"{i.module}: {i.cause}; {i.next_step}" for i in mod_lost]
    facts["other_issues"] = [f"{i.kind}: {i.cause}" for i in issues
                             if i.kind not in _LOST + _MODULE_LOST and i.kind != "partial-module"]
    what = ", ".join(partial) if partial else ", ".join(ev["issue_kinds"])
    return [finding(cfg, profile, PARTIAL_LOG.id, f"the log is incomplete ({what}): numbers are lower bounds", wall_s=None, evidence=ev, severity=sev, facts=facts,
                    files=sorted({i.path for i in issues})[: cfg.report.top_files])]


def detect_no_io(profile: JobProfile, cfg: Config) -> list[Finding]:
    if level_total(profile, "reads") + level_total(profile, "writes") > 0:
        return []  # POSIX/STDIO reads or writes
    data = 0
    for mod, pre in (("MPI-IO", "MPIIO"), ("H5D", "H5D"), ("PNETCDF_VAR", "PNETCDF_VAR")):
        t = profile.module(mod)
        if t is not None:
            data += int((col(t, f"{pre}_READS") + col(t, f"{pre}_WRITES")).sum())
    data += int((profile.ops["op"] <= OP["write"]).sum()) if len(profile.ops) else 0
    if data or _io_time(profile):
        return []
    mods = ", ".join(profile.job.modules) or "none"
    return [finding(cfg, profile, NO_IO.id, "no I/O recorded", wall_s=None, severity="info",
                    evidence={"processes": nprocs_of(profile),
                              "runtime_s": profile.job.runtime_s, "modules": mods})]


def _io_time(profile: JobProfile) -> bool:
    """``metrics_of(profile).total_io_s > 0``: with POSIX-level rows, a sum of non-negative seconds is positive
    exactly when one of them is, so the module sums decide; an ops-only profile asks the metrics."""
    if profile.module("POSIX") is not None or profile.module("STDIO") is not None:
        return sum(level_total(profile, k) for k in ("read_s", "write_s", "meta_s")) > 0
    return bool(len(profile.ops)) and metrics_of(profile).total_io_s > 0


def _may_stdio(profile: JobProfile, cfg: Config) -> bool:
    """The share test of detect_stdio_heavy on the module columns (no level table): byte counts are integers,
    so their sums are exact in any order below 2**53 (beyond that, the full test decides)."""
    if profile.module("STDIO") is None:
        return False
    std_ids, b, std = std_file_ids(profile), {}, {}
    for mod in ("POSIX", "STDIO"):
        t = profile.module(mod)
        if t is not None:
            b[mod] = pcol(profile, mod, f"{mod}_BYTES_READ") + pcol(profile, mod, f"{mod}_BYTES_WRITTEN")
            std[mod] = isin(t["file_id"], std_ids) if len(std_ids) else np.zeros(len(t), bool)
    if std["STDIO"].all():
        return False  # no STDIO row outside stdin/stdout/stderr
    st = int(b["STDIO"][~std["STDIO"]].sum())
    total = sum(int(b[k][~std[k]].sum()) for k in b)
    return total >= 2 ** 53 or not (total <= 0 or st < cfg.access.stdio_share * total)


def detect_stdio_heavy(profile: JobProfile, cfg: Config) -> list[Finding]:
    c = cfg.access
    if not _may_stdio(profile, cfg):
        return []
    m = metrics_of(profile)
    lv = m.level
    if not len(lv):
        return []
    std = file_paths(profile)[1][m.file_idx]  # rows on stdin/stdout/stderr
    b = (lv["bytes_read"] + lv["bytes_written"]).astype("f8")
    st = (lv["module"] == "STDIO") & ~std
    total = float(b[~std].sum())
    if not st.any() or total <= 0 or b[st].sum() < c.stdio_share * total:
        return []
    ops = (lv["reads"] + lv["writes"])[st].astype("f8")
    mean = b[st] / np.maximum(ops, 1)
    t = (lv["read_s"] + lv["write_s"] + lv["meta_s"])[st]
    # large fread/fwrite pass straight through libc; small ones add copies and per-call locking
    row_cost = np.zeros(len(lv))
    row_cost[np.flatnonzero(st)[mean < cfg.small_io.size_bytes]] = t[mean < cfg.small_io.size_bytes]
    ev = {"stdio_bytes": float(b[st].sum()), "stdio_share_of_bytes": float(b[st].sum() / total),
          "stdio_ops": int(ops.sum()), "stdio_s": float(t.sum()), "mean_stdio_request_bytes": float(b[st].sum() / max(ops.sum(), 1)),
          "stdio_files": int(len(unique(lv["file_id"][st])))}
    return [finding(cfg, profile, STDIO_HEAVY.id, f"{fmt_pct(ev['stdio_share_of_bytes'])} of bytes ({fmt_bytes(ev['stdio_bytes'])}) "
                    "move through STDIO streams", wall_s=wall_cost_of_rows(profile, row_cost), process_s=float(row_cost.sum()),
                    evidence=ev, facts={"large_requests": ev["mean_stdio_request_bytes"] >= cfg.small_io.size_bytes,
                                        # fread/fwrite calls per fopen: ~1 when each stream moves its file in one call
                                        "calls_per_open": float(ops.sum() / max(float(lv["opens"][st].sum()), 1.0))},
                    files=top_files(profile, lv["file_id"][st], t, cfg.report.top_files))]


PARTIAL_LOG = FindingSpec(
    id="partial-log", seq=12, detect=detect_partial_log,
    fires="partial modules or load issues",
    cost="—",
    notes=("recommendation: a `DARSHAN_CONFIG_PATH` file: `MAX_RECORDS n MODULES` (4× the records seen, ≥ 4096), DXT "
           "sized from POSIX op counts (32 B per segment in 1 KiB records), `MODMEM`, `NAMEMEM`",),
    admin_action="Raise Darshan's memory limits (DARSHAN_MODMEM / DARSHAN_MOD_MEM) in the site's Darshan setup so "
                 "logs are complete.",
)
STDIO_HEAVY = FindingSpec(
    id="stdio-heavy", seq=13, detect=detect_stdio_heavy,
    fires="STDIO moves ≥ `stdio_share` of bytes (std streams excluded)",
    cost="STDIO time on files whose mean request is small; 0 (info) when requests are large",
    config_keys=("access.stdio_share", "small_io.size_bytes"),
    admin_action="Recommend binary formats or larger stdio buffers (setvbuf) for bulk data instead of formatted "
                 "text I/O.",
)
NO_IO = FindingSpec(
    id="no-io", seq=16, detect=detect_no_io,
    fires="no reads or writes at any level",
    cost="— (info: \"no I/O recorded\")",
    admin_action="Nothing to change: these jobs did no file I/O that Darshan saw.",
)
SPECS = (PARTIAL_LOG, STDIO_HEAVY, NO_IO)
