"""Job functions for the site reader process that fail on purpose (tests/test_site_reader_failures.py).

They run inside the reader process (named by "site_faults:<name>", found through PYTHONPATH)
and wrap the real ``iodiag.site.job.job_rows``; the failure hits only the job whose
job id is in $SITE_FAULTS_JOB (default 100), every other job gets its real rows.
"""

from __future__ import annotations

import os
import signal
import time

from iodiag.site import job



def _chosen(unit) -> bool:
    return unit.job_id == os.environ.get("SITE_FAULTS_JOB", "100")


def diagnose_raises(unit, results, cfg, run):
    """The real job_rows, with ``diagnose`` raising for the chosen job."""
    if not _chosen(unit):
        return job.job_rows(unit, results, cfg, run)
    real = job.diagnose

    def boom(profile, config):
        raise RuntimeError(f"injected diagnose failure in process {os.getpid()}")

    job.diagnose = boom
    try:
        return job.job_rows(unit, results, cfg, run)
    finally:
        job.diagnose = real


def killed_while_building(unit, results, cfg, run):
    """The reader process is killed (SIGKILL) while it works on the chosen job."""
    if _chosen(unit):
        os.kill(os.getpid(), signal.SIGKILL)
    return job.job_rows(unit, results, cfg, run)


def hangs_while_building(unit, results, cfg, run):
    """The chosen job never finishes (longer than any timeout the test sets)."""
    if _chosen(unit):
        time.sleep(600)
    return job.job_rows(unit, results, cfg, run)
