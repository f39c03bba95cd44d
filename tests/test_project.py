"""A user's project's files, read by gpubench.project: which requirements it declares
(PEP 723, requirements.txt, pyproject.toml, `# requires:`), each line checked; which of
them the machine's held torch stack cannot meet; the [tool.gpubench] settings; and the
--outputs paths, which must stay inside the project."""

from __future__ import annotations

import re

import pytest

from gpubench import project
from gpubench.errors import UsageError
from gpubench.project import ProjectFileError, Requirements

# The example of the PEP 723 specification, as written there.
SPEC_EXAMPLE = """\
# /// script
# requires-python = ">=3.11"
# dependencies = [
#   "requests<3",
#   "rich",
# ]
# ///

import requests
from rich.pretty import pprint

resp = requests.get("https://peps.python.org/api/peps.json")
"""


@pytest.fixture
def proj(tmp_path):
    """An empty project directory holding train.py, which declares nothing."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "train.py").write_text("print('hi')\n")
    return root


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- PEP 723 ---------------------------------------------------------------------------

def test_the_spec_example_parses(proj):
    script = write(proj / "train.py", SPEC_EXAMPLE)
    assert project.pep723_block(script) == {"requires-python": ">=3.11",
                                            "dependencies": ["requests<3", "rich"]}
    found = project.find_requirements(script, None)
    assert found == Requirements("the PEP 723 block of train.py", ("requests<3", "rich"))
    assert found.text == "requests<3\nrich\n"


def test_a_script_without_a_block_has_none(proj):
    assert project.pep723_block(proj / "train.py") is None
    assert project.find_requirements(proj / "train.py", proj) is None


def test_two_blocks_are_refused(proj):
    script = write(proj / "train.py", SPEC_EXAMPLE + "\n# /// script\n# dependencies = []\n# ///\n")
    with pytest.raises(ProjectFileError, match=r"^train\.py: two '# /// script' blocks; PEP 723 "
                                               r"allows one$"):
        project.pep723_block(script)


def test_a_block_of_another_type_is_not_the_script_block(proj):
    script = write(proj / "train.py", "# /// other\n# x = 1\n# ///\n")
    assert project.pep723_block(script) is None


@pytest.mark.parametrize("text, message", [
    ("import os\n# /// script\n# dependencies = [\n", r"^train\.py line 2: its '# /// script' block "
                                                      r"is not closed"),
    ("\n# /// script\n# dependencies = [\n#   'rich'\n# oops\n# ///\n",
     r"^train\.py line 5: its '# /// script' block is not TOML \(.+\)$"),
    ("# /// script\n# dependencies = 'rich'\n# ///\n", r"^train\.py: 'dependencies' in its "
                                                       r"'# /// script' block must be a list of strings$"),
    ("# /// script\n# dependencies = ['torch>>2']\n# ///\n",
     r"^train\.py \(its '# /// script' block\): 'torch>>2' is not a requirement \(Expected .+\)$"),
])
def test_a_bad_block_is_refused_naming_the_script(proj, text, message):
    script = write(proj / "train.py", text)
    with pytest.raises(ProjectFileError, match=message):
        project.find_requirements(script, proj)


# --- where the requirements are found ------------------------------------------------------

def test_requirements_txt_at_the_workdir_root_travels_with_the_project(proj):
    write(proj / "requirements.txt", "tiktoken\n")
    script = write(proj / "src" / "train.py", "")
    write(proj / "src" / "requirements.txt", "other\n")  # the root's wins
    found = project.find_requirements(script, proj)
    assert (found.source, found.lines, found.path_in_project) == (
        "requirements.txt", ("tiktoken",), "requirements.txt")


def test_requirements_txt_beside_the_script(proj, tmp_path):
    script = write(proj / "src" / "train.py", "")
    write(proj / "src" / "requirements.txt", "tiktoken\n")
    inside = project.find_requirements(script, proj)
    assert (inside.source, inside.path_in_project) == ("src/requirements.txt", "src/requirements.txt")
    alone = project.find_requirements(script, None)  # no --workdir: the file does not travel
    assert (alone.source, alone.lines, alone.path_in_project) == ("requirements.txt", ("tiktoken",), None)


def test_pep723_wins_over_requirements_txt_which_wins_over_pyproject(proj):
    script = proj / "train.py"
    write(proj / "pyproject.toml", "[project]\nname = 'p'\nversion = '1'\ndependencies = ['rich']\n")
    found = project.find_requirements(script, proj)
    assert (found.source, found.lines) == ("pyproject.toml [project.dependencies]", ("rich",))
    write(proj / "requirements.txt", "tiktoken\n")
    assert project.find_requirements(script, proj).lines == ("tiktoken",)
    write(script, "# /// script\n# dependencies = ['einops']\n# ///\n")
    assert project.find_requirements(script, proj).lines == ("einops",)
    # A block that declares nothing still wins, as under `uv run`: nothing to install.
    write(script, "# /// script\n# requires-python = '>=3.10'\n# ///\n")
    assert project.find_requirements(script, proj) is None


def test_requires_lines_are_added_without_duplicates(proj):
    script = write(proj / "train.py", "# requires: tiktoken, Datasets>=2 , einops\nimport os\n")
    names = ("tiktoken", "Datasets>=2", "einops")
    assert project.find_requirements(script, proj) == Requirements(
        "the '# requires:' lines of train.py", names, added=names)
    write(proj / "requirements.txt", "datasets >= 2\nrich\n")
    found = project.find_requirements(script, proj)
    assert found.lines == ("datasets >= 2", "rich", "tiktoken", "einops")
    # the file travels and is installed with -r there; the installer writes out the rest
    assert (found.path_in_project, found.written) == ("requirements.txt", "tiktoken\neinops\n")
    assert found.source == "requirements.txt and the '# requires:' lines of train.py"


def test_a_bad_requires_line_is_a_project_file_error(proj):
    script = write(proj / "train.py", "# requires: foo[bar\n")
    with pytest.raises(ProjectFileError, match=r"^train\.py \(its '# requires:' lines\): 'foo\[bar' is "
                                               r"not a requirement"):
        project.find_requirements(script, None)
    write(script, "# requires: a;b\n")
    with pytest.raises(ProjectFileError, match="'a;b' is not a requirement"):
        project.find_requirements(script, None)


def test_pyproject_dependencies_and_the_project_itself(proj):
    script = proj / "train.py"
    write(proj / "pyproject.toml", "[project]\nname = 'p'\nversion = '1'\ndependencies = ['rich']\n")
    found = project.find_requirements(script, proj, install_project=True)
    assert (found.lines, found.install_project) == (("rich",), True)
    assert found.source == "pyproject.toml [project.dependencies]"
    write(proj / "requirements.txt", "tiktoken\n")  # asked by name: installed whichever set wins
    found = project.find_requirements(script, proj, install_project=True)
    assert (found.source, found.lines, found.install_project) == (
        "requirements.txt and the project of pyproject.toml", ("tiktoken",), True)


def test_install_project_needs_a_project(proj):
    script = proj / "train.py"
    with pytest.raises(UsageError, match="^install-project needs --workdir"):
        project.find_requirements(script, None, install_project=True)
    with pytest.raises(ProjectFileError, match="^install-project: no pyproject.toml in "):
        project.find_requirements(script, proj, install_project=True)
    write(proj / "pyproject.toml", "[tool.black]\nline-length = 100\n")
    with pytest.raises(ProjectFileError, match=r"^pyproject\.toml: no \[project\] table"):
        project.find_requirements(script, proj, install_project=True)
    assert project.find_requirements(script, proj) is None  # not asked: a pyproject of tools alone


@pytest.mark.parametrize("text, message", [
    ("[project\n", r"^pyproject\.toml line 1: not TOML \(.+\)$"),
    ("[project]\ndependencies = 'rich'\n", r"^pyproject\.toml: \[project\] dependencies must be a "
                                           r"list of strings$"),
    ("[project]\ndependencies = ['ok', 'torch>>2']\n",
     r"^pyproject\.toml \[project\.dependencies\]: 'torch>>2' is not a requirement \(Expected "),
])
def test_a_bad_pyproject_is_refused(proj, text, message):
    write(proj / "pyproject.toml", text)
    with pytest.raises(ProjectFileError, match=message):
        project.find_requirements(proj / "train.py", proj)


# --- requirements.txt, line by line --------------------------------------------------------

def test_requirements_txt_lines_as_pip_reads_them(proj):
    write(proj / "requirements.txt", """\
