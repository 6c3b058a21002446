"""Settings applied to an unmodified Python program by ``iodiag verify`` (loaded as ``sitecustomize``).

``iodiag verify`` puts this file's folder first on ``PYTHONPATH`` of its timed runs (both sides, so both pay
the same start-up) and, on the changed side only, names the settings in ``$IODIAG_VERIFY_OVERRIDES`` (JSON).
Python imports ``sitecustomize`` at start-up; this one chains to the next ``sitecustomize`` on ``sys.path`` (the
environment's own, if any), then, when there are settings, hooks the imports of ``xarray`` and ``distributed``
and patches, in the program's own interpreter:

- ``xarray.open_dataset`` / ``open_mfdataset`` (when the call asks for Dask chunks) and ``xarray.open_zarr``:
  ``chunks``; ``paths`` redirects a store or file the program opens to another (a rechunked copy);
- ``xarray.Dataset.chunk`` / ``DataArray.chunk`` (and ``open_dataarray`` as ``open_dataset``): ``chunks``;
- ``xarray.Dataset.to_zarr``: ``chunks`` (the Zarr chunks it writes), ``compressor``, ``zarr_format``;
- ``distributed.LocalCluster`` (which ``Client()`` makes when given no address): ``workers``, ``threads``;
- ``netCDF4.Dataset`` / ``h5py.File``: ``open_once`` (a path, a list of paths, or true for every file): a file
  the program opens again (modes "r", "a", "r+") gets back the handle of its first open, whose ``close()`` only
  syncs/flushes it; the real close is at exit, in opening order.  A create or truncate ("w", "x", ...) of a kept
  file really closes it first and is the library's own call; so is an open with options the cache does not know
  (memory, diskless, parallel, drivers, ...).  ``isinstance(h, netCDF4.Dataset)`` keeps working.

``chunks`` is ``{"dim": n, ...}`` (merged into what the program asked for) or a list (one length per dimension,
matched to the dimensions of the dataset's variables of that rank).  Every override that takes effect is
appended to ``$IODIAG_VERIFY_RECORD`` (JSON lines: setting, where, value, what the program asked for), so that
verify reports what was applied, and what never was.  Standard library only until the patched module is
imported: the program may run in an interpreter where iodiag is not installed.  Nothing here raises into the
program: an override that fails is recorded as an error and the call runs as the program wrote it.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import threading

OVERRIDES_VAR = "IODIAG_VERIFY_OVERRIDES"
RECORD_VAR = "IODIAG_VERIFY_RECORD"
_HERE = os.path.dirname(os.path.abspath(__file__))
_local = threading.local()
_lock = threading.Lock()
_open_lock = threading.RLock()  # the kept files (open_once); _record takes _lock


def _chain():
    """Run the sitecustomize this one shadows (the next one on sys.path), as Python would have."""
    path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    try:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception as exc:  # noqa: BLE001 - what Python itself does with a failing sitecustomize: go on
        print(f"Error in sitecustomize ({spec.origin}); set PYTHONVERBOSE for traceback: {exc!r}", file=sys.stderr)


def _record(**entry):
    path = os.environ.get(RECORD_VAR)
    if not path:
        return
    entry["pid"] = os.getpid()
    try:
        with _lock, open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, default=str) + "\n")
    except Exception:  # noqa: BLE001 - never disturb the program
        pass


def _settings():
    raw = os.environ.get(OVERRIDES_VAR)
    if not raw:
        return None
    try:
        val = json.loads(raw)
    except ValueError as exc:
        _record(event="error", error=f"{OVERRIDES_VAR} is not JSON: {exc}")
        return None
    return val if isinstance(val, dict) and val else None


# ------------------------------------------------------------------------------------------------ post-import hooks
class _Loader(importlib.abc.Loader):
    def __init__(self, inner, hook):
        self._inner, self._hook = inner, hook

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        try:
            self._hook(module)
        except Exception as exc:  # noqa: BLE001
            _record(event="error", error=f"patching {module.__name__}: {exc!r}")

    def __getattr__(self, name):  # get_resource_reader, is_package, get_source, ...
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, hooks):
        self.hooks = hooks
        self.busy = set()

    def find_spec(self, name, path=None, target=None):
        if name not in self.hooks or name in self.busy:
            return None
        self.busy.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy.discard(name)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, self.hooks.pop(name))
        return spec


# ------------------------------------------------------------------------------------------------ the overrides
class _Inside:
    """Reentrancy guard: an override applies at the outermost patched call only (open_zarr calls open_dataset)."""

    def __enter__(self):
        depth = getattr(_local, "depth", 0)
        _local.depth = depth + 1
        return depth == 0

    def __exit__(self, *exc):
        _local.depth -= 1
        return False


def _dims_of(ds, n):
    """The dimensions of the first data variable of rank ``n`` (then of any variable); a DataArray's own."""
    if not hasattr(ds, "data_vars"):
        return tuple(ds.dims) if ds.ndim == n else None
    for group in (ds.data_vars, ds.variables):
        for v in group.values():
            if v.ndim == n:
                return tuple(v.dims)
    return None


