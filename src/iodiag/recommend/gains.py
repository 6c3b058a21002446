"""How much a rule's change can give, as a rule can know it.

A rule predicts no speedup.  A change confined to the I/O calls (hints, striping, alignment, buffering,
collective calls, fsync policy) gets a *bound*: it can remove at most the I/O on the critical path, so the run
gets at most runtime / (runtime - that I/O) faster.  A change that also reshapes the work outside the I/O calls
(chunks: task count, graph size, per-chunk compute; open once: the library's decoding of the header) has no
bound the time model can vouch for: its gain is unknown until ``iodiag verify`` measures it, or the trained
model predicts it with a validated band (recommend/calibration.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..findings import Finding
from .jobfacts import IO_ONLY, JobFacts
from .recommendation import Recommendation


def io_bound(j: JobFacts) -> float | None:
    """The most a change confined to the I/O calls can gain: runtime / (runtime - I/O on the critical path)."""
    rt = j.runtime_s
    if not rt or rt <= 0:
        return None
    rest = max(rt - min(j.io_wall_s, rt), 0.01 * rt)
    return round(rt / rest, 3)


_FILE_COUNTS = ("files", "files_with_small_io", "shared_files")  # evidence keys that count a finding's files


def _files_of(fs: Sequence[Finding]) -> set[str] | None:
    """The files the findings are about, when each finding lists all of them (None when a list is cut short or
    a finding names no file or does not say how many it has)."""
    out: set[str] = set()
    for f in fs:
        n = next((int(f.evidence[k]) for k in _FILE_COUNTS if k in f.evidence), None)
        if not f.files or n is None or n > len(f.files):
            return None
        out |= set(f.files)
    return out


def files_bound(profile, paths: set[str], j: JobFacts) -> float | None:
    """The most a change to these files' I/O can gain: runtime / (runtime - the job seconds the busiest process
    spends in I/O on them, all of it)."""
    import numpy as np

    from ..analyzers.metrics import metrics_of
    from ..analyzers.nputil import unique
    from ..analyzers.timemodel import wall_cost_of_files

    rt = j.runtime_s
    if not rt or rt <= 0:
        return None
    m = metrics_of(profile)
    fid = profile.files["file_id"]
    # by a set, not np.isin/np.unique on paths: those import numpy.ma (~10 ms) on every report's path
    fids = unique(np.asarray([f for f, p in zip(fid.tolist(), profile.files["path"].tolist()) if p in paths],
                             dtype=fid.dtype))
    lv = m.level
    t = lv["read_s"] + lv["write_s"] + lv["meta_s"]
    per = np.array([float(t[lv["file_id"] == i].sum()) for i in fids])
    io = wall_cost_of_files(profile, fids, per) if len(fids) else 0.0
    return round(rt / max(rt - min(io, rt), 0.01 * rt), 3)


def _with_gain(r: Recommendation, profile, j: JobFacts, bound: float | None,
               findings: Sequence[Finding]) -> Recommendation:
    """The gain as a rule can know it: a bound for a change inside the I/O calls — over the I/O of the files its
    findings name when the change is code on those files and the findings list every file, else over all the I/O
    on the critical path (a hint or variable applies to every file) — unknown for a change that reshapes work."""
    if r.gain is None:
        return replace(r, gain="none")
    if r.gain != IO_ONLY or bound is None:
        return replace(r, gain="unknown")
    paths = None
    if all(c.kind in ("snippet", "shell") for c in r.changes) and "lfs setstripe" not in {c.name for c in r.changes}:
        paths = _files_of([f for f in findings if f.id in r.addresses])
    hi = files_bound(profile, paths, j) if paths else bound
    where = (f"the I/O on the {len(paths)} file(s) it concerns" if paths else
             f"all {j.io_wall_s:.2f} s of I/O on the critical path")
    return replace(r, gain="bound", speedup_low=1.0, speedup_high=hi,
                   gain_over=(f"the I/O on the {len(paths)} file(s) it concerns" if paths else
                              "all the I/O on the critical path"),
                   notes=r.notes + (f"bound: the change acts inside the I/O calls; removing {where} from the "
                                    f"{j.runtime_s:.2f} s run would make it {hi:.2f}x faster, so no more",))


def _nothing_to_gain(r: Recommendation, findings: Sequence[Finding]) -> bool:
    """A change whose true bound is under 1 % of the run, for findings of low or info severity only: listing it
    would send a user to work for nothing (a medium+ finding keeps its change: the report must address it)."""
    if r.gain != "bound" or r.speedup_high is None or r.speedup_high >= 1.01:
        return False
    sev = {f.id: f.severity for f in findings}
    return all(sev.get(a) in ("low", "info") for a in r.addresses)