# the training stack
--index-url https://download.pytorch.org/whl/cu128
--extra-index-url=https://example.org/simple
-r base.txt
-c constraints.txt
-e ./vendor/lib
-e git+https://github.com/o/r.git#egg=r
--find-links ./wheels
--pre
./localpkg
/opt/wheels/x-1.0-py3-none-any.whl
~/src/other
file:///opt/y.tar.gz
git+https://github.com/o/r2.git@v1#egg=r2
https://example.org/z.zip
mylib @ https://example.org/mylib-1.0.tar.gz
dist/pkg-1.0-py3-none-any.whl
numpy>=1.26   # inline comment
einops ; python_version >= "3.8"

certifi==2024.2.2 \\
    --hash=sha256:0123 \\
    --hash=sha256:4567
    # via requests
accelerate[deepspeed]\\
>=0.30
""")
    lines = project.find_requirements(proj / "train.py", proj).lines
    assert lines == (
        "--index-url https://download.pytorch.org/whl/cu128",
        "--extra-index-url=https://example.org/simple",
        "-r base.txt", "-c constraints.txt", "-e ./vendor/lib",
        "-e git+https://github.com/o/r.git#egg=r", "--find-links ./wheels", "--pre", "./localpkg",
        "/opt/wheels/x-1.0-py3-none-any.whl", "~/src/other", "file:///opt/y.tar.gz",
        "git+https://github.com/o/r2.git@v1#egg=r2", "https://example.org/z.zip",
        "mylib @ https://example.org/mylib-1.0.tar.gz", "dist/pkg-1.0-py3-none-any.whl",
        "numpy>=1.26", 'einops ; python_version >= "3.8"',
        "certifi==2024.2.2     --hash=sha256:0123     --hash=sha256:4567", "accelerate[deepspeed]>=0.30")


@pytest.mark.parametrize("text, message", [
    # packaging's own reason, its first line alone (the rest draws a caret under the line)
    ("rich\n\n# c\ntorch>>2\n", r"^requirements\.txt line 4: 'torch>>2' is not a requirement "
                                r"\(Expected [^\n]+\)$"),
    ("rich\nfoo \\\n  >>1\n", r"^requirements\.txt line 2: 'foo   >>1' is not a requirement"),
    ("--use-feature=fast-deps\n", r"^requirements\.txt line 1: unknown option '--use-feature' "),
    ("-x\n", r"^requirements\.txt line 1: unknown option '-x' "),
    ("rich --no-deps\n", r"^requirements\.txt line 1: unknown option '--no-deps' after a requirement"),
])
def test_a_bad_requirements_txt_line_is_refused_with_its_number(proj, text, message):
    write(proj / "requirements.txt", text)
    with pytest.raises(ProjectFileError, match=message):
        project.find_requirements(proj / "train.py", proj)


def test_the_digest_is_of_what_is_installed_not_where_it_was_said():
    a = Requirements("requirements.txt", ("rich",))
    assert a.digest() == Requirements("the PEP 723 block of train.py", ("rich",)).digest()
    others = {Requirements("x", ("rich", "einops")), Requirements("x", ("rich",), "requirements.txt"),
              Requirements("x", ("rich",), install_project=True)}
    assert a.digest() not in {r.digest() for r in others}
    assert len({r.digest() for r in others}) == 3 and len(a.digest()) == 64
    assert Requirements("x", ()).text == ""


# --- held distributions -------------------------------------------------------------------

def test_held_names():
    assert project.is_held("torch") and project.is_held("Triton") and project.is_held("torchvision")
    assert project.is_held("NVIDIA_cublas_cu12") and project.is_held("nvidia-nccl-cu12")
    assert not project.is_held("torchmetrics") and not project.is_held("nvidia")
    assert not project.is_held("nvidia-ml-py")  # NVML's bindings, as onhost.python_env has it


def test_held_conflicts():
    installed = {"torch": "2.13.0+cu128", "nvidia-cublas-cu12": "12.8.4.1", "triton": "3.5.0"}
    source = "requirements.txt"
    conflicts = project.held_conflicts(Requirements(source, (
        "torch>=2.14", "NVIDIA_cublas_cu12==1 --hash=sha256:00", "rich==1", "torchvision==0.1",
        "triton>=3.5.0rc1", "-r more.txt", "./pkg")), installed)
    assert conflicts == [
        "requirements.txt asks for torch>=2.14, but the machine's torch is 2.13.0+cu128, held as its "
        "image has it (loosen the requirement, or pick an image with that torch)",
        "requirements.txt asks for NVIDIA_cublas_cu12==1, but the machine's nvidia-cublas-cu12 is "
        "12.8.4.1, held as its image has it (loosen the requirement, or pick an image with that "
        "nvidia-cublas-cu12)"]
    for line in ("torch>=2.0", "torch==2.13.0", "torch>=2.13.0.dev0",
                 "torch<2.14; sys_platform == 'linux'", "torch==1.0; sys_platform == 'darwin'"):
        assert project.held_conflicts(Requirements(source, (line,)), installed) == [], line
    url = project.held_conflicts(Requirements(source, ("torch @ https://x/torch-2.0.whl",)), installed)
    assert len(url) == 1 and "asks for torch @ https://x/torch-2.0.whl" in url[0]


# --- [tool.gpubench] ----------------------------------------------------------------------

def test_settings_read_from_the_table(proj):
    assert project.read_settings(None) == project.ProjectSettings()
    assert project.read_settings(proj) == project.ProjectSettings()  # no file
    write(proj / "pyproject.toml", "[tool.black]\nline-length = 100\n")
    assert project.read_settings(proj) == project.ProjectSettings()  # no table
    write(proj / "pyproject.toml", """\