def _mapping(chunks, ds):
    """The chunk setting as {dim: n} for dataset ``ds`` (None when a list cannot be matched to its dims)."""
    if isinstance(chunks, dict):
        return {str(k): v for k, v in chunks.items()}
    dims = _dims_of(ds, len(chunks))
    return None if dims is None else {d: int(c) for d, c in zip(dims, chunks) if d in ds.dims}


def _merged(asked, want):
    if isinstance(asked, dict):
        out = dict(asked)
        out.update(want)
        return out
    return dict(want)


def _path_arg(args, kwargs, key):
    if args:
        return args[0], "arg"
    return kwargs.get(key), "kw"


def _redirect(paths, args, kwargs, key, where):
    """args/kwargs with the opened path replaced by its redirect (``paths``: absolute original -> new)."""
    if not paths:
        return args, kwargs
    p, how = _path_arg(args, kwargs, key)
    if not isinstance(p, (str, os.PathLike)):
        return args, kwargs
    real = os.path.realpath(os.fspath(p))
    new = next((v for k, v in paths.items() if os.path.realpath(k) == real), None)
    if new is None:
        return args, kwargs
    _record(setting="paths", where=where, value=new, asked=os.fspath(p))
    if how == "arg":
        return (new,) + tuple(args[1:]), kwargs
    kwargs = dict(kwargs)
    kwargs[key] = new
    return args, kwargs


def _patch_xarray(xr, s):
    chunks, paths = s.get("chunks"), s.get("paths") or {}

    def opener(name, key, always):
        orig = getattr(xr, name)

        def patched(*args, **kwargs):
            with _Inside() as outer:
                if not outer:
                    return orig(*args, **kwargs)
                args, kwargs = _redirect(paths, args, kwargs, key, f"xarray.{name}")
                asked = kwargs.get("chunks", "auto" if name == "open_zarr" else None)
                if chunks is None or (asked is None and not always):
                    return orig(*args, **kwargs)
                want = chunks
                if not isinstance(chunks, dict):  # a list: learn the dims first (metadata only, no data read)
                    try:
                        peek = orig(*args, **{**kwargs, "chunks": None})
                        want = _mapping(chunks, peek)
                        peek.close()
                    except Exception as exc:  # noqa: BLE001
                        _record(event="error", error=f"xarray.{name}: dims of {chunks}: {exc!r}")
                        want = None
                    if want is None:
                        return orig(*args, **kwargs)
                new = _merged(asked, want)
                _record(setting="chunks", where=f"xarray.{name}", value=new, asked=asked)
                return orig(*args, **{**kwargs, "chunks": new})

        patched.__wrapped__ = orig
        patched.__name__ = orig.__name__
        patched.__doc__ = orig.__doc__
        setattr(xr, name, patched)

    opener("open_dataset", "filename_or_obj", False)
    opener("open_mfdataset", "paths", False)
    opener("open_zarr", "store", True)
    opener("open_dataarray", "filename_or_obj", False)

    Dataset = xr.Dataset
    orig_chunk, orig_to_zarr = Dataset.chunk, Dataset.to_zarr

    def chunker(cls):
        orig = cls.chunk

        def chunk(self, *args, **kwargs):
            with _Inside() as outer:
                want = _mapping(chunks, self) if outer and chunks is not None else None
                if not want:
                    return orig(self, *args, **kwargs)
                asked = args[0] if args else ({k: v for k, v in kwargs.items() if k in self.dims}
                                              or kwargs.get("chunks"))
                extra = {k: v for k, v in kwargs.items() if k not in self.dims and k != "chunks"}
                new = _merged(asked, want)
                _record(setting="chunks", where=f"xarray.{cls.__name__}.chunk", value=new, asked=asked)
                return orig(self, new, *args[1:], **extra)

        chunk.__wrapped__ = orig
        cls.chunk = chunk

    chunker(xr.DataArray)

    def to_zarr(self, *args, **kwargs):
        with _Inside() as outer:
            if not outer:
                return orig_to_zarr(self, *args, **kwargs)
            ds = self
            if kwargs.get("region") is None and kwargs.get("append_dim") is None and (
                    chunks is not None or "compressor" in s or "zarr_format" in s):
                ds, kwargs = _zarr_overrides(ds, kwargs, s, orig_chunk)
            return orig_to_zarr(ds, *args, **kwargs)

    chunker(Dataset)
    Dataset.to_zarr = to_zarr
    _record(event="patched", module="xarray")


