"""A user's project's own files: its dependencies and its gpubench settings.

Dependencies are found where the user's own tools look, in the order `uv run`
honours them: the script's PEP 723 block, else a requirements.txt, else the
[project] table of pyproject.toml; the script's `# requires:` lines
go on top. Every line is checked here, before
anything is rented, so a typo costs a second and not a machine. torch and the
CUDA libraries beside it are HELD: the machine's image picked them and an
install never replaces them, so a requirement they cannot meet is said up front
(held_conflicts).

[tool.gpubench] in the project's pyproject.toml keeps the flags a project always
runs with (outputs, setup, install-project, max-steps)."""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from gpubench.errors import UsageError
from gpubench.onhost import python_env


class ProjectFileError(UsageError):
    """A project file gpubench cannot use as written; the message names the file (and line)."""


def is_held(name: str) -> bool:
    """Installed by the machine's image and never replaced (torch, its companions, the
    nvidia-* libraries: onhost.python_env, which reads them on the machine): a CUDA build of
    torch swapped for PyPI's default one would measure another stack, or none."""
    return python_env.is_held(canonicalize_name(name))


@dataclass(frozen=True)
class Requirements:
    """What a project asks to have installed, and where it said so."""

    source: str  # for the user: "requirements.txt", "the PEP 723 block of train.py", ...
    lines: tuple[str, ...]  # as pip and uv read them, options included, in order
    path_in_project: str | None = None  # the requirements file inside --workdir (POSIX, relative):
    #   installed with -r on the synced copy, so its relative -r/-c/paths resolve; None: write `text`
    install_project: bool = False  # `pip install .` of the project directory too
    added: tuple[str, ...] = ()  # the script's '# requires:' names among `lines`, beside the file's

    @property
    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)

    @property
    def written(self) -> str:
        """What the installer writes out itself: every line, or beside a requirements file
        that travels with the project (installed with -r on its copy) the added ones."""
        if self.path_in_project is None:
            return self.text
        return "".join(line + "\n" for line in self.added)

    def digest(self) -> str:
        """The same install, whatever it was read from, has the same digest."""
        content = json.dumps([list(self.lines), self.path_in_project, self.install_project,
                              list(self.added)])
        return hashlib.sha256(content.encode()).hexdigest()


# --- PEP 723 ---------------------------------------------------------------------------

# The specification's reference expression (packaging.python.org, inline script metadata).
_BLOCK = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")
_SCRIPT_OPENING = re.compile(r"(?m)^# /// script$")


def pep723_block(script: Path) -> dict | None:
    """The script's `# /// script` block parsed as TOML; None when it has none."""
    name = script.name
    text = _read(script, name)
    blocks = list(_BLOCK.finditer(text))
    scripts = [m for m in blocks if m.group("type") == "script"]
    if len(scripts) > 1:
        raise ProjectFileError(f"{name}: two '# /// script' blocks; PEP 723 allows one")
    # The spec ignores an unclosed block; here it would drop the dependencies without a word.
    for opening in _SCRIPT_OPENING.finditer(text):
        if not any(m.start() <= opening.start() < m.end() for m in blocks):
            raise ProjectFileError(f"{name} line {_line_of(text, opening.start())}: its '# /// script' "
                                   "block is not closed (end it with a line '# ///')")
    if not scripts:
        return None
    block = scripts[0]
    content = "".join(line[2:] if line.startswith("# ") else line[1:]
                      for line in block.group("content").splitlines(keepends=True))
    metadata = _toml(content, name, "its '# /// script' block is not TOML",
                     _line_of(text, block.start("content")))
    dependencies = metadata.get("dependencies", [])
    if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
        raise ProjectFileError(f"{name}: 'dependencies' in its '# /// script' block must be a list "
                               "of strings")
    return metadata


# --- finding the requirements ------------------------------------------------------------

