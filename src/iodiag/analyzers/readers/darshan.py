"""Read one Darshan log into plain NumPy arrays (a ``LogData`` dict).

Only the modules asked for are decoded.  ``darshan_decode.decode_log`` has
darshan-util decode the records into raw buffers (the bytes of each C record
as they are); ``as_arrays`` views those buffers through NumPy dtypes built
from the C structs' own layout (``ffi.offsetof``), so a log of 600k DXT
segments costs one C call per record, not a Python object per segment.

The two halves can run in different processes: ``isolate.py`` decodes in a
child that may crash and that starts before NumPy is imported, and the
parent makes the arrays.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from .darshan_decode import ALL_MODULES, COUNTER_MODULES, DXT_MODULES, OPAQUE_MODULES, LogReadError, decode_log

__all__ = ["ALL_MODULES", "COUNTER_MODULES", "DXT_MODULES", "OPAQUE_MODULES", "LogReadError", "as_arrays", "read_log",
           "dxt_columns", "repeat_range", "dxt_segment_keys"]


def read_log(path: str, modules: Iterable[str] | None = ALL_MODULES, *, names: bool = True) -> dict[str, Any]:
    """Decode one log into arrays.  ``modules=()`` reads only the header (fast listing)."""
    return as_arrays(decode_log(path, modules, names=names))


def as_arrays(raw: dict[str, Any]) -> dict[str, Any]:
    """A raw log (``decode_log``) as a LogData dict: each module's buffers viewed as NumPy columns (no copy of
    the large ones).  A module whose buffers do not make sense is left out and reported in ``losses``, as a
    module darshan-util could not decode is."""
    mods: dict[str, Any] = {}
    losses = list(raw["losses"])
    for mod, rec in raw["mods"].items():
        try:
            mods[mod] = _ARRAYS[rec["kind"]](rec)
        except (MemoryError, RecursionError):
            raise
        except Exception as exc:  # noqa: BLE001 - one damaged module must not cost the others
            losses.append((mod, f"this module's region could not be decoded ({type(exc).__name__}: {exc}); "
                                "every other module is reported"))
    return {**raw, "mods": mods, "losses": losses}


def _fixed_arrays(rec: dict[str, Any]) -> dict[str, Any]:
    lay = rec["layout"]
    nc, nf = len(lay["counter_names"]), len(lay["fcounter_names"])
    fields = [("id", "<u8", lay["id"]), ("rank", "<i8", lay["rank"])]
    if lay["file_rec_id"] is not None:
        fields.append(("file_rec_id", "<u8", lay["file_rec_id"]))
    fields += [("counters", ("<i8", (nc,)), lay["counters"]), ("fcounters", ("<f8", (nf,)), lay["fcounters"])]
    dt = np.dtype({"names": [f[0] for f in fields], "formats": [f[1] for f in fields],
                   "offsets": [f[2] for f in fields], "itemsize": lay["itemsize"]})
    arr = np.frombuffer(rec["records"], dtype=dt, count=rec["n"])
    out = {
        "file_id": np.ascontiguousarray(arr["id"]),
        "rank": np.ascontiguousarray(arr["rank"]),
        "counters": np.ascontiguousarray(arr["counters"]).reshape(len(arr), nc),
        "fcounters": np.ascontiguousarray(arr["fcounters"]).reshape(len(arr), nf),
        "counter_names": lay["counter_names"],
        "fcounter_names": lay["fcounter_names"],
    }
    if lay["file_rec_id"] is not None:
        out["file_rec_id"] = np.ascontiguousarray(arr["file_rec_id"])
    return out


def _lustre_arrays(rec: dict[str, Any]) -> dict[str, Any]:
    """The first component's stripe size/count and the OST ids as a "1,2,3" string, per record, from the records'
    blocks (struct, components, OST ids) decoded together."""
    n, rec_words, comp_words = rec["n"], rec["rec_words"], rec["comp_words"]
    si, sc = rec["stripe_size_at"], rec["stripe_count_at"]
    if not n:
        return {"file_id": np.zeros(0, "u8"), "rank": np.zeros(0, "i8"), "stripe_size": np.zeros(0, "i8"),
                "stripe_count": np.zeros(0, "i8"), "osts": np.zeros(0, dtype=object)}
    sizes = np.frombuffer(rec["sizes"], dtype="i8")  # n > 0 records: n sizes
    w = np.frombuffer(rec["words"], dtype="<i8")
    at = np.zeros(n, "i8")
    np.cumsum(sizes[:-1], out=at[1:])
    ncomp = w[at + 2]
    nstripes = np.maximum(w[at + 3], 0)
    has = ncomp > 0
    comps = at + rec_words  # word offset of the first component
    ssize = np.where(has, w[np.where(has, comps + si, 0)], 0)
    scount = np.where(has, w[np.where(has, comps + sc, 0)], 0)
    # each component's OST ids follow the previous one's: together, the first sum(counts) ids
    total = np.zeros(n, "i8")
    for c in range(int(ncomp.max())):
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
        "file_id": w[at].view("u8").copy(), "rank": w[at + 1].copy(),
        "stripe_size": np.asarray(ssize, dtype="i8"), "stripe_count": np.asarray(scount, dtype="i8"),
        "osts": np.asarray(osts, dtype=object),
    }


def _column(values, dtype: str) -> np.ndarray:
    """A per-record column (an ``array.array`` from the decoder) as a NumPy array of its own."""
    return np.frombuffer(values, dtype=dtype).copy() if len(values) else np.zeros(0, dtype)


def _dxt_arrays(rec: dict[str, Any]) -> dict[str, Any]:
    # one block: a row per segment (offset, length, start bits, end bits), the records' segments one after the
    # other, each record's [writes..., reads...]; ``dxt_columns`` gives its columns as views.  Per-segment file,
    # rank and direction are left to the consumer (``repeat_range``): they would triple what crosses to the parent
    w, r = _column(rec["rec_writes"], "i8"), _column(rec["rec_reads"], "i8")
    segments = np.frombuffer(rec["segments"], dtype="<i8").reshape(-1, 4)
    if len(segments) != int(w.sum() + r.sum()):
        raise ValueError(f"{len(segments)} segments where the records count {int(w.sum() + r.sum())}")
    return {
        "rec_file_id": _column(rec["rec_file_id"], "u8"), "rec_rank": _column(rec["rec_rank"], "i8"),
        "rec_host": np.asarray(rec["rec_host"], dtype=object), "rec_writes": w, "rec_reads": r,
        "segments": segments,
    }


def _heatmap_arrays(rec: dict[str, Any]) -> dict[str, Any]:
    return {
        "rec_file_id": _column(rec["rec_file_id"], "u8"), "rec_rank": _column(rec["rec_rank"], "i8"),
        "bin_width_s": _column(rec["bin_width_s"], "f8"), "nbins": _column(rec["nbins"], "i8"),
        "write_bins": np.frombuffer(rec["write_bins"], dtype="<i8"), "read_bins": np.frombuffer(rec["read_bins"], dtype="<i8"),
    }


_ARRAYS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "fixed": _fixed_arrays, "lustre": _lustre_arrays, "dxt": _dxt_arrays, "heatmap": _heatmap_arrays}


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
