"""Draw the tables `analyze` computes (matplotlib, Agg backend, PNG files)."""

from __future__ import annotations

from pathlib import Path


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_scaling(scal, *, axis: str, mode: str, out: Path) -> Path:
    """Time vs axis with 95 % bands and the ideal line, one line per group; efficiency below."""
    plt = _plt()
    fig, (ax_t, ax_e) = plt.subplots(2, 1, figsize=(6, 6), sharex=True)
    others = [c for c in scal.columns if c != axis and not c.startswith(("time_s", "throughput_MBps", "bytes"))
              and c not in ("speedup", "efficiency", "ideal_time_s")]
    groups = scal.groupby(others, dropna=False) if others else [((), scal)]
    for key, g in groups:
        g = g.sort_values(axis)
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{k}={v}" for k, v in zip(others, key)) or "all"
        x = g[axis].to_numpy(dtype=float)
        line, = ax_t.plot(x, g["time_s_mean"], marker="o", label=label)
        lo, hi = g["time_s_lo"].to_numpy(dtype=float), g["time_s_hi"].to_numpy(dtype=float)
        ax_t.fill_between(x, lo, hi, alpha=0.2, color=line.get_color())
        ax_t.plot(x, g["ideal_time_s"], ls="--", color=line.get_color(), alpha=0.5)
        ax_e.plot(x, g["efficiency"], marker="o", color=line.get_color())
    ax_t.set_ylabel("time (s), mean ± 95 % CI")
    ax_t.set_title(f"{mode} scaling (dashed: ideal)")
    ax_t.legend(fontsize=7)
    ax_e.axhline(1.0, color="grey", lw=0.8)
    ax_e.set_ylabel("parallel efficiency")
    ax_e.set_xlabel(axis)
    ax_e.set_xticks(sorted(scal[axis].unique()))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_compare(summary, *, by: str, group: str | None, out: Path, title: str | None = None) -> Path:
    """Bars of mean time (log scale, 95 % CI error bars) per `group` (e.g. pattern), one bar per `by`
    value (e.g. format or label) — Zarr vs NetCDF4 for the read workload.  Without a `group` column (a
    conversion sweep has no read pattern) there is one group of bars."""
    import numpy as np

    plt = _plt()
    if group is None or group not in summary.columns:
        summary = summary.assign(_all="all runs")
        group = "_all"
    groups = list(dict.fromkeys(summary[group]))
    kinds = list(dict.fromkeys(summary[by]))
    width = 0.8 / max(len(kinds), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(groups)), 4))
    for i, k in enumerate(kinds):
        sub = summary[summary[by] == k].set_index(group).reindex(groups)
        y = sub["time_s_mean"].to_numpy(dtype=float)
        err = np.nan_to_num(sub["time_s_ci95"].to_numpy(dtype=float))
        label = str(k).rsplit("/", 1)[-1] if "/" in str(k) else str(k)  # paths: their last part
        ax.bar(np.arange(len(groups)) + i * width, y, width, yerr=err, label=label, capsize=2)
    ax.set_xticks(np.arange(len(groups)) + width * (len(kinds) - 1) / 2)
    ax.set_xticklabels(groups, rotation=20, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("time (s), mean ± 95 % CI")
    ax.set_xlabel("" if group == "_all" else group)
    ax.set_title(title or f"mean time by {by}" + ("" if group == "_all" else f" per {group}"))
    ax.legend(fontsize=7, title=by)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
