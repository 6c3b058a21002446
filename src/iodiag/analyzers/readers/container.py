"""The Darshan log *container*: the uncompressed header, its region map and the compression of the regions.

darshan-util decodes every record; this module only looks at the parts of a log around the records, so that
darshan-util can be handed a log it is able to read:

- a log whose regions are bzip2-compressed (Darshan 3.4.4+ can write them) when darshan-util was built without
  bzip2 (pydarshan's wheel is): the regions are decompressed here with Python's ``bz2`` and darshan-util reads an
  equivalent log whose regions are zlib streams (``write_regions``);
- a whole log compressed by gzip or bzip2 (``x.darshan.gz``, ``x.darshan.bz2``): decompressed to a temporary file;
- a Darshan 2.x log (format "2.xx", usually gzip'd): refused with a message saying what it is.

The header layout is Darshan's ``struct darshan_header`` (include/darshan-log-format.h): version string, magic
number, compression type, partial flags, the name region's and each module's (offset, length) in the file, each
module's format version.  Logs of format 3.41 and later map 64 modules; earlier 3.x logs 16.  Regions follow
each other: the job region right after the header, then the name region, then the modules in index order.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Iterator

# bz2, gzip and tempfile are imported where used: this module is imported before a reader child forks, on the
# path of every report, and most logs need none of them

MAGIC_NR = 6567223  # DARSHAN_MAGIC_NR, also Darshan 2's CP_MAGIC_NR
COMP_ZLIB, COMP_BZIP2, COMP_NONE = 0, 1, 2  # enum darshan_comp_type
COMP_NAMES = {COMP_ZLIB: "zlib", COMP_BZIP2: "bzip2", COMP_NONE: "none"}

# (version, magic, comp_type, partial_flag, name_map off/len, mod_map off/len x N, mod_ver x N)
_LAYOUTS = {
    64: "8sqB7xQ2Q128Q64I",  # format 3.41 and later: 1,328 bytes
    16: "8sqB3xI2Q32Q16I",  # formats 3.00-3.21: 360 bytes
}

GZIP_MAGIC = b"\x1f\x8b"
BZIP2_MAGIC = b"BZh"


class ContainerError(Exception):
    """A log this module can say something definite about (Darshan 2.x, a damaged compressed file)."""

    def __init__(self, cause: str, next_step: str | None = None) -> None:
        super().__init__(cause)
        self.next_step = next_step


class Header:
    """``struct darshan_header`` of one log (the map as stored, before darshan-util's index shifts for old formats)."""

    __slots__ = ("version", "major", "minor", "byteorder", "comp_type", "partial_flag", "name_map", "mod_map",
                 "mod_ver", "size", "fmt")

    def __init__(self, version: str, major: int, minor: int, byteorder: str, comp_type: int, partial_flag: int,
                 name_map: tuple[int, int], mod_map: list[tuple[int, int]], mod_ver: list[int], size: int,
                 fmt: str) -> None:
        self.version, self.major, self.minor = version, major, minor  # format version, e.g. "3.41"
        self.byteorder = byteorder  # "<" or ">": the order the log was written in
        self.comp_type, self.partial_flag = comp_type, partial_flag
        self.name_map, self.mod_map, self.mod_ver = name_map, mod_map, mod_ver
        self.size = size  # bytes of the header (where the job region starts)
        self.fmt = fmt

    def regions(self, file_size: int) -> list[tuple[str, int, int]]:
        """Every region as (key, offset, length) in file order: "job", "names", then "mod<i>" (stored index)."""
        out = []
        for i, (off, ln) in enumerate(self.mod_map):
            if ln:
                out.append((f"mod{i}", off, ln))
        firsts = [off for _, off, _ in out]
        if self.name_map[1]:
            job_end = self.name_map[0]
        else:
            job_end = min(firsts) if firsts else file_size
        regions = [("job", self.size, max(job_end - self.size, 0))]
        if self.name_map[1]:
            regions.append(("names", self.name_map[0], self.name_map[1]))
        return regions + sorted(out, key=lambda r: r[1])

    def pack(self, comp_type: int, name_map: tuple[int, int], mod_map: list[tuple[int, int]]) -> bytes:
        flat = [v for pair in mod_map for v in pair]
        return struct.pack(self.byteorder + self.fmt, self.version.encode("ascii").ljust(8, b"\0")[:8], MAGIC_NR,
                           comp_type, self.partial_flag, *name_map, *flat, *self.mod_ver)


def _version(raw: bytes) -> tuple[str, int, int] | None:
    text = raw.split(b"\0", 1)[0].decode("ascii", "replace")
    parts = text.split(".")
    if len(parts) != 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return text, int(parts[0]), int(parts[1])


def read_header(head: bytes) -> Header | None:
    """The header of a Darshan 3 log from its first bytes (None: not one this module understands)."""
    ver = _version(head[:8])
    if ver is None or ver[1] != 3:
        return None
    nmods = 64 if ver[2] >= 41 else 16
    fmt = _LAYOUTS[nmods]
    size = struct.calcsize("<" + fmt)
    if len(head) < size:
        return None
    for order in ("<", ">"):
        vals = struct.unpack(order + fmt, head[:size])
        if vals[1] == MAGIC_NR:
            maps = vals[6:6 + 2 * nmods]
            return Header(version=ver[0], major=ver[1], minor=ver[2], byteorder=order, comp_type=vals[2],
                          partial_flag=vals[3], name_map=(vals[4], vals[5]),
                          mod_map=[(maps[2 * i], maps[2 * i + 1]) for i in range(nmods)],
                          mod_ver=list(vals[6 + 2 * nmods:]), size=size, fmt=fmt)
    return None


def darshan2_version(head: bytes) -> str | None:
    """The format version of a Darshan 1.x/2.x log ("2.06"), from its first bytes; None for anything else.  Its
    version string is "M.mm" padded with NULs to 8 bytes (followed by the magic number in 2.x)."""
    ver = _version(head[:8])
    if ver is None or ver[1] not in (1, 2) or len(head) < 16:
        return None
    if ver[1] == 2 and MAGIC_NR not in (struct.unpack("<q", head[8:16])[0], struct.unpack(">q", head[8:16])[0]):
        return None
    if head[len(ver[0]):8].strip(b"\0"):
        return None
    return ver[0]


def darshan2_message(version: str, compressed: str | None = None) -> tuple[str, str]:
    """(cause, next step) for a log of Darshan 1 or 2."""
    how = f", {compressed}-compressed as Darshan {version[0]} wrote them" if compressed else ""
    return (f"a Darshan {version[0]}.x log (format {version}{how}): darshan-util 3.x, which iodiag reads logs with, "
            f"cannot read logs of Darshan 1 or 2",
            "read it with darshan-util 2.x (darshan-parser, darshan-job-summary.pl; its darshan-convert brings older "
            "logs to the last 2.x format); iodiag reads the logs of Darshan 3.0 and later")


# -- decompressing regions ---------------------------------------------------------------------------------------

def _bz2():
    import bz2

    return bz2


def _streams(data: bytes, make) -> tuple[bytes, bool]:
    """Concatenated compressed streams (one per writer rank in an MPI log) decompressed: (bytes, clean).  Stops at
    the first damaged stream (``clean`` False) with what came out before it."""
    out = []
    rest = data
    while rest:
        d = make()
        try:
            out.append(d.decompress(rest))
        except (OSError, ValueError, EOFError, zlib.error):
            return b"".join(out), False
        if not d.eof:
            return b"".join(out), False
        rest = d.unused_data
        if not rest.strip(b"\0"):
            break
    return b"".join(out), True


def decompress_region(comp_type: int, data: bytes) -> tuple[bytes, bool]:
    if comp_type == COMP_ZLIB:
        return _streams(data, zlib.decompressobj)
    if comp_type == COMP_BZIP2:
        return _streams(data, _bz2().BZ2Decompressor)
    return data, True


class RegionScan:
    """A region decompressed stream by stream, past damaged streams (an MPI log's module region is one compressed
    stream per writing rank, so the streams after a damaged one still hold their records)."""

    __slots__ = ("data", "streams", "damaged", "prefix")

    def __init__(self, data: bytes, streams: int, damaged: int, prefix: list[bytes]) -> None:
        self.data = data  # the intact streams' bytes, in order
        self.streams = streams  # intact streams
        self.damaged = damaged  # damaged stretches skipped (a stream that failed, up to the next intact one)
        self.prefix = prefix  # per damaged stretch: what came out of it before the damage

    @property
    def clean(self) -> bool:
        return not self.damaged


def _stream_starts(comp_type: int, raw: bytes, after: int) -> Iterator[int]:
    """Offsets past ``after`` where a compressed stream may start (a zlib header; bzip2's stream + block magic)."""
    if comp_type == COMP_ZLIB:
        at = raw.find(b"\x78", after)
        while 0 <= at < len(raw) - 1:
            if ((raw[at] << 8) | raw[at + 1]) % 31 == 0:
                yield at
            at = raw.find(b"\x78", at + 1)
    elif comp_type == COMP_BZIP2:
        at = raw.find(b"BZh", after)
        while at >= 0:
            if raw[at + 3:at + 4].isdigit() and raw[at + 4:at + 10] in (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90"):
                yield at
            at = raw.find(b"BZh", at + 1)


def _one_stream(comp_type: int, raw: bytes) -> tuple[bytes, int | None]:
    """(bytes out, compressed length) of the stream at the start of ``raw``; length None when it is damaged."""
    d = zlib.decompressobj() if comp_type == COMP_ZLIB else _bz2().BZ2Decompressor()
    out = []
    try:
        out.append(d.decompress(raw))
    except (OSError, ValueError, EOFError, zlib.error):
        # what came out before the damage: feed it again in small pieces
        d = zlib.decompressobj() if comp_type == COMP_ZLIB else _bz2().BZ2Decompressor()
        out = []
        for i in range(0, len(raw), 512):
            try:
                out.append(d.decompress(raw[i:i + 512]))
            except (OSError, ValueError, EOFError, zlib.error):
                break
            if d.eof:
                break
        return b"".join(out), None
    if not d.eof:
        return out[0], None
    return out[0], len(raw) - len(d.unused_data)


def scan_region(comp_type: int, raw: bytes) -> RegionScan:
    if comp_type not in (COMP_ZLIB, COMP_BZIP2):
        return RegionScan(raw, 1, 0, [])
    parts, prefix = [], []
    streams = damaged = 0
    at = 0
    while at < len(raw) and raw[at:].strip(b"\0"):
        got, used = _one_stream(comp_type, raw[at:])
        if used is not None:
            parts.append(got)
            streams += 1
            at += used
            continue
        damaged += 1
        prefix.append(got)
        nxt = None
        for cand in _stream_starts(comp_type, raw, at + 1):
            if _one_stream(comp_type, raw[cand:])[1] is not None:
                nxt = cand
                break
        if nxt is None:
            break
        at = nxt
    return RegionScan(b"".join(parts), streams, damaged, prefix)


def read_span(path: str, off: int, length: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(off)
        return fh.read(length)


def map_damage(hdr: Header, file_size: int) -> list[str]:
    """Where the header's region map contradicts itself (regions follow each other with no gap, in the order
    Darshan writes them, and the last one ends the file): one line per contradiction, empty for a consistent map."""
    out = []
    end, prev = hdr.size, "header"
    for key, off, ln in _written_order(hdr, file_size):
        if off != end:
            out.append(f"the {_label(key, hdr)} region starts at byte {off:,}, the {_label(prev, hdr)} region ends at {end:,}")
        end, prev = off + ln, key
    if end < file_size:  # (a file that ends inside a region was cut short: each region read says so)
        out.append(f"the last region ({_label(prev, hdr)}) ends at byte {end:,} of a {file_size:,}-byte file")
    return out


def module_name(hdr: Header, stored: int) -> str:
    """The name of the module at index ``stored`` of this log's header (older formats number modules after H5D
    and PNETCDF_VAR one lower: darshan-util shifts them as it opens the log)."""
    from .darshan_lib import MOD_NAMES

    idx = stored
    if hdr.minor < 20 and idx >= 4:
        idx += 1
    if hdr.minor < 41 and idx >= 6:
        idx += 1
    return MOD_NAMES[idx] if idx < len(MOD_NAMES) else f"module {idx}"


def _label(key: str, hdr: Header) -> str:
    return module_name(hdr, int(key[3:])) if key.startswith("mod") else key


def _written_order(hdr: Header, file_size: int) -> list[tuple[str, int, int]]:
    """The regions in the order Darshan writes them (job, names, modules by index), whatever their offsets say."""
    regions = hdr.regions(file_size)
    rank = {"job": -2, "names": -1}
    return sorted(regions, key=lambda r: rank.get(r[0], int(r[0][3:]) if r[0].startswith("mod") else 99))


def repaired_spans(hdr: Header, file_size: int) -> dict[str, tuple[int, int]]:
    """Each region's (offset, length) by the boundaries the regions share, for a map that contradicts itself
    (``map_damage``).  Where a region's end and the next one's start disagree, one of the two numbers is damaged:
    when the next region's own end agrees with the region after it, its offset is sound (the length before it
    is the damaged number); else its offset is the damaged one.  Only the regions whose span changes."""
    regs = _written_order(hdr, file_size)
    starts = [off for _, off, _ in regs] + [file_size]
    ends = [off + ln for _, off, ln in regs]
    bounds = [hdr.size]
    for k in range(len(regs)):
        nxt_start = starts[k + 1]
        if ends[k] == nxt_start or k + 1 == len(regs):
            bounds.append(nxt_start if k + 1 < len(regs) else file_size)
            continue
        nxt_sound = k + 2 > len(regs) or ends[k + 1] == starts[k + 2]
        bounds.append(nxt_start if nxt_sound else ends[k])
    out = {}
    for k, (key, off, ln) in enumerate(regs):
        a, b = bounds[k], bounds[k + 1]
        if (a, b - a) != (off, ln) and 0 <= a < b <= file_size:
            out[key] = (a, b - a)
    return out


def write_regions(hdr: Header, regions: list[tuple[str, bytes]], out_fd: int) -> None:
    """A log with ``hdr``'s header and the given regions ("job", "names", "mod<i>"), each one zlib stream (level 1:
    fast).  zlib, not "stored uncompressed": darshan-util 3.5.0 reads a DARSHAN_NO_COMP region wrongly past its
    first MiB (its staging buffer's position is not reset when the buffer is refilled)."""
    at = hdr.size
    name_map = (0, 0)
    mod_map = [(0, 0)] * len(hdr.mod_map)
    packed = []
    for key, got in regions:
        z = zlib.compress(got, 1) if got else b""
        if key == "names":
            name_map = (at, len(z))
        elif key.startswith("mod"):
            mod_map[int(key[3:])] = (at, len(z))
        packed.append(z)
        at += len(z)
    with os.fdopen(os.dup(out_fd), "wb") as out:
        out.write(hdr.pack(COMP_ZLIB, name_map, mod_map))
        for z in packed:
            out.write(z)


def recompress(path: str, hdr: Header, out_fd: int) -> list[str]:
    """Write ``path`` to ``out_fd`` as an equivalent log whose regions are zlib streams; the regions that did not
    decompress cleanly (their bytes up to the damage are kept) by key."""
    size = os.path.getsize(path)
    damaged: list[str] = []
    regions: list[tuple[str, bytes]] = []
    with open(path, "rb") as fh:
        for key, off, ln in hdr.regions(size):
            fh.seek(off)
            raw = fh.read(ln)
            if key == "job":  # one stream: what comes out before any damage
                got, clean = decompress_region(hdr.comp_type, raw)
            else:  # the intact streams only (a damaged one may end inside a record): the loss is counted later
                scan = scan_region(hdr.comp_type, raw)
                got, clean = scan.data, scan.clean
            if not clean or len(raw) != ln:
                damaged.append(key)
            regions.append((key, got))
    write_regions(hdr, regions, out_fd)
    return damaged


# -- what darshan-util is handed -----------------------------------------------------------------------------------

HEAD_BYTES = 1328  # the largest header (format 3.41)


def _decompress_whole(path: str, kind: str, fd: int) -> None:
    import gzip

    opener = {"gzip": gzip.open, "bzip2": _bz2().open}[kind]
    try:
        with opener(path, "rb") as src, os.fdopen(os.dup(fd), "wb") as dst:
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                dst.write(chunk)
    except (OSError, EOFError, ValueError) as exc:
        raise ContainerError(f"a {kind}-compressed file that does not decompress ({exc}): the file is damaged or "
                             "truncated", f"check it with {'gzip -t' if kind == 'gzip' else 'bzip2 -t'}; copy the "
                             "log again from where the job wrote it") from None


class Readable:
    """What darshan-util is handed for a log (``path``), made on the way in, removed on the way out of ``with``.

    A whole-file gzip/bzip2 log is decompressed to a temporary file at once; a Darshan 2.x log raises
    ContainerError; ``decompress_regions`` makes an equivalent log with bzip2 regions re-compressed as zlib (called
    only when darshan-util refuses the log).  Anything not recognised is left as it is: darshan-util says what it
    thinks of it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.notes: list[str] = []
        self.damaged: set[str] = set()  # regions (keys) that did not decompress cleanly when iodiag re-compressed them
        self._temps: list[str] = []
        try:
            head = self._head()
            outer = "gzip" if head[:2] == GZIP_MAGIC else "bzip2" if head[:3] == BZIP2_MAGIC else None
            if outer:
                fd, tmp = self._temp()
                try:
                    _decompress_whole(self.path, outer, fd)
                finally:
                    os.close(fd)
                self.path = tmp
                head = self._head()
                self.notes.append(f"the whole file is {outer}-compressed; iodiag decompressed it")
            v2 = darshan2_version(head)
            if v2 is not None:
                raise ContainerError(*darshan2_message(v2, outer))
            self.header = read_header(head)
            self.origin = (self.path, self.header)  # the log as written (decompressed whole): its own regions
        except BaseException:
            self.close()
            raise

    def _head(self) -> bytes:
        with open(self.path, "rb") as fh:
            return fh.read(HEAD_BYTES)

    def _temp(self) -> tuple[int, str]:
        import tempfile

        fd, tmp = tempfile.mkstemp(prefix="iodiag-log-", suffix=".darshan")
        self._temps.append(tmp)
        return fd, tmp

    def decompress_regions(self) -> None:
        """From now on ``path`` is an equivalent log whose regions are zlib streams."""
        assert self.header is not None
        comp = COMP_NAMES.get(self.header.comp_type, "?")
        fd, tmp = self._temp()
        try:
            damaged = recompress(self.path, self.header, fd)
        finally:
            os.close(fd)
        self.path = tmp
        self.header = read_header(self._head())
        self.damaged.update(damaged)
        self.notes.append(f"{comp}-compressed regions decompressed by iodiag (this darshan-util was built without "
                          f"{comp}; re-compressed as zlib)" + (f"; damaged regions: {', '.join(damaged)}" if damaged else ""))

    def close(self) -> None:
        for t in self._temps:
            try:
                os.unlink(t)
            except OSError:
                pass
        self._temps = []

    def __enter__(self) -> "Readable":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
