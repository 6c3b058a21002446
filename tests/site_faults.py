"""Job functions for the site reader process that fail on purpose (tests/test_site_reader_failures.py).

They run inside the reader process (named by "site_faults:<name>", found through PYTHONPATH)
and wrap the real ``iodiag.site.job.job_rows``; the failure hits only jobs whose
job id is FAIL_JOB_ID, every other job gets its real rows.
"""

from __future__ import annotations

import os
import signal
import time

from iodiag.site import job

FAIL_JOB_ID = "100"


def diagnose_raises(unit, results, cfg, run):
    """The real job_rows, with ``diagnose`` raising for the chosen job."""
    if unit.job_id != FAIL_JOB_ID:
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
    if unit.job_id == FAIL_JOB_ID:
        os.kill(os.getpid(), signal.SIGKILL)
    return job.job_rows(unit, results, cfg, run)


def hangs_while_building(unit, results, cfg, run):
    """The chosen job never finishes (longer than any timeout the test sets)."""
    if unit.job_id == FAIL_JOB_ID:
        time.sleep(600)
    return job.job_rows(unit, results, cfg, run)
