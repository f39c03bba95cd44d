"""The user's own lines: which files are the project's, and the deepest line of the project
on a traceback or on the stack as it stands. What CUDA's emulation names where it cannot
follow a call, or where it assumed a shape: the script's own line (or its helper
module's), not torch's, an installed package's, or a top-level `trainer.train()`.

Standard library only (and torch's folder, to leave it out).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from dataclasses import dataclass

HERE = os.path.dirname(os.path.realpath(__file__))   # the calibration's own files


@dataclass(frozen=True)
class Line:
    """One line of the user's project, and the call it made (the frame below it)."""

    file: str          # as the user knows it: the script's name, or relative to its folder
    lineno: int
    code: str          # the line's text, stripped
    callee: str = ""   # "(in random.py, get_rng_state)": where the call went, where known

    def said(self) -> str:
        return f"{self.file} line {self.lineno}: `{self.code[:120]}`" + (f" {self.callee}" if self.callee else "")


class Project:
    """The user's files: the script, and those under its directory that are not an
    installed package (site-packages, dist-packages), the standard library, torch, or
    the calibration's own (this directory)."""

    def __init__(self, script: str) -> None:
        import torch

        self.script = os.path.realpath(script)
        self.home = os.path.dirname(self.script)
        self.outside = [os.path.realpath(p) for p in
                        {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
                        | {os.path.dirname(torch.__file__), HERE} if p]
        self._held: dict[str, bool] = {}

    def holds(self, filename: str) -> bool:
        if filename not in self._held:
            self._held[filename] = self._holds(filename)
        return self._held[filename]

    def _holds(self, filename: str) -> bool:
        if not filename or filename.startswith("<"):   # <frozen runpy>, <string>
            return False
        path = os.path.realpath(filename)
        if path == self.script:
            return True
        if not _under(path, self.home) or any(_under(path, out) for out in self.outside if out != self.home):
            return False
        parts = path.split(os.sep)
        return "site-packages" not in parts and "dist-packages" not in parts

    def name(self, filename: str) -> str:
        path = os.path.realpath(filename)
        return os.path.basename(path) if path == self.script else os.path.relpath(path, self.home)

    def in_traceback(self, error: BaseException) -> Line | None:
        """The deepest line of the project in the error's traceback, and what it called."""
        import traceback

        frames = traceback.extract_tb(error.__traceback__)
        found = None
        for i, frame in enumerate(frames):
            if self.holds(frame.filename):
                found = (frame, frames[i + 1] if i + 1 < len(frames) else None)
        if found is None:
            return None
        frame, callee = found
        inner = f"(in {os.path.basename(callee.filename)}, {callee.name})" if callee else ""
        return Line(self.name(frame.filename), frame.lineno, (frame.line or "").strip(), inner)

    def on_stack(self, skip: int = 1) -> Line | None:
        """The innermost line of the project on the stack as it stands (the call being made)."""
        import linecache

        frame = sys._getframe(skip)
        while frame is not None:
            filename = frame.f_code.co_filename
            if self.holds(filename):
                code = linecache.getline(filename, frame.f_lineno).strip()
                return Line(self.name(filename), frame.f_lineno, code)
            frame = frame.f_back
        return None


_script_project: dict[str, Project] = {}


def of_script(script: str | None = None) -> Project | None:
    """The project of `script` (the running script, sys.argv[0], where none is given), kept."""
    script = script or (sys.argv[0] if sys.argv and sys.argv[0] else None)
    if not script:
        return None
    if script not in _script_project:
        _script_project[script] = Project(script)
    return _script_project[script]


def _under(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:   # another drive
        return False
