"""Decode one Darshan log with darshan-util into plain buffers, without NumPy (a "raw log" dict).

This is the half of reading a log that calls C: darshan-util decompresses and
decodes each record, and its bytes are copied as-is into growing buffers (one
per module, records side by side, each handed out as a ``pickle.PickleBuffer``
so that it crosses to a parent process out of band).  ``darshan.as_arrays``
then views those buffers as NumPy columns.

Keeping NumPy out of this half lets a reader child (``isolate.py``) start
decoding before its parent has imported NumPy (~40 ms), so the log is read
while the parent starts up instead of after.  Nothing here interprets the
binary format: record layouts come from the C declarations (``ffi.offsetof``).
"""

from __future__ import annotations

import array
import mmap
import os
import sys
from pickle import PickleBuffer
from typing import Any, Iterable

from . import container
from .darshan_lib import MOD_NAMES, MODULE_VERSIONS, STRUCTS, counter_names, lib

# modules whose counters land in profile.counters
COUNTER_MODULES = ("POSIX", "MPI-IO", "STDIO", "H5F", "H5D", "PNETCDF_FILE", "PNETCDF_VAR", "DFS", "DAOS")
DXT_MODULES = ("DXT_POSIX", "DXT_MPIIO")
ALL_MODULES = COUNTER_MODULES + ("LUSTRE", "HEATMAP") + DXT_MODULES
# modules we know but do not decode (AutoPerf, BG/Q): reported as present, never fatal
OPAQUE_MODULES = ("APXC", "APMPI", "BG/Q", "MDHIM")

_LOST_RECORD = "darshan-util could not decode a record (log damaged or truncated); later records of this module are lost"


class LogReadError(Exception):
    """A log that darshan-util refuses; carries a one-line cause (and a next step, when the cause calls for one)."""

    def __init__(self, cause: str, next_step: str | None = None) -> None:
        super().__init__(cause)
        self.next_step = next_step


def _iter_raw(handle, idx: int, losses: list, mod: str):
    """Yield raw C record pointers of one module until the module is exhausted (darshan-util allocates each)."""
    ffi, L = lib()
    buf = ffi.new("void **")
    while True:
        buf[0] = ffi.NULL  # darshan-util allocates a record of the right size when NULL
        r = L.darshan_log_get_record(handle, idx, buf)
        if r < 0:
            losses.append((mod, _LOST_RECORD))
            return
        if r == 0:
            return
        try:
            yield buf[0]
        finally:
            L.darshan_free(buf[0])
            buf[0] = ffi.NULL


