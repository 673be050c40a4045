"""Tables that pick their columns by the width they are printed at (a terminal, 80 columns when piped).

Each column has a priority: 0 is always shown; when the columns do not fit at a readable width, the one with the
highest priority number goes first — below each row as `header: value` (stacked) or, for a column marked
`stack=False`, out of the table with a note saying so (`--json` has everything). A wrapping column never gets
narrower than its `min_width` (no 4-character evidence column, no 40-line rows); an id column (`no_wrap`) keeps its
whole width. The first column always stays. Every table of the CLI is built with this, nothing table-specific here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

Cell = RenderableType
LONG_WORD = 24
"""a word longer than this is folded rather than widening its column"""


@dataclass(frozen=True)
class Column:
    header: str
    priority: int = 0
    """0: always shown; higher: leaves the table first when space is short"""
    justify: Literal["left", "right", "center"] = "left"
    no_wrap: bool = False
    """ids and short values: kept whole (or moved below the row), never wrapped"""
    min_width: int = 0
    """the narrowest a wrapping column may get (its longest word up to 24, at least)"""
    stack: bool = True
    """when it does not fit: below the row as `header: value`; False: dropped (noted under the table)"""
    style: str | None = None
    quiet: tuple[str, ...] = ()
    """values not worth a line of their own below a row (e.g. "ok"): shown in the table, skipped when stacked"""


def _text(cell: Cell) -> Cell:
    return Text(cell) if isinstance(cell, str) else cell


def _plain(cell: Cell) -> str | None:
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        return cell
    return None


def _filled(cell: Cell) -> bool:
    plain = _plain(cell)
    return plain is None or bool(plain.strip())


class FitTable:
    """A Rich renderable: `console.print(FitTable(...))` lays it out for `console.width`."""

    def __init__(self, *columns: Column, title: str | None = None, caption: str | None = None,
                 show_header: bool = True, show_lines: bool = False) -> None:
        if not columns:
            raise ValueError("a table needs columns")
        self.columns = columns
        self.title = title
        self.caption = caption
        self.show_header = show_header
        self.show_lines = show_lines
        self.rows: list[tuple[Cell, ...]] = []

    def add_row(self, *cells: Cell) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(tuple(_text(c) for c in cells))

    # ---- measuring ------------------------------------------------------------------------------------------
    def _widths(self, console: Console, options: ConsoleOptions, i: int) -> tuple[int, int]:
        """(natural, needed) width of column i: natural = its widest line; needed = the least it may get."""
        col = self.columns[i]
        cells: list[Cell] = [Text(col.header)] if self.show_header else []
        cells += [r[i] for r in self.rows]
        natural, word = 1, 1
        for c in cells:
            plain = _plain(c)
            if plain is None:
                m = Measurement.get(console, options, c)
                natural, word = max(natural, m.maximum), max(word, min(m.minimum, LONG_WORD))
                continue
            for line in plain.split("\n"):
                natural = max(natural, Text(line).cell_len)
                word = max(word, min(LONG_WORD, max((Text(w).cell_len for w in line.split()), default=0)))
        if col.no_wrap:
            return natural, natural
        return natural, min(natural, max(word, col.min_width))

    def plan(self, console: Console, options: ConsoleOptions, width: int) -> tuple[list[int], list[int], list[int]]:
        """Indices of the columns kept in the table, stacked below rows, and dropped, for this width."""
        need = [self._widths(console, options, i)[1] for i in range(len(self.columns))]
        # an optional column with nothing in it takes no room (and needs no note)
        kept = [i for i in range(len(self.columns)) if i == 0 or self.columns[i].priority == 0 or not self.rows
                or any(_filled(r[i]) for r in self.rows)]
        stacked: list[int] = []
        dropped: list[int] = []

        def fits() -> bool:
            return sum(need[i] for i in kept) + 3 * len(kept) + 1 <= width

        while not fits():
            movable = [i for i in kept[1:] if self.columns[i].priority > 0]
            if not movable:
                movable = kept[1:]  # even the essential columns do not fit: one record per row
                if not movable:
                    break
            worst = max(movable, key=lambda i: (self.columns[i].priority, i))
            kept.remove(worst)
            (stacked if self.columns[worst].stack else dropped).append(worst)
        # a column that left early may fit again beside the essential ones once a wider one has gone
        for i in sorted(stacked + dropped, key=lambda i: (self.columns[i].priority, i)):
            kept.append(i)
            if fits():
                (stacked if i in stacked else dropped).remove(i)
            else:
                kept.remove(i)
        return sorted(kept), sorted(stacked), sorted(dropped)

    # ---- rendering ------------------------------------------------------------------------------------------
    def _table(self, kept: list[int], console: Console, options: ConsoleOptions, width: int) -> Table:
        t = Table(title=self.title, title_justify="left", show_header=self.show_header, show_lines=self.show_lines,
                  box=box.HEAVY_HEAD)
        # widths decided here, not by Rich's collapse: it may give a column less than it needs, or crop the table
        widths = self._fixed_widths(kept, console, options, width - 3 * len(kept) - 1)
        for i, w in zip(kept, widths, strict=True):
            col = self.columns[i]
            t.add_column(col.header, justify=col.justify, no_wrap=col.no_wrap, width=w, style=col.style,
                         overflow="fold")
        for r in self.rows:
            t.add_row(*(r[i] for i in kept))
        return t

    def _stacked(self, kept: list[int], stacked: list[int], console: Console, options: ConsoleOptions,
                 width: int) -> list[RenderableType]:
        widths = self._fixed_widths(kept, console, options, width - 2 * (len(kept) - 1))
        out: list[RenderableType] = []
        if self.title:
            out.append(Text(self.title, style="italic"))

        def row_table(cells: Iterable[Cell], header: bool) -> Table:
            t = Table(box=None, show_header=header, show_edge=False, pad_edge=False, padding=(0, 1),
                      header_style="bold")
            for i, w in zip(kept, widths, strict=True):
                col = self.columns[i]
                t.add_column(col.header, justify=col.justify, no_wrap=col.no_wrap, width=w, style=col.style,
                             overflow="fold")
            if not header:
                t.add_row(*cells)
            return t

        if self.show_header:
            out.append(row_table((), header=True))
            out.append(Rule(style="dim", characters="─"))
        for r in self.rows:
            out.append(row_table((r[i] for i in kept), header=False))
            for i in stacked:
                plain = _plain(r[i])
                if plain is not None and plain.strip() in ("", "-", "–", *self.columns[i].quiet):
                    continue
                value = r[i]
                if isinstance(value, Text) and "\n" in value.plain:
                    value = Text("; ").join(value.split("\n"))
                label = Text(f"{self.columns[i].header}: ", style="dim")
                line = Text.assemble(label, value) if isinstance(value, Text) else Group(label, value)
                out.append(Padding(line, (0, 0, 0, 3), expand=False))
        return out

    def _fixed_widths(self, kept: list[int], console: Console, options: ConsoleOptions, room: int) -> list[int]:
        """Each kept column's content width, given `room` for the contents (borders and padding taken off): what it
        needs, then what is left shared out, one by one, to the columns below their natural width."""
        sizes = [self._widths(console, options, i) for i in kept]
        widths = [need for _, need in sizes]
        room -= sum(widths)
        while room > 0:
            grow = [k for k, (nat, _) in enumerate(sizes) if widths[k] < nat]
            if not grow:
                break
            for k in grow:
                if room <= 0:
                    break
                widths[k] += 1
                room -= 1
        return widths

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        kept, stacked, dropped = self.plan(console, options, width)
        if stacked:
            yield from self._stacked(kept, stacked, console, options, width)
        else:
            yield self._table(kept, console, options, width)
        notes = []
        if dropped:
            notes.append(f"not shown at {width} columns: {', '.join(self.columns[i].header for i in dropped)} "
                         "(a wider terminal or --json has them)")
        if self.caption:
            notes.append(self.caption)
        for n in notes:
            yield Text(n, style="dim")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(options.max_width, 20), options.max_width)


class FirstFit:
    """Several layouts of the same data, widest first: the first that fits whole at the width (no column stacked or
    dropped) is printed, else the last (e.g. a confusion matrix, and one row per class for a narrow terminal)."""

    def __init__(self, *tables: FitTable) -> None:
        if not tables:
            raise ValueError("FirstFit needs at least one table")
        self.tables = tables

    def choose(self, console: Console, options: ConsoleOptions, width: int) -> FitTable:
        for t in self.tables[:-1]:
            _, stacked, dropped = t.plan(console, options, width)
            if not stacked and not dropped:
                return t
        return self.tables[-1]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.choose(console, options, options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(options.max_width, 20), options.max_width)
