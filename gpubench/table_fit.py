"""A table for people that fits the terminal's width without cutting a number.

Every column is at least as wide as its widest number (a number never folds and
never ends in an ellipsis) and its heading's longest word; other text folds at
spaces. When even those widths do not fit, the columns of lowest priority go
first: those the table does not name as key columns, from the right, then the
key columns from the end of their list. A line under the table names what was
left out and how to get it back. What is left over is shared out so that as
many columns as possible show unfolded. A column of long text (an error) may
show under each row instead, wrapped at the whole width by `fill`, which never
breaks a line inside a snippet of code.
"""

from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass
from typing import Sequence

from gpubench.errors import UsageError

GAP = 2  # spaces between two columns; no frame at the edges, a rule under the headings
FOLDABLE_WORD = 12  # a word without digits longer than this may fold in a narrow column
TEXT_WIDTH = 12  # text wraps no narrower than this (a column of short words: theirs)


@dataclass(frozen=True)
class TableFit:
    """How a table for people meets the terminal: `width` columns (None: the
    terminal's), every column at its full width however wide (`wide`), or only the
    `columns` named (keys or headings, in that order). `hint` ends the line that
    names the columns left out: how to get them back."""

    width: int | None = None
    wide: bool = False
    columns: tuple[str, ...] = ()
    hint: str = "--format csv or json has every column"


def terminal_width() -> int:
    """COLUMNS, else the terminal's, else 140 (output to a file or a pipe)."""
    import shutil

    return shutil.get_terminal_size((140, 24)).columns


@dataclass
class FitColumn:
    key: str
    heading: str
    width: int  # of its text, without the frame
    numeric: bool


@dataclass
class TableLayout:
    columns: list[FitColumn]
    cells: list[list[str]]  # the rows' texts, the shown columns only
    width: int  # the console's: the table is at most this wide
    left_out: list[str]  # headings of the columns that did not fit
    hint: str  # how to get them back


def frame_width(widths: Sequence[int]) -> int:
    return sum(widths) + GAP * max(len(widths) - 1, 0)


def fit_table(columns: Sequence[tuple[str, str]], cells: Sequence[Sequence[str]],
              numeric: Sequence[bool], keep: Sequence[str], fit: TableFit) -> TableLayout:
    """Which columns show and how wide each is, for `fit`."""
    target = fit.width or terminal_width()
    natural = [max([_cell_len(h) for h in _lines(heading)]
                   + [_cell_len(line) for row in cells for line in _lines(row[i])])
               for i, (_, heading) in enumerate(columns)]
    minimum = [_least(heading, [row[i] for row in cells], numeric[i], natural[i])
               for i, (_, heading) in enumerate(columns)]
    left_out: list[int] = []
    if fit.columns:
        shown = named_columns(columns, fit.columns)
    else:
        shown = list(range(len(columns)))
    if fit.wide:
        widths = {i: natural[i] for i in shown}
        target = max(target, frame_width(list(widths.values())))
    else:
        if not fit.columns:  # the user's own choice of columns is never cut down
            for i in reversed(_priority(columns, keep)):
                if frame_width([minimum[j] for j in shown]) <= target or len(shown) == 1:
                    break
                shown.remove(i)
                left_out.append(i)
        widths = _share(shown, natural, minimum, target - frame_width([0] * len(shown)))
        target = max(target, frame_width(list(widths.values())))
    fitted = [FitColumn(columns[i][0], columns[i][1], widths[i], numeric[i]) for i in shown]
    return TableLayout(fitted, [[row[i] for i in shown] for row in cells], target,
                       [columns[i][1] for i in sorted(left_out)], fit.hint)


def named_columns(columns: Sequence[tuple[str, str]], names: Sequence[str]) -> list[int]:
    """The indices of the columns `names` gives (keys or headings, any case), in
    its order; names this table does not have are passed over."""
    found = []
    for name in names:
        low = name.strip().lower()
        for i, (key, heading) in enumerate(columns):
            if low in (key.lower(), heading.lower()) and i not in found:
                found.append(i)
                break
    return found


def check_column_names(names: Sequence[str], known: Sequence[tuple[str, str]]) -> None:
    """A usage error for a --columns name that no table has, with the names it could be."""
    unknown = [n for n in names if not named_columns(known, [n])]
    if unknown:
        offered = sorted({key for key, _ in known})
        raise UsageError(f"--columns: no column '{unknown[0]}' (columns: {', '.join(offered)})")


def picked_columns(columns: Sequence[tuple[str, str]], fit: TableFit) -> list[tuple[str, str]]:
    """The columns `fit` names (--columns), in its order, for any format; all of them
    when it names none. A name none of `columns` has is a usage error."""
    if not fit.columns:
        return list(columns)
    check_column_names(fit.columns, columns)
    return [columns[i] for i in named_columns(columns, fit.columns)]


BELOW_INDENT = "  "  # a row's text shown under it (render_rows' `below`)


