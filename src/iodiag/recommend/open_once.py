"""Open a file once instead of at every step: the change for a file the program re-opens (metadata-storm's
re-opened file, or every file when opens outnumber accesses), in the program's own language and open mode.

Part of recommend/fixes.py's advice path (``FIXES``), kept apart for size; ``iodiag verify`` applies the Python
forms inside an unmodified program through its preload (``open_once``).
"""

from __future__ import annotations

from dataclasses import replace

from ..findings import Finding
from .jobfacts import IO_ONLY, RESHAPES, JobFacts
from .recommendation import Change, Recommendation


def _file_writes(profile, path: str) -> tuple[float, float]:
    """(write calls, opens) of ``path`` in the job."""
    import numpy as np

    from ..analyzers.metrics import metrics_of

    m = metrics_of(profile)
    hit = np.isin(m.file_ids, profile.files["file_id"][profile.files["path"] == path])
    fs = m.file_stats
    return float(fs["writes"][hit].sum()), float(fs["opens"][hit].sum())


def _file_written(profile, path: str) -> bool:
    """Whether the job writes ``path`` at its re-opens: write calls at least half as many as its opens (a file
    written once, then re-opened to read it step by step, is a read loop)."""
    writes, opens = _file_writes(profile, path)
    return writes > 0 and writes * 2 >= opens


def open_once_rec(f: Finding, j: JobFacts, path: str | None, profile=None) -> Recommendation:
    """Open the re-opened file (``path``; None: each file) once: the change in the program's own language and
    mode (a Python append loop for a file re-opened to write, a read loop, else the C open call of its layer)."""
    if path and profile is not None:  # the layers that file itself was opened through
        from ..analyzers.detectors.layers import file_layers

        fid = profile.files["file_id"][profile.files["path"] == path]
        j = replace(j, layers=frozenset(file_layers(profile, fid)) or j.layers)
    p = path or (f.files[0] if f.files else "path")
    name = p.rsplit("/", 1)[-1]
    opens = int((f.facts.get("reopened") or {}).get("opens") or f.evidence.get("opens_count", 0))
    title = (f"Open {name} once instead of {opens:,} times" if path else
             f"Open each file once per process ({opens:,} opens of {j.files:,} file(s))")
    netcdf = name.endswith((".nc", ".nc4", ".cdf")) or "PnetCDF" in j.layers
    hdf5 = name.lower().endswith((".h5", ".hdf5", ".he5"))
    array = netcdf or hdf5 or name.endswith((".grib", ".grb2"))
    zarr = (f.facts.get("reopened") or {}).get("zarr") if path else None  # "append" / "read": Zarr metadata
    # whether that file is written at its re-opens (each file: the finding's first file, not whether the job
    # writes anything: a job reading NetCDF files and writing Zarr does not append to its NetCDF files)
    written = _file_written(profile, p) if profile is not None and (path or f.files) else j.writes
    # a C open mode: read-only unless the job writes that file at all (any write needs write access)
    any_write = (_file_writes(profile, p)[0] > 0) if profile is not None and (path or f.files) else j.writes
    if j.python and array and written and (netcdf or hdf5):
        # the file is re-opened to write (append) each step: open it once for appending, close it after the loop
        if hdf5 and not netcdf:
            code = (f'h5 = h5py.File("{p}", "a")  # once, before the loop\n'
                    'for t, step in enumerate(steps):\n'
                    '    h5["var"][t] = step  # write step t (resize an unlimited dataset first)\n'
                    'h5.close()  # once, after the loop')
        else:
            code = (f'nc = netCDF4.Dataset("{p}", "a")  # once, before the loop\n'
                    'for t, step in enumerate(steps):\n'
                    '    nc["var"][t] = step  # write step t\n'
                    '    nc.sync()  # only if readers need each step on disk at once\n'
                    'nc.close()  # once, after the loop')
    elif j.python and zarr:  # no handle to keep: each to_zarr / open_zarr call reads the store's metadata
        store = p[: p.index(".zarr/") + 5] if ".zarr/" in p else (p.rsplit("/", 1)[0] if "/" in p else ".")
        if zarr == "append":
            title = f"Append many time steps per to_zarr call ({name} is opened {opens:,} times)"
            code = ('batch = []  # the Datasets of the steps not written yet\n'
                    'for i, step in enumerate(steps):  # step: an xr.Dataset of one time step\n'
                    '    batch.append(step)\n'
                    '    if len(batch) == 24 or i == len(steps) - 1:  # one call per 24 steps\n'
                    f'        xr.concat(batch, "time").to_zarr("{store}", append_dim="time")  # mode="w" for the first\n'
                    '        batch = []')
        else:
            title = f"Open the Zarr store once ({name} is opened {opens:,} times)"
            code = (f'ds = xr.open_zarr("{store}")  # once, before the loop\n'
                    'for t in range(ds.sizes["time"]):\n    step = ds.isel(time=t).load()')
    elif j.python and array:
        code = (f'ds = xr.open_dataset("{p}")  # once, before the loop\n'
                'for t in range(ds.sizes["time"]):\n    step = ds.isel(time=t).load()')
    elif j.python:
        mode = "rb" if not j.writes else "r+b"
        code = f'f = open("{p}", "{mode}")  # once, before the loop; f.seek(off) per step'
    elif ("HDF5" in j.layers or name.lower().endswith((".h5", ".hdf5", ".he5"))) and not netcdf:
        code = f'f = H5Fopen("{p}", {"H5F_ACC_RDWR" if any_write else "H5F_ACC_RDONLY"}, fapl);  /* once */'
    elif netcdf:
        code = f'nc_open("{p}", {"NC_WRITE" if any_write else "NC_NOWRITE"}, &ncid);  /* once */'
    elif "MPI-IO" in j.layers:
        code = f'MPI_File_open(comm, "{p}", mode, info, &fh);  /* once */'
    elif j.top == "STDIO":
        code = f'fp = fopen("{p}", "{"r" if not j.writes else "r+"}");  /* once */'
    else:
        code = f'fd = open("{p}", {"O_RDONLY" if not j.writes else "O_RDWR"});  /* once */'
    # opening a NetCDF/HDF5 file also decodes its header, a to_zarr/open_zarr call its metadata (work outside the
    # I/O calls): no bound for that
    return Recommendation(id="open-once", title=title, settings={"open_once": path or True},
                          changes=(Change("snippet", code),), gain=RESHAPES if array or zarr or "HDF5" in j.layers else IO_ONLY)


def probe_dominant(f: Finding) -> bool:
    """Whether netCDF-C's open probe (redundant-read's facts) is at least half of the re-read bytes."""
    ev, probe = f.evidence, float(f.facts.get("probe_bytes") or 0)
    return probe > 0 and probe >= 0.5 * (float(ev["bytes_read"]) - float(ev["file_bytes"]))


__all__ = ["open_once_rec", "probe_dominant"]
