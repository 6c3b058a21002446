"""The detectors table of docs/detectors.md, generated from the finding specs (``SPECS``).

``scripts/detector_docs.py`` writes it between the two markers below; tests/test_finding_specs.py fails when the
file is not what the specs say.
"""

from __future__ import annotations

from typing import Sequence

from ...findings import FindingSpec

BEGIN = "<!-- detectors table: generated from the finding specs by scripts/detector_docs.py; do not edit -->"
END = "<!-- end of the generated detectors table -->"


def _config_cell(keys: Sequence[str]) -> str:
    """``[section] key key`` per section, in the order the keys are declared; "—" for none."""
    sections: dict[str, list[str]] = {}
    for k in keys:
        section, name = k.split(".", 1)
        sections.setdefault(section, []).append(name)
    return " ".join(f"`[{s}] {' '.join(names)}`" for s, names in sections.items()) or "—"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def detectors_table(specs: Sequence[FindingSpec]) -> str:
    """The markdown table (with its markers): a row per finding id, then a row per note of its spec."""
    rows = [BEGIN, "| id | fires when | cost | config |", "|---|---|---|---|"]
    for s in specs:
        fires = f"`{s.runs_over}` (not in `DETECTORS`): {s.fires}" if s.detect is None else s.fires
        rows.append(f"| `{s.id}` | {_cell(fires)} | {_cell(s.cost)} | {_config_cell(s.config_keys)} |")
        rows += [f"| | {_cell(n)} | | |" for n in s.notes]
    rows.append(END)
    return "\n".join(rows) + "\n"


def with_table(doc: str, specs: Sequence[FindingSpec]) -> str:
    """``doc`` (the text of docs/detectors.md) with the generated table in place of what stands between the markers."""
    head, sep, rest = doc.partition(BEGIN)
    if not sep or END not in rest:
        raise ValueError("docs/detectors.md has no generated-table markers")
    tail = rest.split(END, 1)[1]
    return head + detectors_table(specs) + "\n" + tail.lstrip("\n")
