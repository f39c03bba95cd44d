"""The scripts that run on a machine are tried on a real sshd too (tests/remote's)."""

from tests.remote.conftest import remote_python, sshd  # noqa: F401  (fixtures)
