"""What the site report shows, computed from the site dataset (no formatting here).

``site_report(path)`` returns one plain dict (JSON-ready):

* ``overview``: jobs, programs, logs read, damaged logs, days, core-hours, I/O time,
  recoverable core-hours;
* ``recommendations``: one per finding id, ranked by the core-hours fixing it would
  give back (*recoverable core-hours*: per affected job, the share of its run the
  finding costs, ``est_cost_s / runtime_s``, times the job's core-hours, at most the
  core-hours it spent in I/O), with what to change (``recommend.site.admin_action``: the finding spec's ``admin_action``),
  what the site config tells users about it (``site_advice``, None without one) and the
  users and executables it costs most;
* ``prevalence``: for each finding id, the jobs it affects and their share of
  all jobs, of all core-hours and of all I/O time, the estimated seconds
  the finding costs (sum of ``est_cost_s``) and its recoverable core-hours, in
  the order of ``recommendations``;
* ``top_users`` / ``top_executables``: who and what to contact first, ranked by
  recoverable core-hours, each with the finding that costs them most;
* ``op_sizes``: the site's POSIX op-size histogram (reads, writes) and how
  many jobs have each size bin as their most common;
* ``files_per_job``: quantiles and a log-scale histogram;
* ``trends``: per month (per day when the data span under two months) jobs,
  core-hours, I/O time, bytes, and the share of jobs with each finding;
* ``errors``: damaged or unreadable logs by kind, with examples.
"""

from __future__ import annotations

import math
import os
from typing import Any

from ..analyzers.detectors import FINDING_IDS
from ..config import Config
from .features import SIZE_BIN_LABELS, SIZE_BINS, SIZE_BIN_LOW_BYTES
from .store import load_site

SCHEMA = "iodiag.site-report/1"
N_JOBS = 5  # jobs listed under each recommendation (top_jobs)
FILES_BUCKETS = ((0, 0, "0"), (1, 1, "1"), (2, 10, "2-10"), (11, 100, "11-100"), (101, 1000, "101-1k"),
                 (1001, 10000, "1k-10k"), (10001, math.inf, ">10k"))


