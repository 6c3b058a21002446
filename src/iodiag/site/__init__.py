"""Site analysis: ingest a Darshan archive in parallel, report what hurts the site.

``ingest_archive`` (ingest.py) walks ``YYYY/M/D`` trees (walk.py), reads jobs
on Dask (worker.py): each worker's long-lived reader process reads a job's
logs and builds, diagnoses and featurizes it with the one loader and the one
set of detectors (job.py), sending back only the rows; the driver writes a
parquet dataset (store.py) of per-job and per-program features and findings
(features.py).  ``site_report`` (aggregate.py) computes what the
report shows; render.py only formats it.  pandas/pyarrow/distributed are
imported inside functions.
"""

from __future__ import annotations

from .ingest import IngestSummary, ingest_archive
from .store import feature_matrix, load_site

__all__ = ["IngestSummary", "feature_matrix", "ingest_archive", "load_site"]
