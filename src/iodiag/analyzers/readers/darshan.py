"""Read one Darshan log into plain NumPy arrays (a ``LogData`` dict).

Only the modules asked for are decoded.  Records come from darshan-util; the
bytes of each C record are copied as-is and viewed through a NumPy structured
dtype built from the C struct's own layout (``ffi.offsetof``), so a log of
600k DXT segments costs one C call per record, not a Python object per
segment.

The result is a picklable dict so that it can cross a process boundary
(see ``isolate.py``, which runs this in a child that may crash).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, Callable, Iterable

import numpy as np

from .darshan_lib import MOD_NAMES, STRUCTS, counter_names, lib

# modules whose counters land in profile.counters
COUNTER_MODULES = ("POSIX", "MPI-IO", "STDIO", "H5F", "H5D", "PNETCDF_FILE", "PNETCDF_VAR", "DFS", "DAOS")
DXT_MODULES = ("DXT_POSIX", "DXT_MPIIO")
ALL_MODULES = COUNTER_MODULES + ("LUSTRE", "HEATMAP") + DXT_MODULES
# modules we know but do not decode (AutoPerf, BG/Q): reported as present, never fatal
OPAQUE_MODULES = ("APXC", "APMPI", "BG/Q", "MDHIM")


class LogReadError(Exception):
    """A log that darshan-util refuses; carries a one-line cause."""


@lru_cache(maxsize=None)
def _record_dtype(mod: str) -> np.dtype:
    ffi, _ = lib()
    struct = STRUCTS[mod]
    nc = len(counter_names(mod))
    nf = len(counter_names(mod, True))
    fields = [("id", "<u8", ffi.offsetof(struct, "base_rec") + 0), ("rank", "<i8", ffi.offsetof(struct, "base_rec") + 8)]
    if mod in ("H5D", "PNETCDF_VAR"):
        fields.append(("file_rec_id", "<u8", ffi.offsetof(struct, "file_rec_id")))
    fields.append(("counters", ("<i8", (nc,)), ffi.offsetof(struct, "counters")))
    fields.append(("fcounters", ("<f8", (nf,)), ffi.offsetof(struct, "fcounters")))
    return np.dtype({
        "names": [f[0] for f in fields],
        "formats": [f[1] for f in fields],
        "offsets": [f[2] for f in fields],
        "itemsize": ffi.sizeof(struct),
    })


def _iter_raw(handle, idx: int, size_fn, losses: list, mod: str, limit: int | None = None):
    """Yield raw C record pointers of one module until the module is exhausted."""
    ffi, L = lib()
    buf = ffi.new("void **")
    n = 0
    while True:
        buf[0] = ffi.NULL  # darshan-util allocates a record of the right size when NULL
        r = L.darshan_log_get_record(handle, idx, buf)
        if r < 0:
            losses.append((mod, "darshan-util could not decode a record (log damaged or truncated); later records of this module are lost"))
            return
        if r == 0:
            return
        try:
            yield buf[0]
        finally:
            L.darshan_free(buf[0])
            buf[0] = ffi.NULL
        n += 1
        if limit is not None and n >= limit:
            return


def _read_fixed(handle, idx: int, mod: str, losses: list, dt: np.dtype) -> np.ndarray:
    """Every record of a fixed-size module, decoded by darshan-util straight into one NumPy buffer.

    darshan-util writes a record into the buffer it is given (it only allocates when
    handed NULL), so records land side by side in a growing array: no allocation,
    copy or Python object per record.
    """
    ffi, L = lib()
    size = dt.itemsize
    get = L.darshan_log_get_record
    cap = 16
    arr = np.empty(cap * size, dtype=np.uint8)
    base = ffi.cast("char *", ffi.from_buffer(arr))
    buf = ffi.new("void **")
    n = 0
    while True:
        if n == cap:
            cap *= 4
            grown = np.empty(cap * size, dtype=np.uint8)
            grown[: n * size] = arr[: n * size]
            arr = grown
            base = ffi.cast("char *", ffi.from_buffer(arr))
        buf[0] = base + n * size
        r = get(handle, idx, buf)
        if r < 0:
            losses.append((mod, "darshan-util could not decode a record (log damaged or truncated); later records of this module are lost"))
            break
        if r == 0:
            break
        n += 1
    return np.frombuffer(arr, dtype=dt, count=n)


def _read_generic(handle, idx: int, mod: str, losses: list) -> dict[str, Any]:
    dt = _record_dtype(mod)
    arr = _read_fixed(handle, idx, mod, losses, dt)
    out = {
        "file_id": np.ascontiguousarray(arr["id"]),
        "rank": np.ascontiguousarray(arr["rank"]),
        "counters": np.ascontiguousarray(arr["counters"]).reshape(len(arr), len(counter_names(mod))),
        "fcounters": np.ascontiguousarray(arr["fcounters"]).reshape(len(arr), len(counter_names(mod, True))),
        "counter_names": counter_names(mod),
        "fcounter_names": counter_names(mod, True),
    }
    if "file_rec_id" in dt.names:
        out["file_rec_id"] = np.ascontiguousarray(arr["file_rec_id"])
    return out


_LUSTRE_MAX_COMPS = 1 << 12  # Lustre allows a few dozen layout components per file
_LUSTRE_MAX_STRIPES = 1 << 16  # and a few thousand stripes


def _read_lustre(handle, idx: int, losses: list) -> dict[str, Any]:
    """LUSTRE records: the first component's stripe size/count and the OST ids as a "1,2,3" string.

    darshan-util allocates each record as one block: the record struct, then its
    components, then its OST ids.  Each block is copied out as bytes (one copy, no
    attribute access per field) and all of them are decoded together with NumPy.
    """
    ffi, L = lib()
    names = counter_names("LUSTRE_COMP")
    si, sc = names.index("LUSTRE_COMP_STRIPE_SIZE"), names.index("LUSTRE_COMP_STRIPE_COUNT")
    rec_words = ffi.sizeof("struct darshan_lustre_record") // 8
    comp_words = ffi.sizeof("struct darshan_lustre_component") // 8
    get, free, buffer, null = L.darshan_log_get_record, L.darshan_free, ffi.buffer, ffi.NULL
    slot = ffi.new("int64_t **")  # the record comes back already typed as 64-bit words
    vslot = ffi.cast("void **", slot)
    blocks: list[bytes] = []
    while True:
        slot[0] = null  # darshan-util allocates each record (its size depends on the record)
        r = get(handle, idx, vslot)
        if r < 0:
            losses.append(("LUSTRE", "darshan-util could not decode a record (log damaged or truncated); later records of this module are lost"))
            break
        if r == 0:
            break
        p = slot[0]
        ncomp, nstripes = p[2], p[3]
        if not (-1 < ncomp <= _LUSTRE_MAX_COMPS and -1 < nstripes <= _LUSTRE_MAX_STRIPES):
            # counts no Lustre file has: darshan-util sized its allocation from them with int arithmetic,
            # so the block cannot be trusted to hold what they say
            free(p)
            losses.append(("LUSTRE", f"a record claims {ncomp} layout components and {nstripes} stripes: the log is "
                                     "damaged; later records of this module are lost"))
            break
        if ncomp < 1:
            n = 4  # base record, num_comps, num_stripes: no components were stored
        else:
            n = rec_words + ncomp * comp_words + nstripes
        blocks.append(bytes(buffer(p, n * 8)))
        free(p)
    sizes = np.fromiter((len(b) // 8 for b in blocks), dtype="i8", count=len(blocks))
    w = np.frombuffer(b"".join(blocks), dtype="<i8")
    at = np.zeros(len(blocks), "i8")
    np.cumsum(sizes[:-1], out=at[1:])
    ncomp = w[at + 2] if len(blocks) else np.zeros(0, "i8")
    nstripes = np.maximum(w[at + 3], 0) if len(blocks) else np.zeros(0, "i8")
    has = ncomp > 0
    comps = at + rec_words  # word offset of the first component
    ssize = np.where(has, w[np.where(has, comps + si, 0)], 0) if len(blocks) else np.zeros(0, "i8")
    scount = np.where(has, w[np.where(has, comps + sc, 0)], 0) if len(blocks) else np.zeros(0, "i8")
    # each component's OST ids follow the previous one's: together, the first sum(counts) ids
    total = np.zeros(len(blocks), "i8")
    for c in range(int(ncomp.max()) if len(blocks) else 0):
        live = ncomp > c
        total[live] += np.maximum(w[comps[live] + c * comp_words + sc], 0)
    total = np.minimum(total, nstripes)  # never past the ids the record holds
    first_ost = comps + np.maximum(ncomp, 0) * comp_words
    # the ranks of a job share a few layouts (every rank's record of a shared file lists the same OSTs): each
    # distinct list of ids is formatted once, looked up by its bytes
    raw_ids = w.tobytes() if total.any() else b""
    text_of: dict[bytes, str] = {}
    osts = []
    for o, t in zip(first_ost.tolist(), total.tolist()):
        if not t:
            osts.append("")
            continue
        key = raw_ids[8 * o:8 * (o + t)]
        txt = text_of.get(key)
        if txt is None:
            txt = text_of[key] = ",".join(map(str, w[o:o + t].tolist()))
        osts.append(txt)
    return {
        "file_id": w[at].view("u8").copy() if len(blocks) else np.zeros(0, "u8"),
        "rank": w[at + 1].copy() if len(blocks) else np.zeros(0, "i8"),
        "stripe_size": np.asarray(ssize, dtype="i8"), "stripe_count": np.asarray(scount, dtype="i8"),
        "osts": np.asarray(osts, dtype=object),
    }


def _read_dxt(handle, idx: int, mod: str, losses: list) -> dict[str, Any]:
    ffi, _ = lib()
    hdr = ffi.sizeof("struct dxt_file_record")
    seg = ffi.sizeof("struct segment_info")  # offset, length (int64), start, end (double)
    ids, ranks, hosts, wcounts, rcounts = [], [], [], [], []
    # room for 1M segments from the start: pages nobody writes cost no memory (np.empty only reserves them), and
    # growing from a small buffer would copy and fault in twice the data on the way
    cap, used = 1 << 20, 0  # segments
    raw = np.empty((cap, 4), dtype="<i8")
    cast, memmove, string = ffi.cast, ffi.memmove, ffi.string
    for p in _iter_raw(handle, idx, None, losses, mod):
        rec = cast("struct dxt_file_record *", p)
        w, r = int(rec.write_count), int(rec.read_count)
        ids.append(int(rec.base_rec.id))
        ranks.append(int(rec.base_rec.rank))
        hosts.append(string(rec.hostname).decode("utf-8", "replace"))
        wcounts.append(w)
        rcounts.append(r)
        k = w + r
        if k:
            if used + k > cap:
                while used + k > cap:
                    cap *= 2
                grown = np.empty((cap, 4), dtype="<i8")
                grown[:used] = raw[:used]
                raw = grown
            # the record's segments, copied once, straight into place
            memmove(ffi.from_buffer(raw[used:used + k]), cast("char *", p) + hdr, k * seg)
            used += k
    w = np.asarray(wcounts, dtype="i8")
    r = np.asarray(rcounts, dtype="i8")
    # one block: a row per segment (offset, length, start bits, end bits), the records' segments one after the
    # other, each record's [writes..., reads...]; ``dxt_columns`` gives its columns as views.  Per-segment file,
    # rank and direction are left to the consumer (``repeat_range``): they would triple what crosses to the parent
    return {
        "rec_file_id": np.asarray(ids, dtype="u8"), "rec_rank": np.asarray(ranks, dtype="i8"),
        "rec_host": np.asarray(hosts, dtype=object), "rec_writes": w, "rec_reads": r,
        # the buffer itself, no copy: its unwritten tail was never touched (only the written rows cross to the
        # parent, and a reader child's memory is gone soon)
        "segments": raw[:used],
    }


def dxt_columns(rec: dict[str, Any]) -> dict[str, np.ndarray]:
    """Views of a DXT module's segment block: offset, length (int64), start, end (float64, seconds from the log's
    start), in record order."""
    seg = rec["segments"]
    return {"offset": seg[:, 0], "length": seg[:, 1], "start": seg[:, 2].view("<f8"), "end": seg[:, 3].view("<f8")}


def repeat_range(values: np.ndarray, counts: np.ndarray, lo: int, hi: int, cum: np.ndarray | None = None) -> np.ndarray:
    """``np.repeat(values, counts)[lo:hi]`` without building the whole repeat (counts >= 0; ``cum``: their
    cumulative sum, when the caller has it)."""
    if hi <= lo:
        return values[:0]
    cum = np.cumsum(counts) if cum is None else cum
    i0 = int(np.searchsorted(cum, lo, "right"))  # the entry holding position lo
    i1 = int(np.searchsorted(cum, hi, "left"))  # the entry holding position hi - 1
    c = counts[i0:i1 + 1].copy()
    c[0] -= lo - (int(cum[i0]) - int(counts[i0]))
    c[-1] -= int(cum[i1]) - hi
    return np.repeat(values[i0:i1 + 1], c)


def dxt_segment_keys(rec: dict[str, Any]) -> Callable[[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """A function (lo, hi) -> (file id, rank, is-write) of segments lo..hi-1 of a DXT module (the records'
    counts summed once, for all the batches)."""
    w, r = rec["rec_writes"], rec["rec_reads"]
    per = w + r
    wr = np.column_stack((w, r)).ravel()  # each record's segments are [writes..., reads...]
    direction = np.tile(np.array([True, False]), len(per))
    cum_per, cum_wr = np.cumsum(per), np.cumsum(wr)

    def keys(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (repeat_range(rec["rec_file_id"], per, lo, hi, cum_per), repeat_range(rec["rec_rank"], per, lo, hi, cum_per),
                repeat_range(direction, wr, lo, hi, cum_wr))

    return keys


def _read_heatmap(handle, idx: int, losses: list) -> dict[str, Any]:
    ffi, _ = lib()
    ids, ranks, widths, nb, wb, rb = [], [], [], [], [], []
    for p in _iter_raw(handle, idx, None, losses, "HEATMAP"):
        rec = ffi.cast("struct darshan_heatmap_record *", p)
        n = int(rec.nbins)
        ids.append(int(rec.base_rec.id))
        ranks.append(int(rec.base_rec.rank))
        widths.append(float(rec.bin_width_seconds))
        nb.append(n)
        wb.append(np.frombuffer(ffi.buffer(rec.write_bins, 8 * n), dtype="<i8").copy() if n else np.zeros(0, "i8"))
        rb.append(np.frombuffer(ffi.buffer(rec.read_bins, 8 * n), dtype="<i8").copy() if n else np.zeros(0, "i8"))
    return {
        "rec_file_id": np.asarray(ids, dtype="u8"), "rec_rank": np.asarray(ranks, dtype="i8"),
        "bin_width_s": np.asarray(widths, dtype="f8"), "nbins": np.asarray(nb, dtype="i8"),
        "write_bins": np.concatenate(wb) if wb else np.zeros(0, "i8"),
        "read_bins": np.concatenate(rb) if rb else np.zeros(0, "i8"),
    }


def read_header(handle) -> dict[str, Any]:
    ffi, L = lib()
    job = ffi.new("struct darshan_job *")
    if L.darshan_log_get_job(handle, job) < 0:
        raise LogReadError("the job header cannot be decoded")
    runtime = ffi.new("double *")
    L.darshan_log_get_job_runtime(handle, job[0], runtime)
    meta: dict[str, str] = {}
    for kv in ffi.string(job.metadata).decode("utf-8", "replace").split("\n"):
        if "=" in kv:
            k, v = kv.split("=", 1)
            meta[k] = v
    exe = ffi.new("char[]", 4096)
    L.darshan_log_get_exe(handle, exe)
    mnts = ffi.new("struct darshan_mnt_info **")
    cnt = ffi.new("int *")
    mounts: list[tuple[str, str]] = []
    if L.darshan_log_get_mounts(handle, mnts, cnt) >= 0:
        for i in range(cnt[0]):
            mounts.append((ffi.string(mnts[0][i].mnt_path).decode("utf-8", "replace"), ffi.string(mnts[0][i].mnt_type).decode("utf-8", "replace")))
        if cnt[0]:
            L.darshan_free(mnts[0])
    mods = ffi.new("struct darshan_mod_info **")
    L.darshan_log_get_modules(handle, mods, cnt)
    modules = {}
    for i in range(cnt[0]):
        m = mods[0][i]
        modules[ffi.string(m.name).decode()] = {"len": int(m.len), "ver": int(m.ver), "idx": int(m.idx), "partial": bool(m.partial_flag)}
    if cnt[0]:
        L.darshan_free(mods[0])
    return {
        "uid": int(job.uid), "start_sec": int(job.start_time_sec), "start_nsec": int(job.start_time_nsec),
        "end_sec": int(job.end_time_sec), "end_nsec": int(job.end_time_nsec), "nprocs": int(job.nprocs),
        "jobid": int(job.jobid), "runtime_s": float(runtime[0]), "metadata": meta,
        "log_format": ffi.string(ffi.cast("char *", handle)).decode("ascii", "replace"),
        "exe": ffi.string(exe).decode("utf-8", "replace"), "mounts": mounts, "modules": modules,
    }


def _names(handle) -> dict[int, str]:
    ffi, L = lib()
    nrecs = ffi.new("struct darshan_name_record **")
    cnt = ffi.new("int *")
    L.darshan_log_get_name_records(handle, nrecs, cnt)
    n = cnt[0]
    if not n:
        return {}
    recs, string, free = nrecs[0], ffi.string, L.darshan_free
    # the ids in one NumPy view of the (id, name pointer) array; only the names need a call each
    size = ffi.sizeof("struct darshan_name_record")
    if size % 8 == 0 and ffi.offsetof("struct darshan_name_record", "id") == 0:
        ids = np.frombuffer(ffi.buffer(recs, n * size), dtype="<u8")[:: size // 8].tolist()
    else:  # a layout we did not expect: one look-up per record
        ids = [int(recs[i].id) for i in range(n)]
    raw = []
    for i in range(n):
        name = recs[i].name
        raw.append(string(name))
        free(name)
    free(recs)
    return dict(zip(ids, [b.decode("utf-8", "replace") for b in raw]))


def read_log(path: str, modules: Iterable[str] | None = ALL_MODULES, *, names: bool = True) -> dict[str, Any]:
    """Decode one log.  ``modules=()`` reads only the header (fast listing)."""
    ffi, L = lib()
    if not os.path.isfile(path):
        raise LogReadError("not a file")
    if os.path.getsize(path) == 0:
        raise LogReadError("the file is empty (0 bytes): the process that wrote it probably died before Darshan's shutdown")
    handle = L.darshan_log_open(os.fsencode(path))
    if handle == ffi.NULL:
        raise LogReadError("darshan-util cannot open it: not a Darshan log, or its header is damaged")
    try:
        header = read_header(handle)
        data: dict[str, Any] = {"path": path, "header": header, "mods": {}, "losses": []}
        want = set(modules or ())
        losses: list = data["losses"]
        for mod, info in header["modules"].items():
            if mod not in want:
                continue
            idx = MOD_NAMES.index(mod) if mod in MOD_NAMES else info["idx"]
            try:
                if mod in COUNTER_MODULES:
                    rec = _read_generic(handle, idx, mod, losses)
                    n = len(rec["file_id"])
                elif mod == "LUSTRE":
                    rec = _read_lustre(handle, idx, losses)
                    n = len(rec["file_id"])
                elif mod in DXT_MODULES:
                    rec = _read_dxt(handle, idx, mod, losses)
                    n = len(rec["rec_file_id"])
                elif mod == "HEATMAP":
                    rec = _read_heatmap(handle, idx, losses)
                    n = len(rec["rec_file_id"])
                else:
                    continue
            except (MemoryError, RecursionError):
                raise
            except Exception as exc:  # noqa: BLE001 - one damaged module must not cost the others
                losses.append((mod, f"this module's region could not be decoded ({type(exc).__name__}: {exc}); "
                                    "every other module is reported"))
                continue
            data["mods"][mod] = rec
            if info["len"] > 0 and n == 0 and not any(m == mod for m, _ in losses):
                losses.append((mod, f"the header says this module holds {info['len']} bytes but no record could be read: the log is truncated or damaged"))
        if names and want:
            data["names"] = _names(handle)
        return data
    finally:
        L.darshan_log_close(handle)