def _f(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _share(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def finding_long(jobs) -> "Any":
    """One row per (job, finding): job_key, user, exe, finding, cost_s, core_hours, io_time_s, recoverable_ch
    (core-hours fixing the finding gives back: cost_s / runtime_s x core-hours, at most the job's I/O core-hours;
    0 when the detector gave no estimate)."""
    import numpy as np
    import pandas as pd

    if not len(jobs):
        return pd.DataFrame(columns=["job_key", "user", "exe", "finding", "severity", "cost_s", "core_hours", "io_time_s",
                                     "month", "runtime_s", "job_id", "recoverable_ch"])
    ids = jobs["finding_ids"].map(lambda v: list(v) if v is not None else [])
    n = ids.map(len).to_numpy()
    rep = np.repeat(np.arange(len(jobs)), n)
    base = jobs.iloc[rep][["job_key", "user", "exe", "core_hours", "io_time_s", "month", "runtime_s"]].reset_index(drop=True)
    base["job_id"] = jobs["job_id"].to_numpy()[rep] if "job_id" in jobs else None
    base["finding"] = [x for v in ids for x in v]
    base["severity"] = [x for v in jobs["finding_severities"] for x in (list(v) if v is not None else [])]
    base["cost_s"] = [x for v in jobs["finding_costs_s"] for x in (list(v) if v is not None else [])]
    # a job (or program: exe) with the same finding twice (several files) counts once
    agg = base.groupby(["job_key", "exe", "finding"], sort=False).agg(
        user=("user", "first"), severity=("severity", "first"), cost_s=("cost_s", lambda s: s.sum(min_count=1)),
        core_hours=("core_hours", "first"), io_time_s=("io_time_s", "first"), month=("month", "first"),
        runtime_s=("runtime_s", "first"), job_id=("job_id", "first"),
    )
    agg = agg.reset_index()
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.clip(agg["cost_s"].to_numpy(dtype="f8") / agg["runtime_s"].to_numpy(dtype="f8"), 0.0, 1.0)
        rec = share * agg["core_hours"].to_numpy(dtype="f8")
    rec = np.minimum(np.nan_to_num(rec), np.nan_to_num(agg["io_time_s"].to_numpy(dtype="f8")) / 3600.0)
    agg["recoverable_ch"] = rec
    return agg


def prevalence(jobs) -> list[dict[str, Any]]:
    long = finding_long(jobs)
    total_jobs = len(jobs)
    total_ch = float(jobs["core_hours"].sum()) if total_jobs else 0.0
    total_io = float(jobs["io_time_s"].sum()) if total_jobs else 0.0
    out = []
    for fid, g in long.groupby("finding", sort=False):
        ch, io = float(g["core_hours"].sum()), float(g["io_time_s"].sum())
        cost = g["cost_s"].sum(min_count=1)
        out.append({
            "finding": fid, "jobs": int(len(g)), "jobs_share": _share(len(g), total_jobs),
            "core_hours": ch, "core_hours_share": _share(ch, total_ch),
            "io_time_s": io, "io_time_share": _share(io, total_io),
            "est_cost_s": _f(cost), "est_cost_share_of_io_time": _share(_f(cost) or 0.0, total_io) if _f(cost) is not None else None,
            "recoverable_core_hours": float(g["recoverable_ch"].sum()),
            "recoverable_share": _share(float(g["recoverable_ch"].sum()), total_ch),
            "high": int((g["severity"] == "high").sum()),
        })
    order = {f: i for i, f in enumerate(FINDING_IDS)}
    out.sort(key=lambda r: (-r["recoverable_core_hours"], -(r["core_hours_share"] or 0.0), order.get(r["finding"], 999)))
    return out


def partition_programs(long, plong):
    """``plong`` (per program and finding) with each job's recoverable core-hours for a finding shared out over the
    job's programs that have it, in proportion to what each program's own estimate gives back (equally when none
    gives an estimate; to the job's executable when no program has the finding).  Per finding, the programs then
    add up to the job-level total, as the users do."""
    import numpy as np
    import pandas as pd

    if not len(long):
        return long
    job = long[["job_key", "finding", "recoverable_ch", "exe"]].rename(columns={"recoverable_ch": "_job_rec", "exe": "_job_exe"})
    p = plong.merge(job, on=["job_key", "finding"], how="inner") if len(plong) else job.iloc[0:0]
    missing = job.merge(p[["job_key", "finding"]].drop_duplicates(), on=["job_key", "finding"], how="left", indicator=True)
    missing = missing[missing["_merge"] == "left_only"]
    extra = long.merge(missing[["job_key", "finding"]], on=["job_key", "finding"]).assign(
        _job_rec=lambda d: d["recoverable_ch"], _job_exe=lambda d: d["exe"])
    p = pd.concat([p, extra], ignore_index=True) if len(extra) else p
    own = np.nan_to_num(p["recoverable_ch"].to_numpy(dtype="f8"))
    key = [p["job_key"], p["finding"]]
    tot = pd.Series(own, index=p.index).groupby(key).transform("sum").to_numpy()
    cnt = p.groupby(["job_key", "finding"])["finding"].transform("size").to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(tot > 0, own / tot, 1.0 / cnt)
    p = p.assign(recoverable_ch=p["_job_rec"].to_numpy(dtype="f8") * share)
    return p.drop(columns=["_job_rec", "_job_exe"])


def _ranked(frame, key: str, n: int, label: str) -> list[dict[str, Any]]:
    """The ``n`` biggest ``key`` groups of ``frame`` by recoverable core-hours, then one "others" row with the rest,
    so the rows add up to the finding's total."""
    sums = frame.groupby(key)["recoverable_ch"].sum().sort_values(ascending=False)
    sums = sums[sums > 0]
    rows = [{label: str(k) or "?", "recoverable_core_hours": float(v)} for k, v in sums.head(n).items()]
    if len(sums) > n:
        rows.append({label: f"{len(sums) - n} others", "recoverable_core_hours": float(sums.iloc[n:].sum()), "others": int(len(sums) - n)})
    return rows


def recommendations(prev: list[dict[str, Any]], long, plong, config: Config, n: int = 3, *, jobs=None,
                    commands=None, n_jobs: int = 5) -> list[dict[str, Any]]:
    """What to change, most recoverable core-hours first: the finding, the action, whom it costs most (users and
    programs, each adding up to the finding's total with an "others" row), the jobs behind it (``top_jobs``, each
    with the command that reports it), and the site config's advice with the jobs it is for."""
    from ..recommend.site import admin_action, site_advice
    from .sweeps import scope_mask

    part = partition_programs(long, plong)
    out = []
    for p in prev:
        if p["recoverable_core_hours"] <= 0:
            continue
        fid = p["finding"]
        rows = long[long["finding"] == fid]
        advice = site_advice(fid, config)
        scope = config.site.advice_scope.get(fid)
        applies: set[str] = set()
        if advice and jobs is not None and len(jobs):
            mask = scope_mask(jobs, scope)
            applies = set(jobs["job_key"].to_numpy()[mask]) & set(rows["job_key"])
        top = rows.sort_values("recoverable_ch", ascending=False)
        top = top[top["recoverable_ch"] > 0].head(n_jobs)
        progs = part[part["finding"] == fid]
        main_prog = (progs.sort_values("recoverable_ch", ascending=False).drop_duplicates("job_key")
                     .set_index("job_key")["exe"].to_dict() if len(progs) else {})
        tj = []
        for r in top.itertuples(index=False):
            tj.append({"job_id": str(r.job_id) if r.job_id is not None else None, "user": str(r.user) or "?",
                       "program": str(main_prog.get(r.job_key, r.exe)) or "?",
                       "recoverable_core_hours": float(r.recoverable_ch), "core_hours": float(r.core_hours),
                       "site_advice_applies": r.job_key in applies if advice else None,
                       "report_command": (commands or {}).get(r.job_key), "job_key": r.job_key})
        out.append({"finding": fid, "jobs": p["jobs"], "recoverable_core_hours": p["recoverable_core_hours"],
                    "recoverable_share": p["recoverable_share"], "action": admin_action(fid),
                    "site_advice": advice if applies else None,
                    "site_advice_text": (config.site.advice.get(fid) or "").strip() or None if applies else None,
                    "site_advice_scope": scope if advice else None,
                    "site_advice_jobs": len(applies) if advice else None,
                    "users": _ranked(rows, "user", n, "user"),
                    "executables": _ranked(progs, "exe", n, "exe"),
                    "top_jobs": tj})
    return out


def report_commands(jobs, logs, archive: str | None, keys) -> dict[str, str]:
    """For each job key in ``keys``, the `iodiag report` command that diagnoses that job alone: by its scheduler
    job id in the archive when the archive names it once (``--log-tree``), else its log file, else its folder with
    ``--job``."""
    import shlex

    if archive is None or not len(jobs):
        return {}
    keys = set(keys)
    sel = jobs[jobs["job_key"].isin(keys)]
    ids = jobs["job_id"].astype(str).value_counts() if "job_id" in jobs else {}
    by_key: dict[str, list[tuple[str, str]]] = {}
    if logs is not None and len(logs):
        lg = logs[logs["job_key"].isin(keys)]
        for k, d, nm in zip(lg["job_key"], lg["dir"], lg["name"]):
            by_key.setdefault(k, []).append((d, nm))
    q = shlex.quote
    out = {}
    for k, jid, user, d in zip(sel["job_key"], sel["job_id"].astype(str), sel["user"].astype(str), sel["dir"]):
        files = sorted(set(by_key.get(k, [])))
        named_by_id = jid.isdigit() and k == f"{d}:{user}:{jid}" and ids.get(jid, 0) == 1
        if named_by_id:
            out[k] = f"iodiag report {jid} --log-tree {q(archive)}"
        elif len(files) == 1:
            out[k] = f"iodiag report {q(os.path.join(archive, files[0][0], files[0][1]))}"
        elif jid and jid != "None":
            out[k] = f"iodiag report {q(os.path.join(archive, d))} --job {q(jid)}"
    return out


def top_jobs(long, jobs, commands: dict[str, str], n: int) -> list[dict[str, Any]]:
    """The jobs fixing would give back most core-hours, all findings together (a job's findings give back at most
    its I/O core-hours): job id, user, program, recoverable core-hours, its findings, the command to report it."""
    if not len(long):
        return []
    g = long.groupby("job_key").agg(rec=("recoverable_ch", "sum"), io=("io_time_s", "first"), user=("user", "first"),
                                    exe=("exe", "first"), job_id=("job_id", "first"), core_hours=("core_hours", "first"))
    g["rec"] = g["rec"].clip(upper=g["io"] / 3600.0)
    g = g[g["rec"] > 0].sort_values("rec", ascending=False).head(n)
    fs = long[long["job_key"].isin(g.index)].sort_values("recoverable_ch", ascending=False).groupby("job_key")["finding"].agg(list)
    return [{"job_id": str(r.job_id) if r.job_id is not None else None, "user": str(r.user) or "?", "program": str(r.exe) or "?",
             "recoverable_core_hours": float(r.rec), "core_hours": float(r.core_hours), "findings": list(fs.get(k, [])),
             "report_command": commands.get(k), "job_key": k} for k, r in g.iterrows()]


def _top(frame, long, key: str, n: int) -> list[dict[str, Any]]:
    import pandas as pd

    if not len(frame):
        return []
    allj = frame.groupby(key).agg(jobs=("job_key", "nunique"), core_hours=("core_hours", "sum"), io_time_s=("io_time_s", "sum"))
    if len(long):
        aff = long.groupby(key).agg(jobs_affected=("job_key", "nunique"))
        # findings of one job can overlap (small and random ops are the same seconds):
        # a job's estimated cost is the sum of its findings' costs, capped at its I/O time
        per = long.groupby(["job_key", key]).agg(cost=("cost_s", lambda s: s.sum(min_count=1)), io=("io_time_s", "first"))
        per["cost"] = per["cost"].clip(upper=per["io"])
        aff["est_cost_s"] = per.groupby(level=1)["cost"].sum(min_count=1)
        # I/O time of affected jobs (programs), each once per group
        per_job = long.drop_duplicates(["job_key", key])
        aff["affected_io_time_s"] = per_job.groupby(key)["io_time_s"].sum()
        aff["affected_core_hours"] = per_job.groupby(key)["core_hours"].sum()
        aff["findings"] = long.groupby(key)["finding"].agg(lambda s: s.value_counts().to_dict())
        # recoverable core-hours: a job's findings together give back at most its I/O core-hours
        rj = long.groupby(["job_key", key]).agg(rec=("recoverable_ch", "sum"), io=("io_time_s", "first"))
        aff["recoverable_core_hours"] = rj["rec"].clip(upper=rj["io"] / 3600.0).groupby(level=1).sum()
        by_f = long.groupby([key, "finding"])["recoverable_ch"].sum()
        top_f = by_f.sort_values(ascending=False).groupby(level=0).head(1)
        aff["costliest_finding"] = pd.Series({k: f for k, f in top_f.index})
        aff["costliest_core_hours"] = pd.Series({k: float(v) for (k, _), v in top_f.items()})
        t = allj.join(aff, how="inner")
    else:
        return []
    t = t.sort_values(["recoverable_core_hours", "affected_io_time_s", "jobs_affected"], ascending=False).head(n)
    rows = []
    for name, r in t.iterrows():
        rows.append({
            key: name, "jobs": int(r["jobs"]), "jobs_affected": int(r["jobs_affected"]),
            "core_hours": float(r["core_hours"]), "io_time_s": float(r["io_time_s"]),
            "affected_core_hours": float(r["affected_core_hours"]), "affected_io_time_s": float(r["affected_io_time_s"]),
            "est_cost_s": _f(r["est_cost_s"]), "recoverable_core_hours": float(r["recoverable_core_hours"]),
            "costliest_finding": r["costliest_finding"], "costliest_core_hours": float(r["costliest_core_hours"]),
            "findings": {k: int(v) for k, v in sorted(r["findings"].items(), key=lambda kv: -kv[1])},
        })
    return rows


def op_sizes(jobs) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {"bins": list(SIZE_BINS), "labels": list(SIZE_BIN_LABELS), "bin_low_bytes": list(SIZE_BIN_LOW_BYTES)}
    for rw in ("read", "write"):
        cols = [f"posix_size_{rw}_{b.lower()}" for b in SIZE_BINS]
        m = jobs[cols].fillna(0.0).to_numpy() if len(jobs) else np.zeros((0, len(cols)))
        out[f"{rw}_ops"] = [float(x) for x in m.sum(axis=0)] if len(m) else [0.0] * len(cols)
        has = m.sum(axis=1) > 0
        dom = np.bincount(m[has].argmax(axis=1), minlength=len(cols)) if has.any() else np.zeros(len(cols), int)
        out[f"{rw}_jobs_by_dominant_bin"] = [int(x) for x in dom]
    tot = np.asarray(out["read_ops"]) + np.asarray(out["write_ops"])
    out["ops_total"] = float(tot.sum())
    out["ops_lt_100k_share"] = float(tot[:4].sum() / tot.sum()) if tot.sum() > 0 else None
    return out


def files_per_job(jobs) -> dict[str, Any]:
    import numpy as np

    v = jobs["n_files"].fillna(0).to_numpy(dtype="f8") if len(jobs) else np.zeros(0)
    q = {f"p{p}": (float(np.percentile(v, p)) if len(v) else None) for p in (50, 90, 99)}
    q["max"] = float(v.max()) if len(v) else None
    q["mean"] = float(v.mean()) if len(v) else None
    hist = [{"files": label, "jobs": int(((v >= lo) & (v <= hi)).sum())} for lo, hi, label in FILES_BUCKETS]
    return {"quantiles": q, "histogram": hist}


def trends(jobs) -> dict[str, Any]:
    import pandas as pd

    if not len(jobs):
        return {"period": "month", "rows": []}
    days = pd.to_datetime(jobs["day"], errors="coerce")
    span = (days.max() - days.min()).days if days.notna().any() else 0
    period = "day" if span < 62 else "month"
    key = jobs["day"] if period == "day" else jobs["month"]
    frame = jobs.assign(_p=key.fillna("unknown"))
    g = frame.groupby("_p", sort=True)
    rows = []
    for p, grp in g:
        r = {"period": p, "jobs": int(len(grp)), "core_hours": float(grp["core_hours"].sum()),
             "io_time_s": float(grp["io_time_s"].sum()),
             "bytes": float(grp["bytes_read"].sum() + grp["bytes_written"].sum()),
             "jobs_with_findings": int((grp["n_findings"] > 0).sum()), "finding_share": {}}
        for fid in FINDING_IDS:
            col = f"finding_{fid.replace('-', '_')}"
            k = int(grp[col].sum())
            if k:
                r["finding_share"][fid] = k / len(grp)
        rows.append(r)
    return {"period": period, "rows": rows}


def errors_summary(errors, n: int = 10) -> dict[str, Any]:
    if errors is None or not len(errors):
        return {"total": 0, "by_kind": {}, "examples": []}
    by = errors.groupby("kind")["path"].nunique().sort_values(ascending=False)
    ex = errors.drop_duplicates("path").head(n)
    return {
        "total": int(errors["path"].nunique()),
        "unreadable": int(errors.loc[~errors["loaded"], "path"].nunique()),
        "by_kind": {k: int(v) for k, v in by.items()},
        "examples": [{"path": p, "kind": k, "cause": c} for p, k, c in zip(ex["path"], ex["kind"], ex["cause"])],
    }


def site_report(path: str | os.PathLike, *, top_n: int = 10, config: Config | None = None) -> dict[str, Any]:
    """The report dict; ``config`` (with a site config's ``[site]`` name and advice) words the recommendations."""
    cfg = config or Config()
    data = load_site(path)
    jobs, programs, errors, logs = data["jobs"], data["programs"], data["errors"], data["logs"]
    state = data["state"]
    long = finding_long(jobs)
    # per-program findings attribute multi-program jobs to the executable that has them
    plong = finding_long(programs.assign(exe=programs["program"])) if len(programs) else long
    days = jobs["day"].dropna() if len(jobs) else []
    overview = {
        "dataset": os.fspath(path), "archive": state.get("archive"), "runs": len(state.get("runs", [])),
        "jobs": int(len(jobs)), "programs": int(len(programs)),
        "logs_read": int((logs["status"] == "ok").sum()) if len(logs) else 0,
        "logs_damaged": int(errors["path"].nunique()) if len(errors) else 0,
        "first_day": str(min(days)) if len(days) else None, "last_day": str(max(days)) if len(days) else None,
        "core_hours": float(jobs["core_hours"].sum()) if len(jobs) else 0.0,
        "io_time_s": float(jobs["io_time_s"].sum()) if len(jobs) else 0.0,
        "bytes_read": float(jobs["bytes_read"].sum()) if len(jobs) else 0.0,
        "bytes_written": float(jobs["bytes_written"].sum()) if len(jobs) else 0.0,
        "jobs_with_findings": int((jobs["n_findings"] > 0).sum()) if len(jobs) else 0,
        "partial_jobs": int(jobs["partial"].sum()) if len(jobs) else 0,
        "site": cfg.site.name,
    }
    prev = prevalence(jobs)
    rj = long.groupby("job_key").agg(rec=("recoverable_ch", "sum"), io=("io_time_s", "first")) if len(long) else None
    overview["recoverable_core_hours"] = float(rj["rec"].clip(upper=rj["io"] / 3600.0).sum()) if rj is not None else 0.0
    # the jobs the report names get the command that reports each alone
    if len(long):
        wanted = set(long.sort_values("recoverable_ch", ascending=False).groupby("finding").head(N_JOBS)["job_key"])
        wanted |= set(rj["rec"].clip(upper=rj["io"] / 3600.0).sort_values(ascending=False).head(top_n).index)
    else:
        wanted = set()
    commands = report_commands(jobs, logs, state.get("archive"), wanted)
    return {
        "schema": SCHEMA,
        "overview": overview,
        "top_jobs": top_jobs(long, jobs, commands, top_n),
        "recommendations": recommendations(prev, long, plong, cfg, jobs=jobs, commands=commands, n_jobs=N_JOBS),
        "site_config": {"name": cfg.site.name, "defaults": dict(cfg.site.defaults), "rules": list(cfg.site.rules)},
        "prevalence": prev,
        "top_users": _top(jobs, long, "user", top_n),
        "top_executables": _top(programs.assign(exe=programs["program"]) if len(programs) else jobs,
                                partition_programs(long, plong), "exe", top_n),
        "op_sizes": op_sizes(jobs),
        "files_per_job": files_per_job(jobs),
        "trends": trends(jobs),
        "errors": errors_summary(errors),
    }
