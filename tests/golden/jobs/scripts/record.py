"""Re-record the golden embedded-collector jobs g1..g3 (tests/golden/jobs/gN) from w1.py..w3.py.

    PYTHONPATH=src python tests/golden/jobs/scripts/record.py
    IODIAG_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py -k embedded_job

Each workload runs under ``iodiag run --collector embedded`` in a fresh temporary folder (its outputs and the
job store live there); the job folders are copied over tests/golden/jobs/gN and the temporary folder is deleted,
so the golden reports are made with the workloads' outputs gone: what the reports need must be in the job
folders (their meta/snapshot.json).  The traces are cut to the records they hold (see ``trim_traces``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
JOBS = HERE.parent
# name: (script, output, options); g1 and g2 run without Dask capture, g3 with the task stream (no HTML report)
WORKLOADS = {"g1": ("w1.py", "out1", ["--no-dask"]), "g2": ("w2.py", "out2", ["--no-dask"]),
             "g3": ("w3.py", "out3.zarr", ["--no-dask-report"])}


def record(name: str, script: str, out: str, options: list[str], tmp: Path) -> Path:
    shutil.copy(HERE / script, tmp / script)
    store = tmp / "store"
    run = subprocess.run([sys.executable, "-m", "iodiag", "run", "--collector", "embedded", *options,
                          "--store", str(store), "--name", name, str(tmp / script), str(tmp / out)],
                         cwd=tmp, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise SystemExit(f"{name}: iodiag run failed ({run.returncode}):\n{run.stderr[-3000:]}")
    (folder,) = (store / "jobs").glob(f"*-{name}-*")
    return folder


def trim_traces(folder: Path) -> None:
    """Cut each ``.iot`` trace to the records its header counts: the collector grows a trace in chunks of 65,536
    records and the unused tail (zeros, ~3 MB a process) is never read (``trace_header`` reads ``count``)."""
    import numpy as np

    from iodiag.collectors.embedded.format import HEADER_DTYPE, HEADER_SIZE, RECORD_DTYPE

    for trace in (folder / "traces").glob("*.iot"):
        count = int(np.fromfile(trace, dtype=HEADER_DTYPE, count=1)[0]["count"])
        size = HEADER_SIZE + count * RECORD_DTYPE.itemsize
        if trace.stat().st_size > size:
            with trace.open("r+b") as fh:
                fh.truncate(size)


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="iodiag-golden-"))
    try:
        for name, (script, out, options) in WORKLOADS.items():
            folder = record(name, script, out, options, tmp)
            if not (folder / "meta" / "snapshot.json").is_file():
                raise SystemExit(f"{name}: the job has no metadata snapshot")
            dest = JOBS / name
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(folder, dest)
            trim_traces(dest)
            print(f"{name}: {folder.name} -> {dest}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
