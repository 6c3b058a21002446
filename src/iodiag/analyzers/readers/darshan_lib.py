"""Binding to darshan-util (libdarshan-util), as shipped by pydarshan.

We use pydarshan's own C declarations and its bundled library, but not its
Python record builders: those build a dict per DXT segment, which is where
its time goes.  Records are returned by the C library and viewed with NumPy
(``np.frombuffer`` over the C struct), so no binary format is parsed here.

Importing this module does not import the ``darshan`` package (whose
``__init__`` pulls in pandas and matplotlib); the declarations file and the
library are located on disk.
"""

from __future__ import annotations

import glob
import importlib.util
import os
from functools import lru_cache

from ...errors import DependencyMissing

MOD_NAMES = (
    "NULL", "POSIX", "MPI-IO", "H5F", "H5D", "PNETCDF_FILE", "PNETCDF_VAR", "BG/Q",
    "LUSTRE", "STDIO", "DXT_POSIX", "DXT_MPIIO", "MDHIM", "APXC", "APMPI", "HEATMAP",
    "DFS", "DAOS",
)

STRUCTS = {
    "POSIX": "struct darshan_posix_file",
    "MPI-IO": "struct darshan_mpiio_file",
    "H5F": "struct darshan_hdf5_file",
    "H5D": "struct darshan_hdf5_dataset",
    "PNETCDF_FILE": "struct darshan_pnetcdf_file",
    "PNETCDF_VAR": "struct darshan_pnetcdf_var",
    "STDIO": "struct darshan_stdio_file",
    "DFS": "struct darshan_dfs_file",
    "DAOS": "struct darshan_daos_object",
    "BG/Q": "struct darshan_bgq_record",
}

# counter-name table prefix in libdarshan-util, per module
NAME_PREFIX = {
    "POSIX": "posix", "MPI-IO": "mpiio", "H5F": "h5f", "H5D": "h5d",
    "PNETCDF_FILE": "pnetcdf_file", "PNETCDF_VAR": "pnetcdf_var", "STDIO": "stdio",
    "DFS": "dfs", "DAOS": "daos", "BG/Q": "bgq", "LUSTRE_COMP": "lustre_comp",
}


def _darshan_dir() -> str:
    spec = importlib.util.find_spec("darshan")
    if spec is None or not spec.submodule_search_locations:
        raise DependencyMissing(
            "pydarshan (the 'darshan' Python package) is not installed",
            hint="install it with: pip install darshan==3.5.0",
        )
    return list(spec.submodule_search_locations)[0]


@lru_cache(maxsize=1)
def lib():
    """(ffi, libdarshan-util handle), loaded once."""
    import cffi

    ddir = _darshan_dir()
    spec = importlib.util.spec_from_file_location("_iodiag_darshan_api_def_c", os.path.join(ddir, "backend", "api_def_c.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    ffi = cffi.FFI()
    ffi.cdef(mod.load_darshan_header(""))
    candidates = sorted(glob.glob(os.path.join(os.path.dirname(ddir), "darshan.libs", "libdarshan-util*.so*")))
    candidates += ["libdarshan-util.so"]
    last = None
    for cand in candidates:
        try:
            return ffi, ffi.dlopen(cand)
        except OSError as exc:  # try the next candidate
            last = exc
    raise DependencyMissing(f"libdarshan-util could not be loaded ({last})", hint="reinstall pydarshan: pip install --force-reinstall darshan==3.5.0")


@lru_cache(maxsize=None)
def counter_names(mod: str, floats: bool = False) -> tuple[str, ...]:
    ffi, L = lib()
    prefix = NAME_PREFIX[mod]
    var = f"{prefix}_{'f_' if floats else ''}counter_names"
    end = f"{prefix.upper()}_{'F_' if floats else ''}NUM_INDICES"
    if mod == "MPI-IO":
        end = end.replace("MPI-IO", "MPIIO")
    try:
        arr = getattr(L, var)
    except Exception:  # noqa: BLE001 - cffi raises AttributeError or its own error for a missing symbol
        return ()
    names = []
    i = 0
    while True:
        name = ffi.string(arr[i]).decode()
        if name == end or i > 1000:
            break
        names.append(name)
        i += 1
    return tuple(names)


def lib_version() -> str:
    ffi, L = lib()
    return ffi.string(L.darshan_log_get_lib_version()).decode()
