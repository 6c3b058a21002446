"""NetCDF/HDF5 -> Zarr conversion with xarray and Dask, two strategies.

* ``to_zarr``: Dask-native — open lazily with chunks aligned to the target,
  ``Dataset.to_zarr`` writes every chunk from the workers.
* ``region``: a template store is written first (metadata only,
  ``compute=False``), then one task per block of leading-dimension chunks
  opens the source itself, reads its slab and writes it with
  ``to_zarr(region=...)`` — the pattern of the Summit thesis' converter.

Options: target chunk shape or target chunk size in MB, compressor
(none/zlib/zstd/blosc), Zarr format 2 or 3, consolidated metadata, workers ×
threads on a LocalCluster (processes), a threads-only cluster, the synchronous
scheduler, or batch jobs through dask-jobqueue (slurm/lsf/pbs).

Run as a script (``python -m iodiag.workloads.convert --src a.nc --dst a.zarr``)
or call ``convert(src=..., dst=...)``; a results record is written next to the
output (or into the iodiag job folder).
"""

from __future__ import annotations

import shutil
import time
import warnings
from pathlib import Path
from typing import Any

from ..errors import InputNotFound, UsageError
from ._common import (CLUSTERS, COMPRESSORS, Param, build_parser, chunks_for_target, dask_client, io_delta,
                      parse_shape, proc_io, results_path, run_main, tree_bytes, write_record, zarr_encoding)

STRATEGIES = ("to_zarr", "region")

PARAMS = (
    Param("src", str, None, "input NetCDF4/HDF5 file, or a Zarr store to rechunk into dst", required=True),
    Param("dst", str, None, "output Zarr store (directory; replaced if present)", required=True),
    Param("variable", str, None, "variable to convert (default: the data variables of highest rank)"),
    Param("strategy", str, "to_zarr", "to_zarr (Dask-native) or region (template + region writes)",
          choices=STRATEGIES),
    Param("chunks", str, None, "target chunk shape, e.g. 1,19,181,360 (default: 1 along the first dim)",
          instead_of=("chunk_mb",)),
    Param("chunk_mb", float, None, "target chunk size in MB instead of --chunks (e.g. 64)", instead_of=("chunks",)),
    Param("compressor", str, "none", "compressor of the Zarr store", choices=COMPRESSORS),
    Param("zarr_format", int, 2, "Zarr format", choices=(2, 3)),
    Param("consolidated", bool, True, "write consolidated metadata"),
    Param("workers", int, 1, "Dask workers"),
    Param("threads", int, 1, "threads per worker"),
    Param("cluster", str, "local", "local (processes), threads, sync, or slurm/lsf/pbs via dask-jobqueue",
          choices=CLUSTERS),
    Param("memory", str, "2GiB", "memory per worker"),
    Param("walltime", str, "00:30:00", "jobqueue: walltime of each worker job"),
    Param("queue", str, None, "jobqueue: queue/partition"),
    Param("account", str, None, "jobqueue: account/project"),
    Param("region_chunks", int, 1, "region: leading-dim chunks written per task"),
    Param("results", str, None, "results record path (default: $IODIAG_JOB_DIR/results.json or <dst>.results.json)"),
)


def _target_chunks(shape: tuple[int, ...], itemsize: int, chunks: str | None, chunk_mb: float | None) -> tuple[int, ...]:
    if chunks and chunk_mb:
        raise UsageError("give either --chunks or --chunk-mb, not both")
    if chunk_mb:
        if chunk_mb <= 0:
            raise UsageError(f"--chunk-mb {chunk_mb} must be positive")
        return chunks_for_target(shape, itemsize, chunk_mb)
    parsed = parse_shape(chunks, what="chunks")
    if parsed is None:
        return (1, *shape[1:])
    if len(parsed) != len(shape):
        raise UsageError(f"chunks {parsed} has {len(parsed)} dimensions, the variable has {len(shape)}")
    return tuple(min(c, n) for c, n in zip(parsed, shape))


def _open(src: Path, chunks: dict[str, int] | None):
    """The source dataset: a NetCDF4/HDF5 file, or a Zarr store (then the conversion rechunks a copy; the
    source's own chunk and codec encoding is dropped so the new one applies)."""
    import xarray as xr

    if Path(src).is_dir():
        ds = xr.open_zarr(src, chunks=chunks)
        for v in ds.variables.values():
            v.encoding = {}
        return ds
    return xr.open_dataset(src, engine="netcdf4", chunks=chunks)