def _codec(name, zarr_format):
    """The compressor iodiag's workloads use for ``name`` (level 1 zstd/zlib, lz4 Blosc), for the format."""
    if name in (None, "none"):
        return None
    if zarr_format == 2:
        import numcodecs

        return {"zstd": lambda: numcodecs.Zstd(level=1), "zlib": lambda: numcodecs.Zlib(level=1),
                "blosc": lambda: numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)}[name]()
    import zarr.codecs as zc

    return {"zstd": lambda: zc.ZstdCodec(level=1), "zlib": lambda: zc.GzipCodec(level=1),
            "blosc": lambda: zc.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")}[name]()


def _zarr_major():
    try:
        import zarr

        return int(zarr.__version__.split(".")[0])
    except Exception:  # noqa: BLE001
        return 3


def _default_format():
    """The Zarr format to_zarr writes when the program does not say."""
    if _zarr_major() < 3:
        return 2
    try:
        import zarr

        return int(zarr.config.get("default_zarr_format", 3))
    except Exception:  # noqa: BLE001
        return 3


def _zarr_overrides(ds, kwargs, s, orig_chunk):
    """The dataset and to_zarr arguments with the chunks, compressor and format of the settings."""
    kwargs = dict(kwargs)
    enc = {k: dict(v) for k, v in (kwargs.get("encoding") or {}).items()}
    if "zarr_format" in s:
        _record(setting="zarr_format", where="xarray.Dataset.to_zarr", value=int(s["zarr_format"]),
                asked=kwargs.get("zarr_format"))
        kwargs["zarr_format"] = int(s["zarr_format"])
    fmt = kwargs.get("zarr_format") or _default_format()
    chunks = s.get("chunks")
    want = _mapping(chunks, ds) if chunks is not None else None
    if want:
        try:
            now = {d: c[0] for d, c in ds.chunks.items()}
        except (ValueError, AttributeError):  # variables chunked differently: rechunk all alike
            now = {}
        if any(now.get(d) != n for d, n in want.items()):
            ds = orig_chunk(ds, want)  # the Dask chunks the Zarr chunks are written from
        asked = {}
        for name, var in ds.data_vars.items():
            if not set(want) & set(var.dims):
                continue
            new = tuple(min(int(want[d]), n) if d in want and int(want[d]) > 0 else
                        (var.chunks[i][0] if var.chunks else n) for i, (d, n) in enumerate(zip(var.dims, var.shape)))
            e = enc.setdefault(name, {})
            asked[name] = e.get("chunks")
            e["chunks"] = new
            e.pop("preferred_chunks", None)
            var.encoding.pop("chunks", None)
            var.encoding.pop("preferred_chunks", None)
        if asked:
            _record(setting="chunks", where="xarray.Dataset.to_zarr", value=want,
                    asked=asked if any(v is not None for v in asked.values()) else None)
    if "compressor" in s:
        codec = _codec(s["compressor"], fmt)
        for name in ds.data_vars:
            e = enc.setdefault(name, {})
            e.pop("compressor", None)
            e.pop("compressors", None)
            if _zarr_major() < 3:  # zarr-python 2: one compressor
                e["compressor"] = codec
            else:  # zarr-python 3 takes `compressors` for both formats
                e["compressors"] = (codec,) if codec is not None else None
            ds[name].encoding.pop("compressor", None)
            ds[name].encoding.pop("compressors", None)
        _record(setting="compressor", where="xarray.Dataset.to_zarr", value=s["compressor"])
    kwargs["encoding"] = enc
    return ds, kwargs


def _patch_distributed(distributed, s):
    workers, threads = s.get("workers"), s.get("threads")
    if workers is None and threads is None:
        return
    from distributed.deploy.local import LocalCluster

    orig = LocalCluster.__init__

    def __init__(self, *args, **kwargs):
        with _Inside() as outer:
            if outer:
                if workers is not None:
                    _record(setting="workers", where="distributed.LocalCluster", value=int(workers),
                            asked=kwargs.get("n_workers"))
                    kwargs["n_workers"] = int(workers)
                if threads is not None:
                    _record(setting="threads", where="distributed.LocalCluster", value=int(threads),
                            asked=kwargs.get("threads_per_worker"))
                    kwargs["threads_per_worker"] = int(threads)
            return orig(self, *args, **kwargs)

    LocalCluster.__init__ = __init__
    _record(event="patched", module="distributed")


# ------------------------------------------------------------------------------------------------ open once
class _KeptFiles:
    """Files kept open for the program (``open_once``): one handle per (path, writable, options), returned again
    by every later open of that path; the program's ``close()`` only flushes it; the real close is at exit, in
    the order the files were first opened.  ``only``: the real paths to keep (None: every file)."""

    def __init__(self, only):
        self.only = only
        self.handles = {}  # key -> handle, in opening order
        self.kept = {}  # id(handle) -> the library's own close
        self.closed = set()  # id(handle) of kept handles the program has closed (and not opened again since)
        self.counts = {}  # (where, real path) -> [program opens, real opens]
        self.pid = os.getpid()
        self.exit_hook = False

    def wanted(self, path):
        return self.only is None or path in self.only

    def close_real(self, key):
        h = self.handles.pop(key, None)
        if h is not None:
            close = self.kept.pop(id(h), None)
            self.closed.discard(id(h))
            try:
                if close is not None:
                    close(h)  # the library's own close
            except Exception as exc:  # noqa: BLE001
                _record(event="error", error=f"open_once: closing {key[0]}: {exc!r}")
            _immortal(h)

    def at_exit(self):
        if os.getpid() != self.pid:  # a forked child: the handles are its parent's to close
            return
        with _open_lock:
            items = list(self.handles.items())
            self.handles.clear()
        for key, h in items:
            close = self.kept.pop(id(h), None)
            try:
                if close is not None:
                    close(h)  # the library's own close, in opening order
            except Exception as exc:  # noqa: BLE001
                _record(event="error", error=f"open_once: closing {key[0]} at exit: {exc!r}")
            _immortal(h)
        by_where = {}
        for (where, path), (opens, real) in self.counts.items():
            if opens > real:
                by_where.setdefault(where, []).append((path, opens, real))
        for where, rows in by_where.items():
            text = "; ".join(f"{os.path.basename(p)}: {o:,} opens -> {r}" for p, o, r in rows)
            _record(setting="open_once", where=where, value=text, asked=None,
                    files=[{"path": p, "opens": o, "real_opens": r} for p, o, r in rows])


def _immortal(h):
    """Never free a closed kept handle: netCDF4's ``__dealloc__`` of a Python subclass's instance fails noisily
    once the interpreter is finalizing (``Exception ignored ... AttributeError``); a closed handle is a few bytes."""
    try:
        import ctypes

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(h))
    except Exception:  # noqa: BLE001 - not CPython: the message at exit is all it costs
        pass


