"""Volumes and operation counts per module (POSIX, MPI-IO, STDIO, HDF5, PnetCDF, DAOS).

Numbers come from the Darshan counters (complete even when a DXT trace is
partial).  Layers are shown side by side, never summed: an MPI-IO write is
also counted by POSIX underneath it.
"""

from __future__ import annotations

import numpy as np

from ...profile import JobProfile, Table
from . import META, READ, WRITE, bytes_axis, count_axis, margins, new_figure

# module -> (prefix, read-op counters, write-op counters, metadata-op counters)
MODULE_SPEC: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "POSIX": ("POSIX", ("POSIX_READS",), ("POSIX_WRITES",),
              ("POSIX_OPENS", "POSIX_STATS", "POSIX_SEEKS", "POSIX_FSYNCS", "POSIX_FDSYNCS", "POSIX_RENAME_SOURCES", "POSIX_FILENOS", "POSIX_DUPS", "POSIX_MMAPS")),
    "MPI-IO": ("MPIIO", ("MPIIO_INDEP_READS", "MPIIO_COLL_READS", "MPIIO_SPLIT_READS", "MPIIO_NB_READS"),
               ("MPIIO_INDEP_WRITES", "MPIIO_COLL_WRITES", "MPIIO_SPLIT_WRITES", "MPIIO_NB_WRITES"),
               ("MPIIO_INDEP_OPENS", "MPIIO_COLL_OPENS", "MPIIO_SYNCS", "MPIIO_VIEWS", "MPIIO_HINTS")),
    "STDIO": ("STDIO", ("STDIO_READS",), ("STDIO_WRITES",), ("STDIO_OPENS", "STDIO_FDOPENS", "STDIO_SEEKS", "STDIO_FLUSHES")),
    "H5F": ("H5F", (), (), ("H5F_OPENS", "H5F_FLUSHES")),
    "H5D": ("H5D", ("H5D_READS",), ("H5D_WRITES",), ("H5D_OPENS", "H5D_FLUSHES")),
    "PNETCDF_FILE": ("PNETCDF_FILE", (), (), ("PNETCDF_FILE_CREATES", "PNETCDF_FILE_OPENS", "PNETCDF_FILE_REDEFS", "PNETCDF_FILE_SYNCS")),
    "PNETCDF_VAR": ("PNETCDF_VAR", ("PNETCDF_VAR_INDEP_READS", "PNETCDF_VAR_COLL_READS", "PNETCDF_VAR_NB_READS"),
                    ("PNETCDF_VAR_INDEP_WRITES", "PNETCDF_VAR_COLL_WRITES", "PNETCDF_VAR_NB_WRITES"), ("PNETCDF_VAR_OPENS",)),
    "DFS": ("DFS", ("DFS_READS", "DFS_READXS", "DFS_NB_READS"), ("DFS_WRITES", "DFS_WRITEXS", "DFS_NB_WRITES"),
            ("DFS_OPENS", "DFS_GLOBAL_OPENS", "DFS_LOOKUPS", "DFS_STATS", "DFS_GET_SIZES", "DFS_REMOVES", "DFS_PUNCHES")),
    "DAOS": ("DAOS", ("DAOS_OBJ_FETCHES", "DAOS_ARRAY_READS", "DAOS_KV_GETS"), ("DAOS_OBJ_UPDATES", "DAOS_ARRAY_WRITES", "DAOS_KV_PUTS"),
             ("DAOS_OBJ_OPENS", "DAOS_ARRAY_OPENS", "DAOS_KV_OPENS", "DAOS_ARRAY_STATS", "DAOS_ARRAY_GET_SIZES")),
}

SIZE_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")
SIZE_LABELS = ("0-100", "100-1K", "1K-10K", "10K-100K", "100K-1M", "1M-4M", "4M-10M", "10M-100M", "100M-1G", "1G+")
# upper bounds (inclusive) of the first nine bins, as darshan-runtime buckets sizes
SIZE_UPPER = np.array([100, 1024, 10 * 1024, 100 * 1024, 1024 ** 2, 4 * 1024 ** 2, 10 * 1024 ** 2, 100 * 1024 ** 2, 1024 ** 3], dtype=np.int64)


def size_bin(lengths: np.ndarray) -> np.ndarray:
    """Darshan's size-histogram bin of each access length (0..9)."""
    return np.searchsorted(SIZE_UPPER, lengths, side="left")


def _sum(t: Table, names) -> int:
    total = 0
    for n in names:
        if n in t:
            total += int(np.maximum(t[n], 0).sum())
    return total


def _fsum(t: Table, name: str) -> float:
    return float(np.maximum(t[name], 0).sum()) if name in t else 0.0


def module_volumes(profile: JobProfile) -> Table:
    """One row per module that has records: bytes, op counts and summed op times."""
    cols: dict[str, list] = {k: [] for k in (
        "module", "records", "bytes_read", "bytes_written", "reads", "writes", "meta_ops",
        "read_time_s", "write_time_s", "meta_time_s")}
    for mod, (pre, rd, wr, meta) in MODULE_SPEC.items():
        t = profile.module(mod)
        if t is None:
            continue
        cols["module"].append(mod)
        cols["records"].append(len(t))
        cols["bytes_read"].append(_sum(t, (f"{pre}_BYTES_READ",)))
        cols["bytes_written"].append(_sum(t, (f"{pre}_BYTES_WRITTEN",)))
        cols["reads"].append(_sum(t, rd))
        cols["writes"].append(_sum(t, wr))
        cols["meta_ops"].append(_sum(t, meta))
        cols["read_time_s"].append(_fsum(t, f"{pre}_F_READ_TIME"))
        cols["write_time_s"].append(_fsum(t, f"{pre}_F_WRITE_TIME"))
        cols["meta_time_s"].append(_fsum(t, f"{pre}_F_META_TIME"))
    return Table({
        k: np.asarray(v, dtype=object if k == "module" else ("f8" if k.endswith("_s") else "i8"))
        for k, v in cols.items()
    })


