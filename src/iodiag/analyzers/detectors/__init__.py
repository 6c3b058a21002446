"""Detectors: small pure functions JobProfile + Config -> list[Finding].

``diagnose`` runs every registered detector and returns ranked findings.
"""

from __future__ import annotations

from typing import Callable

from ...config import Config
from ...findings import Finding, rank_findings
from ...profile import JobProfile

Detector = Callable[[JobProfile, Config], list[Finding]]
DETECTORS: list[Detector] = []


def diagnose(profile: JobProfile, config: Config | None = None) -> list[Finding]:
    cfg = config or Config()
    out: list[Finding] = []
    for det in DETECTORS:
        out.extend(det(profile, cfg))
    muted = set(cfg.report.mute)
    return rank_findings([f for f in out if f.id not in muted])



def _register() -> None:
    from . import access, coverage, layers, metadata, mpi, parallel, smallio, tasks

    DETECTORS.extend([
        coverage.detect_no_io,
        coverage.detect_partial_log,
        smallio.detect_small_io,
        metadata.detect_metadata_storm,
        metadata.detect_many_small_files,
        access.detect_random_access,
        access.detect_misaligned,
        access.detect_redundant_read,
        layers.detect_read_modify_write,
        coverage.detect_stdio_heavy,
        mpi.detect_shared_file_contention,
        mpi.detect_no_collective_io,
        parallel.detect_rank_imbalance,
        parallel.detect_straggler_process,
        parallel.detect_inactive_ranks,
        tasks.detect_straggler_task,
        tasks.detect_task_overhead,
    ])


_register()
