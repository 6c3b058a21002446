"""Build synthetic site archives (YYYY/M/D) from the shared corpus of real Darshan logs.

Used by tests/test_site_*.py and benchmarks/bench_site.py.  Readable logs are
hard links to corpus logs (copies when the corpus is on another file system)
renamed to ``<user>_<exe>_id<jobid>_<M>-<D>-<secs>-<hash>_1.darshan`` with a
fresh job id each, so every readable log is its own job.  Damaged logs are
real bytes too: empty files, the first 200 bytes of a corpus log (darshan-util
cannot open them) and random bytes.
"""

from __future__ import annotations

import csv
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "darshan-logs"
DAMAGE_KINDS = ("empty", "cut-200B", "garbage")


def corpus_logs(max_bytes: int | None = 600_000) -> list[Path]:
    """Readable corpus logs (from MANIFEST.tsv), without the damaged edge cases."""
    out = []
    with open(CORPUS / "MANIFEST.tsv", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            p = CORPUS / row["path"]
            if row["modules_present"].startswith("(unreadable") or "edge-cases" in row["path"]:
                continue
            if not p.is_file() or p.stat().st_size == 0:
                continue
            if max_bytes is not None and p.stat().st_size > max_bytes:
                continue
            out.append(p)
    return sorted(out)


def _place(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


@dataclass
class Archive:
    root: Path
    readable: list[Path] = field(default_factory=list)
    damaged: dict[Path, str] = field(default_factory=dict)  # path -> damage kind
    days: set[str] = field(default_factory=set)


def build_archive(root: Path, n_logs: int, *, damaged_every: int = 97, logs_per_day: int = 50,
                  start_year: int = 2024, seed: int = 7, max_bytes: int | None = 600_000) -> Archive:
    rng = random.Random(seed)
    sources = corpus_logs(max_bytes)
    arc = Archive(root=Path(root))
    for i in range(n_logs):
        day_index = i // logs_per_day
        year = start_year + day_index // 336
        month = 1 + (day_index // 28) % 12
        day = 1 + day_index % 28
        d = arc.root / str(year) / str(month) / str(day)
        d.mkdir(parents=True, exist_ok=True)
        arc.days.add(f"{year:04d}-{month:02d}-{day:02d}")
        src = sources[i % len(sources)]
        user = f"user{rng.randrange(40):02d}"
        exe = src.name.split("_")[1] if src.name.count("_") >= 3 and "_id" in src.name else src.stem.split(".")[0].replace("_", "-")
        exe = exe.replace("_", "-") or "app"
        name = f"{user}_{exe}_id{1_000_000 + i}_{month}-{day}-{rng.randrange(86400)}-{rng.getrandbits(60)}_1.darshan"
        dst = d / name
        if damaged_every and i % damaged_every == damaged_every - 1:
            kind = DAMAGE_KINDS[(i // damaged_every) % len(DAMAGE_KINDS)]
            if kind == "empty":
                dst.write_bytes(b"")
            elif kind == "cut-200B":
                dst.write_bytes(src.read_bytes()[:200])
            else:
                dst.write_bytes(rng.randbytes(4096))
            arc.damaged[dst] = kind
        else:
            _place(src, dst)
            arc.readable.append(dst)
    return arc
