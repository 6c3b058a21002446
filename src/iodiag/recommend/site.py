"""What a site config (``[site]`` of the Config, written by ``iodiag site defaults``) adds to a user's findings.

The one place site advice meets a report: ``apply_site_advice`` appends the site's text for a finding id to
that finding's recommendation ("… Site advice (NAME): …").  Site thresholds need nothing here: they are ordinary Config
keys the detectors already read.
"""

from __future__ import annotations

from typing import Sequence

from ..config import Config
from ..findings import Finding


def site_advice(finding_id: str, config: Config) -> str | None:
    """The site's advice for a finding id, prefixed with the site's name; None when the site says nothing."""
    text = config.site.advice.get(finding_id)
    if not text:
        return None
    who = f"Site advice ({config.site.name})" if config.site.name else "Site advice"
    return f"{who}: {text.strip()}"


def in_scope(profile, scope: str | None) -> bool:
    """Whether a job is one a site advice of ``scope`` (``[site.advice_scope]``) is for: serial-read, reads through
    POSIX without MPI-IO; serial-write, writes the same way; no scope (advice written by hand): every job.  The
    same test as the site report's (site/sweeps.py ``scope_mask``), on the job's counters."""
    if not scope or profile is None:
        return True
    import numpy as np

    if profile.module("MPI-IO") is not None:
        return False
    t = profile.module("POSIX")
    if t is None:
        return False
    col = {"serial-read": "POSIX_READS", "serial-write": "POSIX_WRITES"}.get(scope)
    return True if col is None else float(np.clip(t[col], 0, None).sum()) > 0


def apply_site_advice(findings: Sequence[Finding], config: Config, profile=None) -> list[Finding]:
    """The findings with the site's advice appended to their recommendations, as its own sentence (in place;
    returned for chaining); with ``profile``, only where the advice's scope matches the job."""
    for f in findings:
        extra = site_advice(f.id, config)
        if not extra or extra in f.recommendation or not in_scope(profile, config.site.advice_scope.get(f.id)):
            continue
        base = f.recommendation.rstrip()
        if base and not base.endswith((".", "!", "?", ")")):
            base += "."
        f.recommendation = f"{base} {extra}" if base else extra
    return list(findings)


# What an admin can do about each finding across the site (site report); a site config's advice replaces it.
ADMIN_ACTIONS = {
    "small-io": "Tell these users to buffer or aggregate I/O (collective MPI-IO, larger HDF5/Zarr chunks, a bigger stdio buffer); document a recommended minimum request size.",
    "metadata-storm": "Ask these users to open files once and keep them open, and to avoid stat/seek loops; for many files, point them at a node-local or metadata-light scratch.",
    "many-small-files": "Recommend packing small files (HDF5/NetCDF containers, Zarr with larger chunks, tar) in the user docs; consider a small-file-friendly file system for these projects.",
    "random-access": "Recommend chunk shapes that match how data is read (e.g. time-series chunks for time-series reads) and read-ahead friendly access in the user docs.",
    "misaligned": "Publish the file system's block and stripe sizes and recommend aligned request sizes (HDF5 H5Pset_alignment, MPI-IO striping hints).",
    "shared-file-contention": "Set a default stripe count for shared files, or recommend collective I/O / one file per node to the users writing one file from many ranks.",
    "redundant-read": "Tell these users to read inputs once (cache in memory or node-local storage) instead of re-reading the same bytes.",
    "rank-imbalance": "Help these users spread I/O over ranks (collective buffering, aggregators) instead of funnelling it through a few.",
    "straggler-process": "Check the nodes and OSTs these jobs' slow processes used; recurring stragglers point to hardware or placement problems.",
    "straggler-task": "Help these users rebalance Dask tasks (chunk sizes, partitioning) so one task does not hold the job.",
    "inactive-ranks": "Point these users at fewer I/O ranks or aggregated I/O; idle ranks hold core-hours while a few do the I/O.",
    "partial-log": "Raise Darshan's memory limits (DARSHAN_MODMEM / DARSHAN_MOD_MEM) in the site's Darshan setup so logs are complete.",
    "stdio-heavy": "Recommend binary formats or larger stdio buffers (setvbuf) for bulk data instead of formatted text I/O.",
    "no-collective-io": "Make collective MPI-IO the default in the site's MPI-IO hints (romio_cb_write/romio_cb_read = enable) and document it.",
    "weak-scaling-loss": "Help these users check how their I/O scales with ranks (shared-file striping, aggregators).",
    "no-io": "Nothing to change: these jobs did no file I/O that Darshan saw.",
    "read-modify-write": "Recommend aligned, full-block writes (independent MPI-IO writes: data sieving off; collective writes on Lustre: romio_lustre_ds_in_coll=disable; aligned HDF5 chunks).",
    "task-overhead": "Recommend larger Dask chunks (around 100 MB) so task overhead does not dominate.",
}


def admin_action(finding_id: str) -> str:
    """What an admin can change about a finding across the site (the site report's recommendation)."""
    return ADMIN_ACTIONS.get(finding_id, "See the finding's recommendation in users' reports.")