def find_requirements(script: Path, workdir: Path | None,
                      install_project: bool = False) -> Requirements | None:
    """The one set the project declares (PEP 723 block, else requirements.txt at the workdir's
    root or beside the script, else pyproject.toml's [project.dependencies]), then the script's
    `# requires:` names not already in it. None when nothing is to be installed: nothing is
    declared, or a PEP 723 block declares no dependencies (it still wins, as under `uv run`).

    With `install_project`, the project of <workdir>/pyproject.toml is installed too, whichever
    set was found (the user asked for it by name)."""
    if install_project and workdir is None:
        raise UsageError("install-project needs --workdir: the project directory is what is installed")
    sources: list[str] = []
    lines: tuple[str, ...] = ()
    path_in_project = None
    metadata = pep723_block(script)
    found = _requirements_txt(script, workdir) if metadata is None else None
    pyproject = _pyproject(workdir) if (metadata is None and found is None) or install_project else None
    project = pyproject.get("project") if pyproject is not None else None
    if metadata is not None:
        sources.append(f"the PEP 723 block of {script.name}")
        lines = _checked(metadata.get("dependencies", []), f"{script.name} (its '# /// script' block)")
    elif found is not None:
        path, shown, path_in_project = found
        sources.append(shown)
        lines = _read_requirements_txt(path, shown)
    elif isinstance(project, dict):
        sources.append("pyproject.toml [project.dependencies]")
        dependencies = project.get("dependencies", [])
        if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
            raise ProjectFileError("pyproject.toml: [project] dependencies must be a list of strings")
        lines = _checked(dependencies, "pyproject.toml [project.dependencies]")
    if install_project:
        if pyproject is None:
            raise ProjectFileError(f"install-project: no pyproject.toml in {workdir}, so there is no "
                                   "project to install")
        if not isinstance(project, dict):
            raise ProjectFileError("pyproject.toml: no [project] table, so install-project has no "
                                   "project to install")
        if not sources or not sources[0].startswith("pyproject.toml"):
            sources.append("the project of pyproject.toml")
    added = _requires_lines(script, lines)
    if added:
        sources.append(f"the '# requires:' lines of {script.name}")
    if not lines and not added and not install_project:
        return None
    return Requirements(" and ".join(sources), lines + added, path_in_project, install_project, added)


def _requirements_txt(script: Path, workdir: Path | None) -> tuple[Path, str, str | None] | None:
    """(the file, its name for the user, its path in the project when it travels with it)."""
    root = workdir.resolve() if workdir is not None else None
    candidates = ([root / "requirements.txt"] if root is not None else []) + \
        [script.resolve().parent / "requirements.txt"]
    for path in candidates:
        if path.is_file():
            if root is not None and path.is_relative_to(root):
                inside = path.relative_to(root).as_posix()
                return path, inside, inside
            return path, "requirements.txt", None
    return None


def _pyproject(workdir: Path | None) -> dict | None:
    path = workdir / "pyproject.toml" if workdir is not None else None
    if path is None or not path.is_file():
        return None
    return _toml(_read(path, "pyproject.toml"), "pyproject.toml", "not TOML", 1)


_REQUIRES = re.compile(r"^#\s*requires:\s*(?P<names>.+?)\s*$")
REQUIRES_HEADER_LINES = 40  # where `# requires:` lines are looked for


def requires_names(script: Path) -> list[str]:
    """The packages named in `# requires:` comments in the script's first lines
    (`# requires: tiktoken, datasets>=2`): gpubench's own spelling, older than PEP 723."""
    names: list[str] = []
    try:
        with open(script, encoding="utf-8", errors="replace") as f:
            for _, line in zip(range(REQUIRES_HEADER_LINES), f):
                m = _REQUIRES.match(line.strip())
                if m:
                    names += [n for n in re.split(r"[,\s]+", m.group("names")) if n]
    except OSError:
        return []
    return list(dict.fromkeys(names))


def _requires_lines(script: Path, lines: tuple[str, ...]) -> tuple[str, ...]:
    """The script's `# requires:` names that `lines` does not already ask for."""
    names = requires_names(script)
    _checked(names, f"{script.name} (its '# requires:' lines)")
    seen = {_key(line) for line in lines}
    added = []
    for name in names:
        if _key(name) not in seen:
            seen.add(_key(name))
            added.append(name)
    return tuple(added)


def _key(line: str) -> object:
    """Two lines that ask for the same thing, however spelled, have one key."""
    try:
        r = Requirement(line)
    except InvalidRequirement:
        return line
    return canonicalize_name(r.name), frozenset(r.extras), r.specifier, str(r.marker), r.url


# --- requirements.txt, line by line --------------------------------------------------------

_COMMENT = re.compile(r"(^|\s+)#.*$")  # pip's: a '#' at the start or after whitespace
_OPTION = re.compile(r"--[A-Za-z][A-Za-z-]*|-[A-Za-z]")
# Option lines passed on as they are (pip's and uv's requirements-file options).
_LINE_OPTIONS = frozenset({
    "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-f", "--find-links",
    "-i", "--index-url", "--extra-index-url", "--no-index", "--pre", "--prefer-binary",
    "--only-binary", "--no-binary", "--trusted-host"})
