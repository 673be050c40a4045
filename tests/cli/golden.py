"""Golden files for what people read in a terminal: rendered at a given width with Rich's recording console.

A missing golden file fails the test; write or refresh them deliberately with UPDATE_GOLDEN=1 and review the diff."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console, RenderableType

WIDTHS = (80, 160)


def render(renderable: RenderableType, width: int) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def check(path: Path, text: str) -> None:
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    if not path.exists():
        pytest.fail(f"golden file {path} is missing: write it with UPDATE_GOLDEN=1 and review it")
    assert text == path.read_text(encoding="utf-8"), f"{path.name} differs (UPDATE_GOLDEN=1 rewrites it)"
    assert_fits(text, int(path.stem.rsplit(".", 1)[-1]), path.name)


BOX_LEFT = "┏┃┡│└┌├╭╰"
BOX_RIGHT = "┓┃┩│┘┐┤╮╯"


def assert_fits(text: str, width: int, what: str = "") -> None:
    """No line wider than the terminal, and no table cropped: a line that opens a box closes it."""
    for n, line in enumerate(text.splitlines(), 1):
        assert len(line.rstrip()) <= width, f"{what}:{n} is wider than {width} columns"
        body = line.rstrip()
        if body[:1] in BOX_LEFT:
            assert body[-1:] in BOX_RIGHT, f"{what}:{n} is cut off at {width} columns: {body!r}"