_NC_KEEP_KW = {"mode", "filename", "format", "clobber", "encoding", "keepweakref"}
_NC_OFF_KW = {"diskless": False, "persist": False, "memory": None, "parallel": False, "comm": None, "info": None}
_H5_OFF_KW = {"driver": None, "libver": None, "userblock_size": None, "swmr": False, "fs_strategy": None,
              "fs_persist": False, "fs_page_size": None, "page_buf_size": None, "min_meta_keep": 0,
              "min_raw_keep": 0, "alignment_threshold": 1, "alignment_interval": 1, "meta_block_size": None}


def _open_key(args, kwargs, lib):
    """(real path, "w" / "r", options) of an open the kept handles can serve (a writable / a read-only one),
    (real path, "", ()) of one that creates or truncates the file (the program's own open, after the kept
    handle of that path is really closed), or None (the program's own open: not a plain open of a local file
    by name, or an option the cache does not know)."""
    if len(args) > 2:
        return None
    name = args[0] if args else kwargs.get("filename" if lib == "netCDF4" else "name")
    mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
    if not isinstance(name, (str, bytes, os.PathLike)) or not isinstance(mode, str):
        return None
    try:
        path = os.path.realpath(os.fsdecode(name))
    except Exception:  # noqa: BLE001
        return None
    if mode not in ("r", "a", "r+"):  # "w", "x", "w-", share modes: never served from a kept handle
        return (path, "", (("lib", lib),))
    if mode != "r" and not os.path.isfile(path):  # "a" creating the file: the program's own open
        return (path, "", (("lib", lib),))
    if not os.path.isfile(path):  # a URL, a missing file: the library's own call (and its own error)
        return None
    rest = {k: v for k, v in kwargs.items() if k not in ("filename", "name", "mode")}
    off, keep = (_NC_OFF_KW, _NC_KEEP_KW) if lib == "netCDF4" else (_H5_OFF_KW, set())
    for k, v in rest.items():
        if k not in keep and (k not in off or v != off[k]):
            return None  # an option the cache does not know (memory, diskless, parallel, a driver, ...)
    opts = tuple(sorted((k, repr(v)) for k, v in rest.items() if k in ("encoding", "keepweakref")))
    return (path, "r" if mode == "r" else "w", opts + (("lib", lib),))