def draw_module_volumes(table: Table):
    """Bytes (left) and operation counts (right) per module, reads/writes/metadata."""
    n = max(len(table), 1)
    fig = new_figure(9.0, 0.5 + 0.45 * n + 0.95)
    margins(fig, left_in=1.35, bottom_in=0.8, wspace=0.05)
    ax_b, ax_o = fig.subplots(1, 2)
    mods = list(table["module"]) if len(table) else []
    y = np.arange(len(mods))
    h = 0.38
    if len(mods):
        ax_b.barh(y - h / 2, table["bytes_read"], h, color=READ, label="read")
        ax_b.barh(y + h / 2, table["bytes_written"], h, color=WRITE, label="written")
        h3 = 0.27
        ax_o.barh(y - h3, table["reads"], h3, color=READ, label="reads")
        ax_o.barh(y, table["writes"], h3, color=WRITE, label="writes")
        ax_o.barh(y + h3, table["meta_ops"], h3, color=META, label="metadata ops")
    for ax in (ax_b, ax_o):
        ax.set_yticks(y, mods, fontsize=8)
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
        if len(mods):
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, fontsize=8, frameon=False)
    ax_o.set_yticklabels([])
    bytes_axis(ax_b)
    ax_b.set_title("Bytes per module", fontsize=10)
    ax_o.set_title("Operations per module", fontsize=10)
    if any(v > 0 for v in (table["reads"].tolist() + table["writes"].tolist() + table["meta_ops"].tolist()) if len(table)):
        count_axis(ax_o, "x")
    return fig


def access_sizes(profile: JobProfile) -> Table:
    """Access-size histogram: one row per (module, direction, size bin) with an op count.

    From the counters' SIZE_* histograms (POSIX, DFS, DAOS: per call; MPI-IO,
    HDF5, PnetCDF: per aggregate request).  A profile without counters but with
    an ops table (an embedded trace) is binned from the ops on the same edges.
    """
    mods, dirs, bins, counts, source = [], [], [], [], []
    for mod, (pre, *_rest) in MODULE_SPEC.items():
        t = profile.module(mod)
        if t is None:
            continue
        for direction, word in (("read", "READ"), ("write", "WRITE")):
            names = [f"{pre}_SIZE_{word}_{b}" for b in SIZE_BINS]
            if names[0] not in t:
                names = [f"{pre}_SIZE_{word}_AGG_{b}" for b in SIZE_BINS]
            if names[0] not in t:
                continue
            for label, name in zip(SIZE_LABELS, names):
                mods.append(mod)
                dirs.append(direction)
                bins.append(label)
                counts.append(int(np.maximum(t[name], 0).sum()))
                source.append("counters")
    if not mods and len(profile.ops):
        from ...profile import OP, OPS_MODULES

        ops = profile.ops
        for code in np.unique(ops["module"]).tolist():
            for direction in ("read", "write"):
                sel = (ops["module"] == code) & (ops["op"] == OP[direction])
                hist = np.bincount(size_bin(ops["length"][sel]), minlength=len(SIZE_LABELS))
                for label, c in zip(SIZE_LABELS, hist.tolist()):
                    mods.append(OPS_MODULES[code])
                    dirs.append(direction)
                    bins.append(label)
                    counts.append(int(c))
                    source.append("ops")
    return Table({
        "module": np.asarray(mods, dtype=object), "direction": np.asarray(dirs, dtype=object),
        "size_bin": np.asarray(bins, dtype=object), "count": np.asarray(counts, dtype="i8"),
        "source": np.asarray(source, dtype=object),
    })


def draw_access_sizes(table: Table):
    """Two panels (reads, writes); one bar group per size bin, one bar per module."""
    fig = new_figure(9.0, 3.2)
    margins(fig, left_in=0.8, bottom_in=0.9, wspace=0.25)
    axes = fig.subplots(1, 2, sharey=False)
    mods = list(dict.fromkeys(table["module"].tolist()))
    palette = ["#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#d53f8c", "#319795", "#b7791f", "#4a5568", "#e53e3e"]
    x = np.arange(len(SIZE_LABELS))
    width = 0.8 / max(len(mods), 1)
    for ax, direction in zip(axes, ("read", "write")):
        for i, mod in enumerate(mods):
            sel = (table["module"] == mod) & (table["direction"] == direction)
            if not sel.any():
                continue
            counts = dict(zip(table["size_bin"][sel].tolist(), table["count"][sel].tolist()))
            ax.bar(x - 0.4 + width * (i + 0.5), [counts.get(lb, 0) for lb in SIZE_LABELS], width,
                   color=palette[i % len(palette)], label=mod)
        ax.set_xticks(x, SIZE_LABELS, rotation=45, ha="right", fontsize=8)
        ax.set_title(f"{direction.capitalize()} sizes (bytes per call)", fontsize=10)
        ax.set_ylabel("operations")
        ax.grid(axis="y", alpha=0.3)
        count_axis(ax, "y")
        if mods:
            ax.legend(fontsize=8, frameon=False)
    return fig
