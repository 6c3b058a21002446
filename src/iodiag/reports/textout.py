"""Styled, wrapped lines and simple tables for a terminal, as text (no rich: the report's start-up).

The terminal report is a few dozen lines: words wrapped to the width with a hanging indent, a few styles (bold,
dim, colours), two tables.  rich does that too but costs ~20 ms of imports, as much as diagnosing a large log.
``Lines`` does only that; it prints nothing and returns the text.  Whatever the text holds (file names come
from logs), control characters are shown as "?", so a name cannot move the cursor or recolour the terminal; a
line never holds a newline (code of several lines is given line by line, see ``advice.change_lines``), and
``clean_code`` is the form for pages that show code whole (newlines and tabs kept).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterable, Sequence, Union

from ..units import BINARY_UNITS, DECIMAL_UNITS

# SGR codes of the styles the reports use ("bold red" = bold + red)
_SGR = {"bold": "1", "dim": "2", "italic": "3", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}

Segment = Union[str, "tuple[str, str | None]"]


def clean(text: str) -> str:
    """``text`` with every control character (C0, DEL, C1, line separators) replaced by "?"."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else "?" for c in text)


def cell_len(text: str) -> int:
    """Terminal cells ``text`` takes: wide (East Asian) characters two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else (2 if unicodedata.east_asian_width(c) in "WF" else 1) for c in text)


def _sgr(style: str | None) -> str:
    if not style:
        return ""
    codes = [_SGR[w] for w in style.split() if w in _SGR]
    return f"\x1b[{';'.join(codes)}m" if codes else ""


def clean_code(text: str) -> str:
    """Code to show as written: newlines and tabs kept, every other control character replaced by "?"."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\n\t" else "?" for c in text)


def _words(segments: Iterable[Segment], default: str | None, merge: bool = True) -> list[tuple[str, str | None]]:
    """(piece, style) with every piece either all spaces or without any; ``merge``: a unit joins its number."""
    out: list[tuple[str, str | None]] = []
    for seg in segments:
        text, style = (seg, default) if isinstance(seg, str) else (seg[0], seg[1] or default)
        for piece in _PIECES.findall(clean(text)):
            # a unit stays with its number ("12.15 s", "1.0 MiB"): no line starts with a bare unit
            if (merge and _UNIT.match(piece) and len(out) > 1 and out[-1][0] == " " and out[-2][0][-1:].isdigit()
                    and out[-2][1] == style):
                out[-2:] = [(out[-2][0] + " " + piece, style)]
            else:
                out.append((piece, style))
    return out


_PIECES = re.compile(r" +|[^ ]+")
# the units units.py writes after a number and a space (and "%", once written "12 %")
_UNIT = re.compile(r"(%|s|ms|h|" + "|".join(dict.fromkeys(BINARY_UNITS + DECIMAL_UNITS)) + r")[),;:.]*$")