# Options after a requirement on its line (pip-compile --generate-hashes writes --hash).
_REQUIREMENT_OPTIONS = frozenset({"--hash", "--config-settings", "--global-option"})
# A local path or a URL, which pip and uv install as they are.
_PATH_OR_URL = re.compile(r"^(\.|/|~|file:|(git|hg|svn|bzr)\+|https?:)")
_ARCHIVES = (".whl", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip")


def _read_requirements_txt(path: Path, shown: str) -> tuple[str, ...]:
    lines = []
    for number, line in _logical_lines(_read(path, shown, "utf-8-sig")):
        line = _COMMENT.sub("", line).strip()
        if line:
            _check_line(line, f"{shown} line {number}")
            lines.append(line)
    return tuple(lines)


def _logical_lines(text: str):
    """(first line's number, line) with backslash continuations joined, as pip joins them:
    a comment line ends a continued line and is never continued itself."""
    start, parts = 0, []
    for number, line in enumerate(text.splitlines(), 1):
        is_comment = _COMMENT.match(line) is not None
        if line.endswith("\\") and not is_comment:
            start = start if parts else number
            parts.append(line[:-1])
            continue
        if parts:
            yield start, "".join(parts) + (" " + line if is_comment else line)
            parts = []
        else:
            yield number, line
    if parts:
        yield start, "".join(parts)


def _check_line(line: str, where: str) -> None:
    if line.startswith("-"):
        option = _OPTION.match(line)
        name = option.group() if option else line.split()[0]
        if name not in _LINE_OPTIONS:
            raise ProjectFileError(f"{where}: unknown option '{name}' (gpubench passes on "
                                   f"{', '.join(sorted(_LINE_OPTIONS))})")
        return
    requirement, options = _split_options(line)
    for token in options:
        if token.startswith("-") and token.split("=", 1)[0] not in _REQUIREMENT_OPTIONS:
            raise ProjectFileError(f"{where}: unknown option '{token.split('=', 1)[0]}' after a "
                                   f"requirement (known: {', '.join(sorted(_REQUIREMENT_OPTIONS))})")
    if _PATH_OR_URL.match(requirement) or requirement.endswith(_ARCHIVES):
        return
    _checked([requirement], where)


def _split_options(line: str) -> tuple[str, list[str]]:
    """A requirement and the options after it, split where pip splits: the first word
    that starts with '-'."""
    m = re.search(r"\s-", line)
    if m is None:
        return line, []
    return line[:m.start()].strip(), line[m.start():].split()


def _checked(requirements: list[str], where: str) -> tuple[str, ...]:
    for text in requirements:
        try:
            Requirement(text)
        except InvalidRequirement as e:
            first = str(e).splitlines()[0] if str(e) else "invalid"
            raise ProjectFileError(f"{where}: '{text}' is not a requirement ({first})") from None
    return tuple(requirements)


# --- held distributions ---------------------------------------------------------------------

# A held distribution's markers are read as on the machine: Linux, under this Python (the
# machine's Python version is not known here).
_MACHINE = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"}


def held_conflicts(requirements: Requirements, installed: dict[str, str]) -> list[str]:
    """One line for each requirement that the machine's held distributions cannot meet.
    `installed`: {name: version} of the held distributions on the machine."""
    have = {canonicalize_name(name): version for name, version in installed.items()}
    environment = {**default_environment(), **_MACHINE}
    conflicts = []
    for line in requirements.lines:
        if line.startswith("-"):
            continue
        text, _ = _split_options(line)
        try:
            r = Requirement(text)
        except InvalidRequirement:
            continue  # a path or URL: what it is is known only once built
        name = canonicalize_name(r.name)
        if not is_held(name) or name not in have:
            continue  # not held, or not on the machine: the installer's business
        if r.marker is not None and not r.marker.evaluate({**environment, "extra": ""}):
            continue
        try:
            version = Version(have[name])
        except InvalidVersion:
            continue
        # A direct URL would replace the held build whatever its version.
        if r.url is not None or not r.specifier.contains(version, prereleases=True):
            conflicts.append(f"{requirements.source} asks for {text}, but the machine's {name} is "
                             f"{have[name]}, held as its image has it (loosen the requirement, or "
                             f"pick an image with that {name})")
    return conflicts


# --- [tool.gpubench] ----------------------------------------------------------------------

@dataclass(frozen=True)
class ProjectSettings:
    """The [tool.gpubench] table of <workdir>/pyproject.toml."""

    outputs: tuple[str, ...] = ()
    setup: str | None = None
    install_project: bool = False
    max_steps: int | None = None
    source: Path | None = None  # the pyproject.toml read; None when none


_SETTINGS_KEYS = ("outputs", "setup", "install-project", "max-steps")


def read_settings(workdir: Path | None) -> ProjectSettings:
    """The project's [tool.gpubench] settings; the defaults without a file or a table.
    Its outputs are checked (check_outputs) against the workdir."""
    pyproject = _pyproject(workdir)
    tool = pyproject.get("tool", {}) if pyproject is not None else {}
    table = tool.get("gpubench") if isinstance(tool, dict) else None
    if table is None:
        return ProjectSettings()
    where = "pyproject.toml [tool.gpubench]"
    if not isinstance(table, dict):
        raise ProjectFileError(f"{where}: must be a table")
    for key in table:
        if key not in _SETTINGS_KEYS:
            raise ProjectFileError(f"{where}: unknown key '{key}' (known: {', '.join(_SETTINGS_KEYS)})")
    outputs = table.get("outputs", [])
    if isinstance(outputs, str):
        outputs = split_outputs(outputs)
    elif isinstance(outputs, list) and all(isinstance(o, str) for o in outputs):
        outputs = tuple(o.strip() for o in outputs if o.strip())
    else:
        raise ProjectFileError(f"{where}: outputs must be a string (\"a,b\") or a list of strings")
    setup = table.get("setup")
    if setup is not None and not isinstance(setup, str):
        raise ProjectFileError(f"{where}: setup must be a string (a shell command)")
    install_project = table.get("install-project", False)
    if not isinstance(install_project, bool):
        raise ProjectFileError(f"{where}: install-project must be true or false")
    max_steps = table.get("max-steps")
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int)
                                  or max_steps < 1):
        raise ProjectFileError(f"{where}: max-steps must be a whole number of at least 1, "
                               f"not {max_steps!r}")
    setup = (setup or "").strip() or None
    return ProjectSettings(check_outputs(outputs, workdir, f"{where} outputs"), setup,
                           install_project, max_steps, workdir / "pyproject.toml")


