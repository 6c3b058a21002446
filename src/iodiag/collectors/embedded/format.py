"""The embedded collector's trace format (mirrors ``iodiag_preload.c``).

One process writes ``<host>-<pid>-<start_ns>.iot`` (a 4096-byte header followed by
fixed 48-byte records) and ``<host>-<pid>-<start_ns>.names`` (``u64 id, u32 len,
u32 pad, path bytes`` entries).  Everything here is NumPy dtypes and code
tables, so a reader can ``np.fromfile`` a trace without a per-record loop.
"""

from __future__ import annotations

import numpy as np

MAGIC = b"IODIAGT1"
FORMAT_VERSION = 1
HEADER_SIZE = 4096
# per process: no practical cap (2^32 records, 192 GiB); the trace grows on disk, not in memory, and the
# collector reserves less address space (a smaller cap, in the trace header) where ulimit -v refuses this
DEFAULT_MAX_RECORDS = 1 << 32

RECORD_DTYPE = np.dtype([
    ("op", "u1"), ("module", "u1"), ("flags", "<u2"), ("tid", "<u4"),
    ("file_id", "<u8"), ("offset", "<i8"), ("length", "<i8"),
    ("start_ns", "<u8"), ("dur_ns", "<u8"),
])
assert RECORD_DTYPE.itemsize == 48

HEADER_DTYPE = np.dtype({
    "names": ["magic", "version", "rec_size", "header_size", "count", "cap", "dropped", "flags",
              "exit_status", "pid", "ppid", "start_ns", "end_ns", "host", "exe", "cmdline", "cmdline_len"],
    "formats": ["S8", "<u4", "<u4", "<u8", "<u8", "<u8", "<u8", "<u4",
                "<i4", "<i8", "<i8", "<u8", "<u8", "S64", "S1024", "V2048", "<u4"],
    "offsets": [0, 8, 12, 16, 24, 32, 40, 48, 52, 56, 64, 72, 80, 88, 152, 1176, 3224],
    "itemsize": HEADER_SIZE,
})

NAME_ENTRY_HEADER = np.dtype([("id", "<u8"), ("len", "<u4"), ("pad", "<u4")])

# raw operation codes written by the C library
OPC_NAMES = (
    "none", "read", "write", "open", "close", "stat", "seek", "fsync", "readdir", "mkdir",
    "rename", "unlink", "fdatasync", "flush", "dup", "fdopen", "rmdir", "opendir", "closedir", "fdopendir",
)
OPC = {name: i for i, name in enumerate(OPC_NAMES)}

# record flags
RF_FAILED = 1
RF_MEM_UNALIGNED = 2
RF_OFFSET_UNKNOWN = 4
RF_CREATE = 8
RF_DIR = 16

# header flags
HF_EXITED = 1
HF_EXEC = 2
HF_CAPPED = 4

MODULE_POSIX = 0
MODULE_STDIO = 2


def read_names(path) -> dict[int, str]:
    """file id -> path of one ``.names`` file (``u64 id, u32 len, u32 pad, path bytes`` entries); an entry cut
    by a kill ends the list, an unreadable file gives none."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return {}
    out: dict[int, str] = {}
    pos, n = 0, len(data)
    hsz = NAME_ENTRY_HEADER.itemsize
    while pos + hsz <= n:
        h = np.frombuffer(data, dtype=NAME_ENTRY_HEADER, count=1, offset=pos)[0]
        ln = int(h["len"])
        if pos + hsz + ln > n:  # the last entry was cut by a kill
            break
        out[int(h["id"])] = data[pos + hsz: pos + hsz + ln].decode("utf-8", "surrogateescape")
        pos += hsz + ln
    return out