class Lines:
    """Lines of text for a terminal ``width`` cells wide, with ANSI styles when ``color``."""

    def __init__(self, *, width: int, color: bool) -> None:
        self.width = max(int(width), 20)
        self.color = color
        self._out: list[str] = []

    def text(self) -> str:
        return "".join(line + "\n" for line in self._out)

    def blank(self) -> None:
        self._out.append("")

    def line(self, *segments: Segment, style: str | None = None, hang: int | None = None, wrap: bool = True) -> None:
        """Print the segments (a string, or (string, style)) as one line, wrapped at spaces to the width; the
        continuation lines start ``hang`` cells in (default: under the first line's text).  A word longer than a
        line is cut.  ``wrap=False`` leaves a long line whole (a command to paste; the terminal folds it)."""
        words = _words(segments, style, merge=wrap)
        if not wrap:
            self._out.append(self._styled(words))
            return
        if hang is None:
            lead = words[0][0] if words and words[0][0].startswith(" ") else ""
            hang = len(lead)
        hang = min(hang, self.width // 2)
        cur: list[tuple[str, str | None]] = []
        col, pending, first = 0, None, True
        for piece, st in words:
            if piece.startswith(" "):
                if not cur and first:
                    cur.append((piece, st))  # the first line's own indent
                    col += len(piece)
                else:  # spaces between words: kept unless the line breaks there
                    pending = (pending[0] + piece, pending[1]) if pending is not None else (piece, st)
                continue
            w = cell_len(piece)
            gap = len(pending[0]) if pending is not None and cur else 0
            if col + gap + w > self.width and col > (0 if first else hang):
                self._out.append(self._styled(cur))
                cur, col, pending, first = [(" " * hang, None)], hang, None, False
                gap = 0
            if gap:
                cur.append(pending)
                col += gap
            pending = None
            while col + w > self.width and w > 1:  # a word longer than the line: cut it
                room = max(self.width - col, 1)
                head, piece = _cut(piece, room)
                cur.append((head, st))
                self._out.append(self._styled(cur))
                cur, col, first = [(" " * hang, None)], hang, False
                w = cell_len(piece)
            cur.append((piece, st))
            col += w
        self._out.append(self._styled(cur))

    def table(self, title: str | None, columns: Sequence[tuple], rows: Sequence[Sequence[str]]) -> None:
        """A table: ``columns`` are (header, "left" | "right") or (header, "left" | "right", Col(...)).  Without a
        ``Col``, the first column gives way when the table is wider than the line (its cells keep their ends:
        "…/dir/file").  With them, the table fits the line by ``fit_table``: cuttable columns shrink (paths cut
        in the middle), then the least important columns are left out.  ``title`` None: no title line."""
        rows = [[clean(str(c)) for c in r] for r in rows]
        heads = [clean(c[0]) for c in columns]
        justs = [c[1] for c in columns]
        if any(len(c) > 2 for c in columns):
            specs = [c[2] if len(c) > 2 else Col() for c in columns]
            keep, widths = fit_table(heads, rows, specs, self.width, sep=3, margin=2)
            rows = [[cut(r[i], widths[j], specs[i].cut) for j, i in enumerate(keep)] for r in rows]
            heads = [cut(heads[i], widths[j], "end") for j, i in enumerate(keep)]
            justs = [justs[i] for i in keep]
        else:
            widths = [max([cell_len(h)] + [cell_len(r[i]) for r in rows]) for i, h in enumerate(heads)]
            total = sum(widths) + 3 * (len(widths) - 1) + 2
            if total > self.width and len(widths) > 1:
                widths[0] = max(widths[0] - (total - self.width), min(widths[0], 8))
                rows = [[keep_end(r[0], widths[0])] + r[1:] for r in rows]
                heads[0] = keep_end(heads[0], widths[0])

        def fmt(cells: Sequence[str], sep: str, style: str | None = None) -> str:
            out = []
            for c, w, just in zip(cells, widths, justs):
                pad = " " * (w - cell_len(c))
                out.append(self._styled([(c, style)]) + pad if just == "left" else pad + self._styled([(c, style)]))
            return " " + f" {sep} ".join(out) + " "

        if title is not None:
            self.line((title, "italic"), hang=2)
        self._out.append(fmt(heads, "┃", "bold"))
        self._out.append("━" + "━╇━".join("━" * w for w in widths) + "━")
        self._out.extend(fmt(r, "│") for r in rows)

    def _styled(self, pieces: Sequence[tuple[str, str | None]]) -> str:
        if not self.color:
            return "".join(p for p, _ in pieces)
        runs: list[list] = []  # [text, style]: neighbouring pieces of one style in one escape sequence
        for p, st in pieces:
            if runs and runs[-1][1] == st:
                runs[-1][0] += p
            else:
                runs.append([p, st])
        out = []
        for p, st in runs:
            code = _sgr(st) if p.strip() else ""
            out.append(f"{code}{p}\x1b[0m" if code else p)
        return "".join(out)


def _cut(word: str, room: int) -> tuple[str, str]:
    """``word`` split after ``room`` cells."""
    if word.isascii():
        return word[:room], word[room:]
    used = 0
    for i, c in enumerate(word):
        used += cell_len(c)
        if used > room:
            return word[:max(i, 1)], word[max(i, 1):]
    return word, ""


def keep_end(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells from its end, marked with a leading "…" (a path keeps its file name and the
    folders nearest it: …/a/b/file)."""
    if cell_len(text) <= width:
        return text
    if text.isascii():
        return "…" + text[len(text) - (width - 1):] if width > 1 else "…"
    out = text
    while out and cell_len(out) > width - 1:
        out = out[1:]
    return "…" + out


class Col:
    """How a table column gives way on a narrow line: ``priority`` (columns are left out highest number first; 0
    is never left out), ``cut`` ("middle" for paths, "end" for text, None: never cut) and the ``min`` cells a
    cut column keeps."""

    __slots__ = ("priority", "cut", "min")

    def __init__(self, priority: int = 0, cut: str | None = None, min: int = 8) -> None:  # noqa: A002
        self.priority, self.cut, self.min = priority, cut, min


def fit_table(heads: Sequence[str], rows: Sequence[Sequence[str]], specs: Sequence[Col], width: int, *,
              sep: int = 2, margin: int = 0) -> tuple[list[int], list[int]]:
    """Which columns a table keeps on a line ``width`` cells wide, and their widths: (kept column indices, widths).

    Columns are as wide as their widest cell; when the table is wider than the line, the columns that may be cut
    shrink towards their minimum, widest first; when that is not enough, the column with the highest priority
    number is left out and the fitting starts again.  A table of only uncuttable, never-dropped columns stays
    too wide (the terminal folds it)."""
    natural = [max([cell_len(h) if specs[i].cut is None else min(cell_len(h), specs[i].min)]
                   + [cell_len(r[i]) for r in rows]) for i, h in enumerate(heads)]
    keep = list(range(len(heads)))
    while True:
        widths = [natural[i] for i in keep]
        over = sum(widths) + sep * (len(widths) - 1) + margin - width
        if over <= 0:
            return keep, widths
        cuttable = [j for j, i in enumerate(keep) if specs[i].cut]
        room = sum(max(widths[j] - min(specs[keep[j]].min, widths[j]), 0) for j in cuttable)
        if room >= over:
            while over > 0:  # take a cell at a time from the widest cuttable column
                j = max((j for j in cuttable if widths[j] > specs[keep[j]].min), key=lambda j: widths[j])
                widths[j] -= 1
                over -= 1
            return keep, widths
        droppable = [i for i in keep if specs[i].priority > 0]
        if not droppable:  # nothing left to leave out: the cuttable columns give way below their minimum, to 8
            for j in cuttable:
                widths[j] = min(specs[keep[j]].min, widths[j])
            over = sum(widths) + sep * (len(widths) - 1) + margin - width
            while over > 0:
                room = [j for j in cuttable if widths[j] > 8]
                if not room:
                    break
                j = max(room, key=lambda j: widths[j])
                widths[j] -= 1
                over -= 1
            return keep, widths
        keep.remove(max(droppable, key=lambda i: (specs[i].priority, i)))


def cut(text: str, width: int, how: str | None) -> str:
    """``text`` in ``width`` cells: "middle" keeps both ends ("/scratch/…/run-3/out.zarr"), "end" the start
    ("python conv…"), "start" the end ("…/dir/file"); None leaves it whole."""
    if how is None or cell_len(text) <= width:
        return text
    if how == "start":
        return keep_end(text, width)
    if how == "end":
        out = text
        while out and cell_len(out) > width - 1:
            out = out[:-1]
        return out + "…"
    return cut_middle(text, width)


def cut_middle(text: str, width: int) -> str:
    """``text`` cut in the middle to ``width`` cells, marked "…": the end (a path's file name and nearest folders,
    what tells similar paths apart) keeps two thirds of the room, the start the rest."""
    if cell_len(text) <= width:
        return text
    if width <= 2:
        return keep_end(text, width)
    tail_room = (2 * (width - 1)) // 3
    head_room = width - 1 - tail_room
    head, used = "", 0
    for c in text:
        if used + cell_len(c) > head_room:
            break
        head += c
        used += cell_len(c)
    tail, used = "", 0
    for c in reversed(text):
        if used + cell_len(c) > tail_room:
            break
        tail = c + tail
        used += cell_len(c)
    return head + "…" + tail


def plain_table(heads: Sequence[str], rows: Sequence[Sequence[str]], *, width: int, right: Sequence[bool] | None = None,
                specs: Sequence[Col] | None = None, indent: int = 0) -> list[str]:
    """A table without rules or styles (two spaces between columns, a line of dashes under the headers), fitted
    to ``width`` by ``fit_table`` when ``specs`` are given: the shape of the site and sweep tables."""
    rows = [[clean(str(c)) for c in r] for r in rows]
    heads = [clean(h) for h in heads]
    right = list(right) if right is not None else [i > 0 for i in range(len(heads))]
    specs = list(specs) if specs is not None else [Col() for _ in heads]
    keep, widths = fit_table(heads, rows, specs, width - indent, sep=2)

    def line(cells):
        out = []
        for (i, c), w in zip(cells, widths):
            c = cut(c, w, specs[i].cut)
            pad = " " * (w - cell_len(c))
            out.append(pad + c if right[i] else c + pad)
        return (" " * indent + "  ".join(out)).rstrip()

    shown_heads = [cut(heads[i], w, "end") for i, w in zip(keep, widths)]
    return ([line(list(zip(keep, shown_heads))), " " * indent + "  ".join("-" * w for w in widths)]
            + [line([(i, r[i]) for i in keep]) for r in rows])


def wrap_plain(text: str, width: int, *, indent: int = 0, hang: int | None = None) -> list[str]:
    """``text`` wrapped at spaces to ``width`` (no styles): the first line ``indent`` cells in, the others
    ``hang`` (default: ``indent``); units stay with their numbers, as in ``Lines.line``."""
    out = Lines(width=width, color=False)
    out.line(" " * indent + text, hang=indent if hang is None else hang)
    return out.text().rstrip("\n").split("\n")


def markdown_text(md: str, *, width: int, color: bool = False, keep: Sequence[str] = ()) -> str:
    """Markdown as ``Lines`` lay it out for a terminal: headings in bold, paragraphs wrapped, pipe tables as
    tables fitted to the width (the first column cut at its end down to half the line, the columns whose header
    is not in ``keep`` left out from the last), inline marks (backticks, **bold**) and HTML comments dropped.
    Enough for the Markdown iodiag itself writes."""
    out = Lines(width=width, color=color)
    lines = md.splitlines()
    i = 0

    def inline(s: str) -> str:
        return re.sub(r"\*\*(.+?)\*\*|`([^`]*)`|\*([^*]+)\*", lambda m: m.group(1) or m.group(2) or m.group(3) or "", s)

    while i < len(lines):
        ln = lines[i].rstrip()
        if ln.startswith("<!--"):
            while i < len(lines) and "-->" not in lines[i]:
                i += 1
            i += 1
            continue
        if ln.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            heads, rule, rows = block[0], block[1] if len(block) > 1 else [], block[2:]
            just = ["right" if c.endswith(":") and not c.startswith(":") else "left" for c in rule] or ["left"] * len(heads)
            n = len(heads)
            cols = [(inline(h), just[k] if k < len(just) else "left",
                     Col(cut="end", min=max(width // 2, 16)) if k == 0 else Col(0 if inline(h) in keep else k))
                    for k, h in enumerate(heads)]
            out.table(None, cols, [[inline(c) for c in (r + [""] * n)[:n]] for r in rows])
            continue
        if ln.startswith("#"):
            out.line((inline(ln.lstrip("#").strip()), "bold"))
        elif not ln:
            out.blank()
        else:
            out.line(inline(ln))
        i += 1
    return out.text()
