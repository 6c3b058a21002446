#!/usr/bin/env python3
"""Regenerate the detectors table of docs/detectors.md from the finding specs (``SPECS`` of each module in
src/iodiag/analyzers/detectors/).

    python scripts/detector_docs.py [--check]

``--check`` writes nothing and exits 1 when the file is not current (tests/test_finding_specs.py checks the same).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from iodiag.analyzers.detectors import SPECS  # noqa: E402
from iodiag.analyzers.detectors._docs import with_table  # noqa: E402

DOC = REPO / "docs" / "detectors.md"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/detectors.md is not current")
    args = ap.parse_args()
    old = DOC.read_text()
    new = with_table(old, SPECS)
    if args.check:
        print("docs/detectors.md is current" if new == old else "docs/detectors.md is stale: run scripts/detector_docs.py")
        return 0 if new == old else 1
    DOC.write_text(new)
    print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