def _handle_defaults(h, lib):
    """A reused netCDF4 handle gets the per-open settings a new one has, as the program would get them."""
    if lib != "netCDF4":
        return
    for call in ("set_auto_maskandscale", "set_always_mask", "set_auto_chartostring"):
        try:
            getattr(h, call)(True)
        except Exception:  # noqa: BLE001
            pass


def _keep_new(orig, orig_close, cls, args, kwargs, lib, key, state, count):
    """The first open of a file: the library's own handle, kept (closed for real at exit); the library's plain
    call when its own constructor refuses the arguments (its own error then)."""
    h = orig.__new__(cls, *args, **kwargs) if lib == "netCDF4" else orig.__new__(cls)
    try:
        orig.__init__(h, *args, **kwargs)
    except Exception:  # noqa: BLE001 - the library's own call, its own error
        return orig(*args, **kwargs)
    count[0] += 1
    count[1] += 1
    state.handles[key] = h
    state.kept[id(h)] = orig_close
    if not state.exit_hook:
        import atexit

        atexit.register(state.at_exit)  # after the library's own exit handlers: runs before them
        state.exit_hook = True
    return h


def _patch_open_once(mod, lib, state):
    """Replace ``mod.Dataset`` (netCDF4) / ``mod.File`` (h5py) by a subclass whose construction returns the kept
    handle of a file opened before; anything it does not recognise is the library's own call."""
    attr = "Dataset" if lib == "netCDF4" else "File"
    orig = getattr(mod, attr)
    where = f"{lib}.{attr}"
    flush = (lambda h: h.sync()) if lib == "netCDF4" else (lambda h: h.flush())
    orig_close = orig.close
    mine = ("lib", lib)

    class _Meta(type(orig)):
        def __instancecheck__(cls, obj):
            return isinstance(obj, orig)

        def __subclasscheck__(cls, sub):  # by the MRO: issubclass would recurse through an ABC's subclasses
            return isinstance(sub, type) and (orig in sub.__mro__ or cls in sub.__mro__)

    def __new__(cls, *args, **kwargs):
        if cls is not Kept or os.getpid() != state.pid:  # a program's own subclass, a forked child
            return orig.__new__(cls) if lib == "h5py" else orig.__new__(cls, *args, **kwargs)
        try:
            key = _open_key(args, kwargs, lib)
        except Exception:  # noqa: BLE001
            key = None
        if key is None or not state.wanted(key[0]):
            return orig(*args, **kwargs)
        with _open_lock:
            same = [k for k in state.handles if k[0] == key[0]]
            if not key[1]:  # a create/truncate of a kept file: really close it first, then the program's open
                for k in same:
                    state.close_real(k)
                return orig(*args, **kwargs)
            # the other library's kept handle of this file, closed by the program: closed for real now, as it
            # was in the program as written (HDF5 locks a file open in another library); still in use: kept
            for k in same:
                if mine not in k[2] and id(state.handles[k]) in state.closed:
                    state.close_real(k)
            same = [k for k in same if mine in k[2]]
            hit = next((k for k in same if k[2] == key[2] and (k[1] == "w" or key[1] == "r")), None)
            count = state.counts.setdefault((where, key[0]), [0, 0])
            if hit is not None:
                count[0] += 1
                h = state.handles[hit]
                state.closed.discard(id(h))
                if count[0] == 2:
                    _record(event="open_once", where=where, path=key[0])
                _handle_defaults(h, lib)
                return h
            for k in same:  # kept read-only, now opened for writing: the real close, then a writable handle
                state.close_real(k)
            return _keep_new(orig, orig_close, cls, args, kwargs, lib, key, state, count)

    def __init__(self, *args, **kwargs):
        if id(self) in state.kept:
            return  # the kept handle, already open
        orig.__init__(self, *args, **kwargs)

    def close(self):
        if id(self) in state.kept and os.getpid() == state.pid:
            flush(self)  # the program's close: written data reaches the file; the handle stays open
            state.closed.add(id(self))
            return None
        return orig_close(self)

    Kept = _Meta(attr, (orig,), {"__new__": __new__, "__init__": __init__, "close": close,
                                 "__module__": orig.__module__, "__qualname__": orig.__qualname__,
                                 "__doc__": orig.__doc__})
    setattr(mod, attr, Kept)
    _record(event="patched", module=lib)


def _install():
    s = _settings()
    if s is None:
        return
    _record(event="loaded", settings=s, argv=list(sys.argv))
    hooks = {}
    if any(k in s for k in ("chunks", "paths", "compressor", "zarr_format")):
        hooks["xarray"] = lambda m: _patch_xarray(m, s)
    if "workers" in s or "threads" in s:
        hooks["distributed"] = lambda m: _patch_distributed(m, s)
    if s.get("open_once"):
        want = s["open_once"]
        paths = [want] if isinstance(want, str) else want if isinstance(want, list) else None
        state = _KeptFiles(None if paths is None else {os.path.realpath(p) for p in paths})
        hooks["netCDF4"] = lambda m: _patch_open_once(m, "netCDF4", state)
        hooks["h5py"] = lambda m: _patch_open_once(m, "h5py", state)
    for name in list(hooks):
        if name in sys.modules:  # already imported (by a chained sitecustomize): patch now
            hooks.pop(name)(sys.modules[name])
    if hooks:
        sys.meta_path.insert(0, _Finder(hooks))


_chain()
try:
    _install()
except Exception as _exc:  # noqa: BLE001 - never stop the program
    _record(event="error", error=f"install: {_exc!r}")