def _write_region(src: str, dst: str, dim: str, i0: int, i1: int, names: list[str], zarr_format: int) -> int:
    """One task of the region strategy: read [i0, i1) of `dim` from src, write it into dst."""
    import xarray as xr

    with xr.open_dataset(src, engine="netcdf4") as ds:
        part = ds[names].isel({dim: slice(i0, i1)}).load()
    keep = [n for n in names if dim in part[n].dims]
    drop = [c for c in part.coords if dim not in part[c].dims]
    part[keep].drop_vars(drop).to_zarr(dst, region={dim: slice(i0, i1)}, zarr_format=zarr_format,
                                       consolidated=False)
    return int(sum(part[n].nbytes for n in keep))


def convert(*, src: str | Path, dst: str | Path, variable: str | None = None, strategy: str = "to_zarr",
            chunks: str | None = None, chunk_mb: float | None = None, compressor: str = "none",
            zarr_format: int = 2, consolidated: bool = True, workers: int = 1, threads: int = 1,
            cluster: str = "local", memory: str = "2GiB", walltime: str = "00:30:00", queue: str | None = None,
            account: str | None = None, region_chunks: int = 1, results: str | Path | None = None) -> dict[str, Any]:
    """Convert src to a Zarr store at dst; return (and write) the results record."""
    params = {k: v for k, v in locals().items() if k != "results"}
    params["src"], params["dst"] = str(src), str(dst)
    for p in PARAMS:
        if p.choices and params.get(p.name) not in p.choices:
            raise UsageError(f"{p.name} = {params.get(p.name)!r} is not one of {list(p.choices)}")
    if workers < 1 or threads < 1:
        raise UsageError(f"workers ({workers}) and threads ({threads}) must be at least 1")
    src, dst = Path(src), Path(dst)
    if not src.exists():
        raise InputNotFound(f"input {src} does not exist", hint="create one with `iodiag workload gen`")
    timings: dict[str, float] = {}
    t_all = time.perf_counter()
    names, shape, dims, itemsize = _probe(src, variable)
    target = _target_chunks(shape, itemsize, chunks, chunk_mb)
    chunk_map = dict(zip(dims, target))
    if dst.exists():
        shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
    dst.parent.mkdir(parents=True, exist_ok=True)
    encoding = {n: zarr_encoding(compressor, zarr_format, target) for n in names}
    cluster_info: dict[str, Any] = {}
    io_before = proc_io()
    worker_io: dict[str, int] = {}
    n_tasks = 0
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Cc]onsolidated metadata.*")
        with dask_client(cluster=cluster, workers=workers, threads=threads, memory=memory, walltime=walltime,
                         queue=queue, account=account, info=cluster_info,
                         log_directory=str(dst.parent / f"{dst.name}.worker-logs")) as client:
            wio0 = client.run(proc_io) if client is not None else {}
            t0 = time.perf_counter()
            ds = _open(src, chunk_map)[names]
            timings["open"] = time.perf_counter() - t0
            if strategy == "to_zarr":
                t0 = time.perf_counter()
                ds.to_zarr(dst, mode="w", encoding=encoding, zarr_format=zarr_format, consolidated=consolidated)
                timings["write"] = time.perf_counter() - t0
                n_tasks = int(sum(len(ds[n].data.__dask_graph__()) for n in names))
            else:
                n_tasks = _write_regions(ds, client, src, dst, names, encoding, zarr_format, consolidated, dims, shape,
                                         target, region_chunks, timings)
            ds.close()
            if client is not None:
                wio1 = client.run(proc_io)
                for w, after in wio1.items():
                    for k, v in io_delta(wio0.get(w, {}), after).items():
                        worker_io[k] = worker_io.get(k, 0) + v
    timings["total"] = time.perf_counter() - t_all
    client_io = io_delta(io_before, proc_io())
    record = _results_record(params, names, shape, dims, itemsize, target, n_tasks, cluster_info, timings, dst,
                             client_io, worker_io)
    record["results_path"] = str(write_record(results_path(results, dst.with_name(dst.name + ".results.json")),
                                              record))
    return record