def rich_table(layout: TableLayout, title: str | None = None,
               below: Sequence[str] | None = None) -> str:
    """The table as text; `below`, one text per row (or None), each shown under its
    row, indented, wrapped at the layout's whole width and never inside a snippet of
    code (fill)."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=layout.width, force_terminal=False, color_system=None)
    if below is None:
        console.print(_rich(layout, layout.cells, title))
    else:  # each row a table of its own, of the same widths, so that its text can follow it
        console.print(_rich(layout, [], title))
        for line, text in zip(layout.cells, below):
            console.print(_rich(layout, [line], None, header=False))
            if text:
                buf.write(fill(text, layout.width, BELOW_INDENT, BELOW_INDENT) + "\n")
    text = "\n".join(line.rstrip() if below is not None else line
                     for line in buf.getvalue().rstrip("\n").split("\n"))
    if layout.left_out:
        said = (f"left out to fit {layout.width} columns: {', '.join(layout.left_out)} "
                f"({layout.hint})")
        text += "\n" + textwrap.fill(said, width=max(layout.width, 40))
    return text


def _rich(layout: TableLayout, cells: Sequence[Sequence[str]], title: str | None,
          header: bool = True):
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    # padding 1 either side, collapsed: GAP spaces between columns, none at the edges
    table = Table(title=escape(title) if title else None, header_style="bold", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=True,
                  show_header=header)
    # Cell text is shown as it is, never read as rich markup ('[lambda]' stays).
    for column in layout.columns:
        table.add_column(escape(column.heading), justify="right" if column.numeric else "left",
                         width=column.width, overflow="fold")
    for line in cells:
        table.add_row(*(escape(cell) for cell in line))
    return table


def _priority(columns: Sequence[tuple[str, str]], keep: Sequence[str]) -> list[int]:
    """Column indices, most wanted first: `keep`'s in its order, then the others
    left to right."""
    keys = [k for k, _ in columns]
    first = [keys.index(k) for k in dict.fromkeys(keep) if k in keys]
    return first + [i for i in range(len(columns)) if i not in first]


def _share(shown: list[int], natural: list[int], minimum: list[int], room: int) -> dict[int, int]:
    """Widths from each column's least, the room left given first to the columns
    that need least more to show unfolded."""
    widths = {i: minimum[i] for i in shown}
    spare = room - sum(widths.values())
    for i in sorted(shown, key=lambda j: (natural[j] - minimum[j], j)):
        if spare <= 0:
            break
        more = min(natural[i] - widths[i], spare)
        widths[i] += more
        spare -= more
    return widths


def _least(heading: str, texts: Sequence[str], numeric: bool, natural: int) -> int:
    """The narrowest a column may be: its widest number whole (in a column of
    numbers, every cell), its heading's longest word, no word of text folded that
    holds a digit or is short, and text no narrower than TEXT_WIDTH."""
    words = [w for line in _lines(heading) for w in line.split()] or [""]
    least = max(_cell_len(w) for w in words)
    if not numeric:
        least = max(least, min(natural, TEXT_WIDTH))
    for text in texts:
        for line in _lines(text):
            if numeric:
                least = max(least, _cell_len(line))
                continue
            for word in line.split():
                keep_whole = any(c.isdigit() for c in word) or _cell_len(word) <= FOLDABLE_WORD
                least = max(least, _cell_len(word) if keep_whole else FOLDABLE_WORD)
    return max(least, 1)


def _lines(text: str) -> list[str]:
    return str(text).splitlines() or [""]


def _cell_len(text: str) -> int:
    from rich.cells import cell_len

    return cell_len(text)


def fill(text: str, width: int, indent: str = "", first: str = "") -> str:
    """`text` wrapped at `width` columns, its first line indented by `first` and
    the others by `indent`, never inside a code snippet:
    a call and its arguments (`torch.device("cpu")`, `f(a, b)`), a quoted string
    within one, or text in backticks stays on one line, as does any word (a path, a
    URL) however long; a snippet or word wider than the line gets a line of its own.
    Each line of `text` starts a new line."""
    out: list[str] = []
    for paragraph in str(text).splitlines() or [""]:
        lead, line = first if not out else indent, ""
        for atom in unbreakable(paragraph):
            if line and len(lead) + len(line) + 1 + len(atom) > width:
                out.append(lead + line)
                lead, line = indent, atom
            else:
                line = f"{line} {atom}" if line else atom
        out.append(lead + line)
    return "\n".join(line.rstrip() for line in out)


_CODE_BEFORE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.)]")
_CLOSING = {"(": ")", "[": "]", "{": "}"}


def unbreakable(text: str) -> list[str]:
    """The pieces a line may break between: `text` split at its spaces, except the
    spaces inside a code snippet (fill). A bracket opens code when it follows a name
    (`f(`, `x[`, `a.b(`) or is inside code already; a prose parenthesis "(like this)"
    does not, though a call inside it does."""
    pieces, current = [], []
    stack: list[tuple[str, bool]] = []  # open brackets: (closing char, whether code)
    quote = None  # the quote char of a string inside code, or "`" for backticks
    for i, char in enumerate(text):
        in_code = quote is not None or any(code for _, code in stack)
        if quote is not None:
            if char == quote:
                quote = None
        elif char == "`":
            quote = "`"
        elif char in _CLOSING:
            code = in_code or (i > 0 and text[i - 1] in _CODE_BEFORE)
            stack.append((_CLOSING[char], code))
        elif stack and char == stack[-1][0]:
            stack.pop()
        elif char in "\"'" and in_code:
            quote = char
        if char.isspace() and not in_code:
            if current:
                pieces.append("".join(current))
            current = []
            continue
        current.append(char)
    if current:
        rest = "".join(current)
        # a bracket or quote that never closes is no snippet: its words break as prose
        pieces += rest.split() if quote is not None or any(code for _, code in stack) else [rest]
    return pieces