# --- outputs ---------------------------------------------------------------------------------

def split_outputs(value: str | None) -> tuple[str, ...]:
    """'checkpoints/,runs/*.pt' -> ('checkpoints/', 'runs/*.pt')."""
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


_GLOB = re.compile(r"[*?\[]")


def check_outputs(patterns: tuple[str, ...], project_dir: Path,
                  label: str = "--outputs") -> tuple[str, ...]:
    """The patterns, normalised (POSIX, no leading './', a directory's trailing '/' kept), each
    a path or glob inside the project; one that could reach outside it is refused, since what
    it names is copied back over the user's own files. `label` names where they were given."""
    root = project_dir.resolve()
    checked = []
    for pattern in patterns:
        given = pattern.strip()
        if not given:
            raise ProjectFileError(f"{label}: an empty path (give paths relative to {project_dir})")
        outside = ProjectFileError(f"{label}: {given} is outside the project (give paths relative "
                                   f"to {project_dir})")
        if given.startswith(("/", "~")):
            raise outside
        normal = posixpath.normpath(given)
        if normal == ".." or normal.startswith("../"):
            raise outside
        if normal == ".":
            raise ProjectFileError(f"{label}: {given} is the whole project; name the files or "
                                   "directories it writes")
        # The part before any glob must not lead out through a symlink.
        fixed = normal.split("/")
        literal = fixed[:next((i for i, part in enumerate(fixed) if _GLOB.search(part)), len(fixed))]
        if literal and not (root / "/".join(literal)).resolve().is_relative_to(root):
            raise outside
        checked.append(normal + "/" if given.endswith("/") else normal)
    return tuple(checked)


# --- reading files ----------------------------------------------------------------------------

def _read(path: Path, shown: str, encoding: str = "utf-8") -> str:
    try:
        return path.read_text(encoding=encoding)
    except UnicodeDecodeError:
        raise ProjectFileError(f"{shown}: not UTF-8 text") from None
    except OSError as e:
        raise ProjectFileError(f"{shown}: cannot be read ({e.strerror or e})") from None


_TOML_AT = re.compile(r"\s*\(at line (?P<line>\d+), column \d+\)$")


def _toml(text: str, shown: str, what: str, first_line: int) -> dict:
    """`text` parsed; an error names the line of the file (the text starts at `first_line`)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message = str(e).splitlines()[0]
        at = _TOML_AT.search(message)
        place = f"{shown} line {first_line + int(at.group('line')) - 1}" if at else shown
        reason = message[:at.start()] if at else message
        raise ProjectFileError(f"{place}: {what} ({reason})") from None


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1
