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
import zlib
from functools import lru_cache

from ...cache import cache_root
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

# each module's record format version as darshan-util 3.5.0 (pydarshan's) writes and reads it (the *_VER macros of
# Darshan's include/*-log-format.h): a log whose module version is higher was written by a newer Darshan
MODULE_VERSIONS = {
    "POSIX": 4, "MPI-IO": 3, "H5F": 3, "H5D": 2, "PNETCDF_FILE": 3, "PNETCDF_VAR": 1, "BG/Q": 2, "LUSTRE": 2,
    "STDIO": 2, "DXT_POSIX": 1, "DXT_MPIIO": 2, "MDHIM": 1, "HEATMAP": 1, "DFS": 1, "DAOS": 1,
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


def _declarations(ddir: str):
    """pydarshan's C declarations as a cffi FFI.

    Parsing them (``ffi.cdef``) costs ~25 ms of CPU per process, more than decoding a typical log; cffi can
    instead write the parsed declarations out as a small Python module (its "out-of-line ABI mode") that loads
    in under a millisecond.  That module is kept in iodiag's cache, keyed by the declarations file and cffi's
    version, and rebuilt when either changes; without a writable cache the declarations are parsed each time.
    """
    import _cffi_backend  # the generated module needs only this, not the cffi package (5 ms to import)

    api_def = os.path.join(ddir, "backend", "api_def_c.py")
    try:
        st = os.stat(api_def)
        key = f"{st.st_size:x}-{st.st_mtime_ns:x}-{zlib.crc32(api_def.encode()):08x}-{_cffi_backend.__version__}"
    except OSError:
        key = None
    name = f"_iodiag_darshan_ffi_{key.replace('-', '_').replace('.', '_')}" if key else ""
    cached = os.path.join(str(cache_root()), "cffi", name + ".py") if key else ""
    if key and os.path.isfile(cached):
        try:
            spec = importlib.util.spec_from_file_location(name, cached)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)  # type: ignore[union-attr]
            return mod.ffi
        except Exception:  # noqa: BLE001 - a damaged cache file: parse the declarations again below
            pass
    spec = importlib.util.spec_from_file_location("_iodiag_darshan_api_def_c", api_def)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(mod.load_darshan_header(""))
    if key:
        try:
            from cffi.recompiler import make_py_source

            os.makedirs(os.path.dirname(cached), exist_ok=True)
            tmp = f"{cached}.{os.getpid()}.tmp"
            make_py_source(ffi, name, tmp)  # not verbose: nothing on stdout
            os.replace(tmp, cached)
        except Exception:  # noqa: BLE001 - no writable cache: parse each time, as before
            pass
    return ffi


@lru_cache(maxsize=1)
def lib():
    """(ffi, libdarshan-util handle), loaded once."""
    ddir = _darshan_dir()
    ffi = _declarations(ddir)
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