[tool.gpubench]
outputs = "./checkpoints/, runs/*.pt,"
setup = "apt-get install -y ffmpeg"
install-project = true
max-steps = 200
""")
    assert project.read_settings(proj) == project.ProjectSettings(
        ("checkpoints/", "runs/*.pt"), "apt-get install -y ffmpeg", True, 200, proj / "pyproject.toml")
    write(proj / "pyproject.toml", "[tool.gpubench]\noutputs = ['out/', ' ', 'logs']\n")
    assert project.read_settings(proj).outputs == ("out/", "logs")


@pytest.mark.parametrize("table, message", [
    ("ouputs = 'x'", r"^pyproject\.toml \[tool\.gpubench\]: unknown key 'ouputs' \(known: outputs, "
                     r"setup, install-project, max-steps\)$"),
    ("outputs = 3", r"outputs must be a string"),
    ("outputs = ['a', 1]", r"outputs must be a string"),
    ("outputs = '../up'", r"^pyproject\.toml \[tool\.gpubench\] outputs: \.\./up is outside the project"),
    ("setup = ['a']", r"setup must be a string"),
    ("install-project = 'yes'", r"install-project must be true or false$"),
    ("max-steps = 0", r"max-steps must be a whole number of at least 1, not 0$"),
    ("max-steps = true", r"max-steps must be a whole number"),
    ("max-steps = 1.5", r"max-steps must be a whole number"),
])
def test_a_bad_settings_table_is_refused(proj, table, message):
    write(proj / "pyproject.toml", f"[tool.gpubench]\n{table}\n")
    with pytest.raises(ProjectFileError, match=message):
        project.read_settings(proj)


def test_settings_from_a_pyproject_that_is_not_toml(proj):
    write(proj / "pyproject.toml", "[tool.gpubench]\noutputs = \n")
    with pytest.raises(ProjectFileError, match=r"^pyproject\.toml line 2: not TOML \(Invalid value\)$"):
        project.read_settings(proj)


# --- outputs ---------------------------------------------------------------------------------

def test_split_outputs():
    assert project.split_outputs("checkpoints/,runs/*.pt") == ("checkpoints/", "runs/*.pt")
    assert project.split_outputs(" a , ,b,") == ("a", "b")
    assert project.split_outputs(None) == project.split_outputs("") == ()


def test_check_outputs_accepts_paths_and_globs_inside(proj):
    (proj / "runs").mkdir()
    assert project.check_outputs(("checkpoints/", "runs/*.pt", "./out//model.pt", "a/../b/",
                                  "logs/[ab]?.txt"), proj) == (
        "checkpoints/", "runs/*.pt", "out/model.pt", "b/", "logs/[ab]?.txt")


@pytest.mark.parametrize("pattern, message", [
    ("/etc/passwd", r"^--outputs: /etc/passwd is outside the project \(give paths relative to .+proj\)$"),
    ("~/x", r"^--outputs: ~/x is outside the project"),
    ("../x", r"^--outputs: \.\./x is outside the project"),
    ("a/../../x", r"is outside the project"),
    ("..", r"is outside the project"),
    ("", r"^--outputs: an empty path"),
    ("./", r"^--outputs: \./ is the whole project"),
])
def test_check_outputs_refuses_what_leaves_the_project(proj, pattern, message):
    with pytest.raises(ProjectFileError, match=message):
        project.check_outputs((pattern,), proj)


def test_check_outputs_refuses_a_symlink_that_leads_out(proj, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (proj / "escape").symlink_to(tmp_path / "elsewhere")
    (proj / "real").mkdir()
    (proj / "inner").symlink_to(proj / "real")
    for pattern in ("escape", "escape/", "escape/*.pt", "escape/deep/x"):
        with pytest.raises(ProjectFileError,
                           match=f"^--outputs: {re.escape(pattern)} is outside the project"):
            project.check_outputs((pattern,), proj)
    assert project.check_outputs(("inner/", "inner/*.pt"), proj) == ("inner/", "inner/*.pt")