class _Buffer:
    """A growing byte buffer that C writes into: an anonymous mapping, so pages nobody writes cost no memory and
    growing remaps the pages instead of copying them (a bytearray grown record by record copies itself ~8 times
    over: ~20 ms for the 9 MB of a 1024-process DXT log)."""

    def __init__(self, cap: int) -> None:
        self.ffi = lib()[0]
        self.map = mmap.mmap(-1, max(cap, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # private: a shared one cannot grow
        self._c = self.ffi.from_buffer(self.map)
        self.base = self.ffi.cast("char *", self._c)
        self.used = 0

    def reserve(self, nbytes: int):
        """A C pointer to the end of the buffer, with room for ``nbytes`` more (``used`` is the caller's to move)."""
        need = self.used + nbytes
        if need > len(self.map):
            self.ffi.release(self._c)  # no resizing while C holds the address
            self._grow(max(need, 2 * len(self.map)))
            self._c = self.ffi.from_buffer(self.map)
            self.base = self.ffi.cast("char *", self._c)
        return self.base + self.used

    def _grow(self, size: int) -> None:
        try:
            self.map.resize(size)  # Linux: mremap, no copy
        except (OSError, SystemError, ValueError):  # no mremap (macOS): a larger mapping and one copy
            bigger = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            bigger[:self.used] = self.map[:self.used]
            self.map.close()
            self.map = bigger

    def append(self, src, nbytes: int) -> None:
        self.ffi.memmove(self.reserve(nbytes), src, nbytes)
        self.used += nbytes

    def done(self) -> PickleBuffer:
        """The bytes written, out of band when pickled (an empty buffer as an empty bytearray)."""
        self.ffi.release(self._c)
        if not self.used:
            self.map.close()
            return PickleBuffer(bytearray())
        try:
            self.map.resize(self.used)
        except (OSError, SystemError, ValueError):  # no mremap: the bytes written, viewed
            return PickleBuffer(memoryview(self.map)[:self.used])
        return PickleBuffer(self.map)


def record_layout(mod: str) -> dict[str, Any]:
    """Where a fixed-size module's fields sit in its C struct: byte offsets, counts and the record size."""
    ffi, _ = lib()
    struct = STRUCTS[mod]
    base = ffi.offsetof(struct, "base_rec")
    return {
        "itemsize": ffi.sizeof(struct), "id": base, "rank": base + 8,
        "file_rec_id": ffi.offsetof(struct, "file_rec_id") if mod in ("H5D", "PNETCDF_VAR") else None,
        "counters": ffi.offsetof(struct, "counters"), "fcounters": ffi.offsetof(struct, "fcounters"),
        "counter_names": counter_names(mod), "fcounter_names": counter_names(mod, True),
    }


def _decode_fixed(handle, idx: int, mod: str, losses: list) -> dict[str, Any]:
    """Every record of a fixed-size module, decoded by darshan-util straight into one buffer.

    darshan-util writes a record into the buffer it is given (it only allocates when handed NULL), so records
    land side by side in a growing buffer: no allocation, copy or Python object per record."""
    ffi, L = lib()
    layout = record_layout(mod)
    size = layout["itemsize"]
    get = L.darshan_log_get_record
    out = _Buffer(16 * size)
    slot = ffi.new("void **")
    while True:
        slot[0] = out.reserve(size)
        r = get(handle, idx, slot)
        if r < 0:
            losses.append((mod, _LOST_RECORD))
            break
        if r == 0:
            break
        out.used += size
    return {"kind": "fixed", "n": out.used // size, "records": out.done(), "layout": layout}


_LUSTRE_MAX_COMPS = 1 << 12  # Lustre allows a few dozen layout components per file
_LUSTRE_MAX_STRIPES = 1 << 16  # and a few thousand stripes


def _decode_lustre(handle, idx: int, losses: list) -> dict[str, Any]:
    """LUSTRE records: darshan-util allocates each as one block (the record struct, its components, its OST
    ids), copied out whole, one after the other; ``darshan.as_arrays`` reads them together with NumPy."""
    ffi, L = lib()
    names = counter_names("LUSTRE_COMP")
    rec_words = ffi.sizeof("struct darshan_lustre_record") // 8
    comp_words = ffi.sizeof("struct darshan_lustre_component") // 8
    get, free, null = L.darshan_log_get_record, L.darshan_free, ffi.NULL
    slot = ffi.new("int64_t **")  # the record comes back already typed as 64-bit words
    vslot = ffi.cast("void **", slot)
    words = _Buffer(1 << 16)
    sizes = array.array("q")
    while True:
        slot[0] = null  # darshan-util allocates each record (its size depends on the record)
        r = get(handle, idx, vslot)
        if r < 0:
            losses.append(("LUSTRE", _LOST_RECORD))
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
        n = 4 if ncomp < 1 else rec_words + ncomp * comp_words + nstripes  # without components: base, counts
        words.append(p, n * 8)
        sizes.append(n)
        free(p)
    return {"kind": "lustre", "n": len(sizes), "words": words.done(), "sizes": sizes,
            "rec_words": rec_words, "comp_words": comp_words,
            "stripe_size_at": names.index("LUSTRE_COMP_STRIPE_SIZE"), "stripe_count_at": names.index("LUSTRE_COMP_STRIPE_COUNT")}


def _decode_dxt(handle, idx: int, mod: str, losses: list) -> dict[str, Any]:
    """A DXT module: per record its file, rank, host and write/read counts; its segments (offset, length, start,
    end: 32 bytes each, each record's [writes..., reads...]) copied once, side by side, into one buffer."""
    ffi, _ = lib()
    hdr = ffi.sizeof("struct dxt_file_record")
    seg = ffi.sizeof("struct segment_info")  # offset, length (int64), start, end (double)
    ids, ranks, wcounts, rcounts = array.array("Q"), array.array("q"), array.array("q"), array.array("q")
    hosts: list[str] = []
    segments = _Buffer(seg << 20)  # room for 1M segments from the start (only the pages written cost memory)
    cast, string = ffi.cast, ffi.string
    for p in _iter_raw(handle, idx, losses, mod):
        rec = cast("struct dxt_file_record *", p)
        w, r = rec.write_count, rec.read_count
        ids.append(rec.base_rec.id)
        ranks.append(rec.base_rec.rank)
        hosts.append(string(rec.hostname).decode("utf-8", "replace"))
        wcounts.append(w)
        rcounts.append(r)
        if w + r:
            segments.append(cast("char *", p) + hdr, (w + r) * seg)
    return {"kind": "dxt", "n": len(ids), "rec_file_id": ids, "rec_rank": ranks, "rec_host": hosts,
            "rec_writes": wcounts, "rec_reads": rcounts, "segments": segments.done()}


def _decode_heatmap(handle, idx: int, losses: list) -> dict[str, Any]:
    ffi, _ = lib()
    ids, ranks, widths, nb = array.array("Q"), array.array("q"), array.array("d"), array.array("q")
    wb, rb = _Buffer(1 << 16), _Buffer(1 << 16)
    for p in _iter_raw(handle, idx, losses, "HEATMAP"):
        rec = ffi.cast("struct darshan_heatmap_record *", p)
        n = int(rec.nbins)
        ids.append(rec.base_rec.id)
        ranks.append(rec.base_rec.rank)
        widths.append(float(rec.bin_width_seconds))
        nb.append(n)
        if n:
            wb.append(rec.write_bins, 8 * n)
            rb.append(rec.read_bins, 8 * n)
    return {"kind": "heatmap", "n": len(ids), "rec_file_id": ids, "rec_rank": ranks, "bin_width_s": widths, "nbins": nb,
            "write_bins": wb.done(), "read_bins": rb.done()}


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
    # the ids in one view of the (id, name pointer) array; only the names need a call each
    size = ffi.sizeof("struct darshan_name_record")
    if size % 8 == 0 and ffi.offsetof("struct darshan_name_record", "id") == 0 and sys.byteorder == "little":
        ids = memoryview(ffi.buffer(recs, n * size)).cast("Q")[:: size // 8].tolist()
    else:  # a layout we did not expect: one look-up per record
        ids = [int(recs[i].id) for i in range(n)]
    raw = []
    for i in range(n):
        name = recs[i].name
        raw.append(string(name))
        free(name)
    free(recs)
    return dict(zip(ids, [b.decode("utf-8", "replace") for b in raw]))


_DECODERS = {"LUSTRE": _decode_lustre, "HEATMAP": _decode_heatmap}

# pseudo-modules (salvage steps): ``(NAMES,)`` reads the header and the record names only; BLOCKS decodes every
# region asked for from its intact compressed streams only (``_from_blocks``), for a region darshan-util crashes on
NAMES = "(names)"
BLOCKS = "(from-blocks)"
MAP = "(region map)"  # the key of a loss that is about the header's region map, not one module


def _open(src: container.Readable):
    """A darshan-util handle on the log ``src`` stands for; a log whose bzip2 regions this darshan-util cannot
    decompress is handed to it with the regions decompressed by iodiag and re-compressed as zlib (``container``)."""
    ffi, L = lib()
    handle = L.darshan_log_open(os.fsencode(src.path))
    if handle == ffi.NULL and src.header is not None and src.header.comp_type == container.COMP_BZIP2:
        src.decompress_regions()
        handle = L.darshan_log_open(os.fsencode(src.path))
    if handle == ffi.NULL:
        raise LogReadError("darshan-util cannot open it: not a Darshan log, or its header is damaged")
    return handle


def _stored_index(hdr: container.Header, idx: int) -> int | None:
    """Where module ``idx`` (darshan-util's numbering) sits in the header of a log of an older format: H5D (4)
    came with format 3.20 and PNETCDF_VAR (6) with 3.41, the modules after them sat one index lower before."""
    if hdr.minor < 41:
        if idx == 6:
            return None
        idx -= idx > 6
    if hdr.minor < 20:
        if idx == 4:
            return None
        idx -= idx > 4
    return idx if 0 <= idx < len(hdr.mod_map) else None


def _decode_module(handle, mod: str, idx: int, losses: list) -> dict[str, Any] | None:
    try:
        if mod in COUNTER_MODULES:
            return _decode_fixed(handle, idx, mod, losses)
        if mod in DXT_MODULES:
            return _decode_dxt(handle, idx, mod, losses)
        return _DECODERS[mod](handle, idx, losses)
    except (MemoryError, RecursionError):
        raise
    except Exception as exc:  # noqa: BLE001 - one damaged module must not cost the others
        losses.append((mod, f"this module's region could not be decoded ({type(exc).__name__}: {exc}); "
                            "every other module is reported"))
        return None


def _record_size(mod: str, ver: int) -> int | None:
    """Bytes per record of a fixed-size module in the log, when its format is the one darshan-util's structs
    describe (an older version's records have another size)."""
    if mod in COUNTER_MODULES and MODULE_VERSIONS.get(mod) == ver:
        return lib()[0].sizeof(STRUCTS[mod])
    return None


def _from_blocks(src: container.Readable, mod: str, idx: int, ver: int, span: tuple[int, int] | None = None):
    """Module ``mod`` decoded by darshan-util from the intact compressed streams of its region only (a log with
    that one region, re-compressed, made for the purpose): the records before *and after* a damaged stream.
    (record or None, what the region held: {"blocks", "damaged_blocks", "expected", "exact"}) or None when the
    container cannot be read."""
    path, hdr = src.origin  # the regions as written (a bzip2 log's, not the re-compressed copy's)
    stored = _stored_index(hdr, idx) if hdr is not None else None
    if stored is None:
        return None
    off, ln = span or hdr.mod_map[stored]
    raw = container.read_span(path, off, ln)
    scan = container.scan_region(hdr.comp_type, raw)
    size = _record_size(mod, ver)
    body = scan.data
    if size and scan.damaged:
        # a fixed-size module's records are whole in each stream: what came out of a damaged stream before the
        # damage holds whole records too (the last, cut one left out)
        body += b"".join(p[:len(p) // size * size] for p in scan.prefix)
    seen = {"blocks": scan.streams + scan.damaged, "damaged_blocks": scan.damaged,
            "expected": len(body) // size if size else None, "exact": bool(size) and scan.clean and len(raw) == ln,
            "region_bytes": ln, "bytes_in_file": len(raw)}
    job_off, job_len = hdr.regions(os.path.getsize(path))[0][1:]
    job, _ = container.decompress_region(hdr.comp_type, container.read_span(path, job_off, job_len))
    fd, tmp = src._temp()
    try:
        container.write_regions(hdr, [("job", job), (f"mod{stored}", body)], fd)
    finally:
        os.close(fd)
    ffi, L = lib()
    h = L.darshan_log_open(os.fsencode(tmp))
    if h == ffi.NULL:
        return None
    errors: list = []
    try:
        rec = _decode_module(h, mod, idx, errors)
    finally:
        L.darshan_log_close(h)
    seen["decode_error"] = bool(errors)
    return rec, seen


def _lost_records(mod: str, n: int, seen: dict[str, Any] | None, why: str) -> str:
    """One line naming what a module lost, in records: exact where the region's size says how many it held, else
    estimated from the records per intact compressed block (each writing rank compresses its share on its own)."""
    if seen is None:
        return f"{n:,} records decoded; {why}; later records of this module are lost"
    blocks, bad = seen["blocks"], seen["damaged_blocks"]
    have, ln = seen["bytes_in_file"], seen["region_bytes"]
    if have < ln:  # the file ends inside (or before) the region: a log cut short
        cut = (f"the file ends {have:,} bytes into its {ln:,}-byte region" if have else
               f"the file ends before its {ln:,}-byte region")
        if n and bad < blocks:
            return f"{n:,} records decoded, from the intact compressed blocks before the cut ({cut}: the rest is lost)"
        return f"{n:,} records decoded ({cut}: the log was cut short)"
    if seen["exact"] and seen["expected"] is not None and seen["expected"] > n:
        return f"{n:,} of {seen['expected']:,} records decoded ({seen['expected'] - n:,} lost: {why})"
    if bad and blocks > bad and n:
        est = round(n * blocks / (blocks - bad))
        return (f"{n:,} of about {est:,} records decoded ({why}; {bad} of its {blocks} compressed blocks are damaged "
                f"and their records from the damage on lost, about {est - n:,} by the records of the intact blocks)")
    if bad:
        return (f"{n:,} records decoded ({why}; {bad} of its {blocks} compressed blocks are damaged: their records "
                "from the damage on are lost)")
    return f"{n:,} records decoded ({why}; its compressed blocks are intact, records after the damage may be lost)"


def decode_log(path: str, modules: Iterable[str] | None = ALL_MODULES, *, names: bool = True) -> dict[str, Any]:
    """Decode one log into a raw log: ``{"path", "header", "mods": {module: raw module}, "losses", "names"}``.
    ``modules=()`` reads only the header (fast listing).

    One damaged region costs only what it holds.  darshan-util keeps its decompression state in the handle and a
    region that failed leaves it unusable, so after a loss the next module (and the names) get a fresh handle.  A
    module that lost records is decoded once more from the intact compressed streams of its region
    (``_from_blocks``: an MPI log compresses each rank's share on its own), which also recovers the records after
    the damage; what was lost is counted against what the region holds.  With the pseudo-module BLOCKS in
    ``modules`` every module (and the names) is decoded that way from the start (for a region darshan-util crashes
    on)."""
    ffi, L = lib()
    with _readable(path) as src:
        handle = _open(src)
        try:
            header = read_header(handle)
            if src.notes:
                header["container"] = list(src.notes)
            data: dict[str, Any] = {"path": path, "header": header, "mods": {}, "losses": []}
            want = set(modules or ())
            from_blocks = BLOCKS in want
            losses: list = data["losses"]
            spans, map_note = _map_spans(src) if want else ({}, [])
            if map_note:
                # the map contradicts itself: darshan-util would read the wrong bytes, silently; every module is
                # read from its intact streams within the boundaries the regions share
                from_blocks = True
                losses.append((MAP, "the header's region map contradicts itself (" + "; ".join(map_note[:2]) +
                                    "): modules were read within the boundaries their neighbours confirm"))
            for mod, info in header["modules"].items():
                if mod not in want:
                    continue
                idx = MOD_NAMES.index(mod) if mod in MOD_NAMES else info["idx"]
                if mod not in COUNTER_MODULES and mod not in DXT_MODULES and mod not in _DECODERS:
                    continue
                mine: list = []
                rec = None if from_blocks else _decode_module(handle, mod, idx, mine)
                stored = _stored_index(src.origin[1], idx) if src.origin[1] is not None else None
                if not mine and f"mod{stored}" in src.damaged:  # iodiag's own decompression found the damage
                    mine.append((mod, f"its {container.COMP_NAMES[src.origin[1].comp_type]} streams are damaged"))
                if mine:  # this handle's decompression state is spent: a fresh one for the rest
                    L.darshan_log_close(handle)
                    handle = ffi.NULL
                    handle = _open(src)
                if mine or from_blocks:
                    why = (mine[0][1].split(";")[0] if mine else "the header's region map is damaged" if map_note
                           else "darshan-util crashed on its region")
                    got = _from_blocks(src, mod, idx, info["ver"], spans.get(idx))
                    n = rec["n"] if rec is not None else 0
                    if got is not None and got[0] is not None and got[0]["n"] >= n:
                        rec, n = got[0], got[0]["n"]
                    seen = got[1] if got is not None else None
                    # nothing is lost when the region's intact streams, all in the file, decode without an error
                    # into as many records as their size holds
                    complete = (seen is not None and not seen["damaged_blocks"] and not seen["decode_error"]
                                and seen["bytes_in_file"] == seen["region_bytes"]
                                and (seen["expected"] == n if seen["expected"] is not None else n > 0))
                    if not complete:
                        losses.append((mod, _lost_records(mod, n, seen, why)))
                        data.setdefault("lost_records", {})[mod] = {"decoded": n, **(seen or {})}
                if rec is None:
                    continue
                data["mods"][mod] = rec
                if info["len"] > 0 and rec["n"] == 0 and not any(m == mod for m, _ in losses):
                    losses.append((mod, f"the header says this module holds {info['len']} bytes but no record could be read: the log is truncated or damaged"))
            _recover_damaged(src, want, data)
            if names and want:
                blocks = from_blocks or "names" in src.damaged
                data["names"] = _names_from_blocks(src, losses) if blocks else _names(handle)
            return data
        finally:
            if handle != ffi.NULL:
                L.darshan_log_close(handle)


def _readable(path: str) -> container.Readable:
    """The log as darshan-util can be handed it (``container.Readable``), or a LogReadError saying why not."""
    if not os.path.isfile(path):
        raise LogReadError("not a file")
    if os.path.getsize(path) == 0:
        raise LogReadError("the file is empty (0 bytes): the process that wrote it probably died before Darshan's "
                           "shutdown", "let processes exit normally (Dask: close the client/cluster; no SIGKILL) or "
                           "recover their mmap logs with darshan-convert")
    try:
        return container.Readable(path)
    except container.ContainerError as exc:
        raise LogReadError(str(exc), exc.next_step) from None
    except OSError as exc:
        raise LogReadError(f"cannot be read ({exc.strerror or exc})") from None


def _recover_damaged(src: container.Readable, want: set, data: dict[str, Any]) -> None:
    """The module regions iodiag re-compressed with no intact stream (gone from the copy darshan-util read): each
    decoded from the original's intact streams where it can be, and its loss counted."""
    header, losses = data["header"], data["losses"]
    for key in sorted(src.damaged):
        if not key.startswith("mod"):
            continue
        ohdr = src.origin[1]
        mod = container.module_name(ohdr, int(key[3:]))
        if mod not in want or mod in data["mods"] or any(m == mod for m, _ in losses) or mod not in MOD_NAMES:
            continue
        idx, ver = MOD_NAMES.index(mod), ohdr.mod_ver[int(key[3:])]
        header["modules"].setdefault(mod, {"len": ohdr.mod_map[int(key[3:])][1], "ver": ver, "idx": idx,
                                           "partial": False})
        got = _from_blocks(src, mod, idx, ver)
        rec = got[0] if got is not None else None
        if rec is not None:
            data["mods"][mod] = rec
        n = rec["n"] if rec is not None else 0
        losses.append((mod, _lost_records(mod, n, got[1] if got is not None else None,
                                          f"its {container.COMP_NAMES[ohdr.comp_type]} streams are damaged")))


def _names_from_blocks(src: container.Readable, losses: list) -> dict[int, str]:
    """The record names from the intact compressed streams of the name region (a log with the job and name
    regions only, re-compressed), for a name region darshan-util crashes on."""
    path, hdr = src.origin
    if hdr is None or not hdr.name_map[1]:
        return {}
    span = hdr.name_map
    if container.map_damage(hdr, os.path.getsize(path)):
        span = container.repaired_spans(hdr, os.path.getsize(path)).get("names", span)
    scan = container.scan_region(hdr.comp_type, container.read_span(path, *span))
    job_off, job_len = hdr.regions(os.path.getsize(path))[0][1:]
    job, _ = container.decompress_region(hdr.comp_type, container.read_span(path, job_off, job_len))
    fd, tmp = src._temp()
    try:
        container.write_regions(hdr, [("job", job), ("names", scan.data)], fd)
    finally:
        os.close(fd)
    ffi, L = lib()
    h = L.darshan_log_open(os.fsencode(tmp))
    if h == ffi.NULL:
        return {}
    try:
        got = _names(h)
    finally:
        L.darshan_log_close(h)
    if scan.damaged:
        losses.append((NAMES, f"record names: {len(got):,} read; {scan.damaged} of the {scan.streams + scan.damaged} "
                              "compressed blocks of the name region are damaged and their names lost (those files "
                              "are shown unnamed; their numbers are complete)"))
    return got


def _map_spans(src: container.Readable) -> tuple[dict[int, tuple[int, int]], list[str]]:
    """For a header whose region map contradicts itself: (module index -> repaired (offset, length), what the
    contradictions are); ({}, []) for a consistent map."""
    path, hdr = src.origin
    if hdr is None or hdr.comp_type == container.COMP_NONE:
        return {}, []
    size = os.path.getsize(path)
    note = container.map_damage(hdr, size)
    if not note:
        return {}, []
    out = {}
    for key, span in container.repaired_spans(hdr, size).items():
        if key.startswith("mod"):
            for idx in range(len(MOD_NAMES)):
                if _stored_index(hdr, idx) == int(key[3:]):
                    out[idx] = span
    return out, note
