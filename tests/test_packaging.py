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