def _probe(src: Path, variable: str | None) -> tuple[list[str], tuple[int, ...], tuple[str, ...], int]:
    """(variables to convert, shape, dims and item size of the first) from a look at the input."""
    with _open(src, None) as probe:
        # default: the data variables of highest rank (for plain HDF5, whose coordinates are
        # datasets too, that leaves the field itself)
        top = max((probe[n].ndim for n in probe.data_vars), default=0)
        names = [variable] if variable else [n for n in probe.data_vars if probe[n].ndim == top]
        if variable and variable not in probe.data_vars:
            raise UsageError(f"{src}: no variable {variable!r}", hint=f"variables: {', '.join(probe.data_vars)}")
        main = probe[names[0]]
        return names, tuple(main.shape), tuple(main.dims), main.dtype.itemsize


def _write_regions(ds, client, src: Path, dst: Path, names: list[str], encoding: dict, zarr_format: int,
                   consolidated: bool, dims: tuple, shape: tuple, target: tuple, region_chunks: int,
                   timings: dict[str, float]) -> int:
    """The ``region`` strategy: the store's template written first, then blocks of ``region_chunks`` chunks along
    the leading dimension, each by one task that opens the input itself; the number of tasks."""
    t0 = time.perf_counter()
    ds.to_zarr(dst, mode="w", encoding=encoding, zarr_format=zarr_format, consolidated=False,
               compute=False)
    timings["template"] = time.perf_counter() - t0
    lead, step = dims[0], target[0] * max(1, region_chunks)
    blocks = [(i, min(shape[0], i + step)) for i in range(0, shape[0], step)]
    t0 = time.perf_counter()
    if client is None:
        for i0, i1 in blocks:
            _write_region(str(src), str(dst), lead, i0, i1, names, zarr_format)
    else:
        futs = [client.submit(_write_region, str(src), str(dst), lead, i0, i1, names, zarr_format,
                              pure=False) for i0, i1 in blocks]
        client.gather(futs)
    if consolidated:
        import zarr

        zarr.consolidate_metadata(str(dst))
    timings["write"] = time.perf_counter() - t0
    return len(blocks)


def _results_record(params: dict, names: list[str], shape: tuple, dims: tuple, itemsize: int, target: tuple,
                    n_tasks: int, cluster_info: dict, timings: dict, dst: Path, client_io: dict,
                    worker_io: dict) -> dict[str, Any]:
    """The results record: what was converted, how, the timings, bytes logical and stored, I/O of the processes."""
    stored, nfiles = tree_bytes(dst)
    logical = int(sum(_nbytes(shape, itemsize) for _ in names))
    record = {
        "workload": "convert",
        "params": params,
        "variables": names,
        "shape": list(shape),
        "dims": list(dims),
        "chunks": list(target),
        "chunk_MB": _nbytes(target, itemsize) / 1e6,
        "n_tasks": n_tasks,
        "cluster": {k: v for k, v in cluster_info.items() if k != "jobqueue_script"},
        "timings_s": timings,
        "bytes": {"logical": logical, "stored": stored, "files": nfiles,
                  # this process plus reaped children (LocalCluster workers end up here after close)
                  "process_tree_io": client_io,
                  "workers_io": worker_io},
        "metrics": {
            "throughput_MBps": logical / 1e6 / timings["write"] if timings.get("write") else None,
            "compression_ratio": logical / stored if stored else None,
        },
    }
    if "jobqueue_script" in cluster_info:
        record["jobqueue_script"] = cluster_info["jobqueue_script"]
    return record


def _nbytes(shape, itemsize) -> int:
    n = itemsize
    for s in shape:
        n *= int(s)
    return n


EXAMPLES = """\
  %(prog)s --src data/ta.nc --dst data/ta.zarr --compressor zstd --workers 2
  %(prog)s --src data/ta.nc --dst data/ta.zarr --strategy region --zarr-format 3 --chunk-mb 64
  %(prog)s --src data/ta.nc --dst /scratch/ta.zarr --cluster slurm --workers 4 --queue debug
"""


def main(argv: list[str] | None = None) -> int:
    args = build_parser("python -m iodiag.workloads.convert", __doc__.split("\n\n")[0], PARAMS,
                        EXAMPLES).parse_args(argv)
    rec = convert(**vars(args))
    t = rec["timings_s"]
    print(f"convert: {rec['params']['src']} -> {rec['params']['dst']} [{rec['params']['strategy']}, "
          f"zarr v{rec['params']['zarr_format']}, {rec['params']['compressor']}, chunks {tuple(rec['chunks'])}] "
          f"write {t['write']:.2f} s, total {t['total']:.2f} s, "
          f"{rec['metrics']['throughput_MBps']:.1f} MB/s (record {rec['results_path']})")
    return 0


if __name__ == "__main__":
    run_main(main)
