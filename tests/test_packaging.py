"""Every package directory is installed: an editable install hides a missing entry."""

from __future__ import annotations

import tomllib

from tests.helpers import REPO


def test_every_package_directory_is_listed_in_pyproject():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "gpubench").rglob("__init__.py")}
    assert found <= listed, f"not in pyproject packages: {sorted(found - listed)}"
    assert config["package-dir"]["gpubench.providers"] == "providers"
    assert config["package-dir"]["gpubench.workloads"] == "workloads"


def test_distribution_name_is_not_the_unrelated_pypi_gpubench():
    """"gpubench" on PyPI is another project: the distribution has a name of its own,
    the command and the import package stay gpubench."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == "gpubench-ddp"
    assert project["scripts"] == {"gpubench": "gpubench.cli:entry"}
    assert "matplotlib>=3.7" in project["optional-dependencies"]["plots"]


def test_no_hint_installs_the_pypi_gpubench():
    """A hint such as pip install 'gpubench[plots]' would fetch the unrelated project."""
    texts = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "scripts").glob("*.sh"),
             *(REPO / "gpubench").rglob("*.py"), *(REPO / "providers").rglob("*.py")]
    offending = [str(p.relative_to(REPO)) for p in texts if "gpubench[" in p.read_text()]
    assert offending == []


def test_setup_installs_what_the_report_page_and_plots_need():
    """The README's setup (scripts/setup.sh, which the demo calls) always adds the plots
    extra, so that `report --html` and `--plot` work after it."""
    import subprocess

    setup = (REPO / "scripts" / "setup.sh").read_text()
    line = next(line for line in setup.splitlines() if line.startswith("case ")).split("  #")[0]
    for given, wanted in (("local", "local,plots"), ("local,test,plots", "local,test,plots"),
                          ("plots", "plots")):
        done = subprocess.run(["bash", "-c", f'extras={given}; {line}; echo "$extras"'],
                              capture_output=True, text=True, check=True)
        assert done.stdout.strip() == wanted
