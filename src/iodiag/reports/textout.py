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

    def table(self, title: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[str]]) -> None:
        """A table: ``columns`` are (header, "left" | "right"); the first column gives way when the table is wider
        than the line (its cells keep their ends: "…/dir/file")."""
        rows = [[clean(str(c)) for c in r] for r in rows]
        heads = [clean(h) for h, _ in columns]
        widths = [max([cell_len(h)] + [cell_len(r[i]) for r in rows]) for i, h in enumerate(heads)]
        total = sum(widths) + 3 * (len(widths) - 1) + 2
        if total > self.width and len(widths) > 1:
            widths[0] = max(widths[0] - (total - self.width), min(widths[0], 8))
            rows = [[keep_end(r[0], widths[0])] + r[1:] for r in rows]
            heads[0] = keep_end(heads[0], widths[0])

        def fmt(cells: Sequence[str], sep: str, style: str | None = None) -> str:
            out = []
            for (c, w), (_, just) in zip(zip(cells, widths), columns):
                pad = " " * (w - cell_len(c))
                out.append(self._styled([(c, style)]) + pad if just == "left" else pad + self._styled([(c, style)]))
            return " " + f" {sep} ".join(out) + " "

        self._out.append(self._styled([(title, "italic")]))
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
