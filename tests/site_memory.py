"""Peak memory of one ingest, measured in a fresh process (run by tests/test_site_memory.py).

    python tests/site_memory.py ARCHIVE OUT WORKERS BATCH_LOGS PART_ROWS

prints JSON: the high-water RSS (VmHWM, MiB) of this process (the driver, with the scheduler)
and of the largest Dask worker and reader process, after the ingest.
"""

from __future__ import annotations

import json
import sys


def hwm_mib(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def readers_hwm_mib() -> float:
    """The largest high-water RSS of this worker's reader processes."""
    from iodiag.analyzers.readers import isolate

    return max((hwm_mib(s.proc.pid) for s in list(isolate._SERVERS.values()) if s.proc is not None), default=0.0)


def main(argv: list[str]) -> None:
    import dataclasses

    from distributed import Client

    from iodiag.config import Config
    from iodiag.site import ingest_archive
    from iodiag.site.ingest import local_cluster

    archive, out, workers, batch, part = argv[0], argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    cfg = Config()
    cfg = dataclasses.replace(cfg, site=dataclasses.replace(cfg.site, batch_logs=batch, min_batch_logs=batch, part_rows=part))
    with local_cluster(workers) as lc, Client(lc) as client:
        s = ingest_archive(archive, out, client=client, config=cfg)
        w = client.run(hwm_mib)
        r = client.run(readers_hwm_mib)
        import pyarrow as pa

        pool = pa.default_memory_pool()
        print(json.dumps({"logs": s.logs_read, "tasks": s.tasks, "driver_mib": hwm_mib(), "worker_mib": max(w.values()),
                          "reader_mib": max(r.values()), "arrow_pool": pool.backend_name,
                          "arrow_peak_mib": pool.max_memory() / 2**20}))


if __name__ == "__main__":
    main(sys.argv[1:])
