"""Errors of remote runs. Each message is one line fit for the terminal."""

from gpubench.errors import GpubenchError, UsageError


class BadTargetError(UsageError):
    """An --on value or key file that cannot name a machine."""


class SshError(GpubenchError):
    """SSH to the machine failed in a way a retry will not fix (auth, protocol)."""


class HostUnreachableError(SshError):
    """No SSH server answered within the wait."""


class HostKeyChangedError(SshError):
    """The machine presented a host key other than the one pinned on first contact."""


class ConnectionLostError(SshError):
    """An established connection dropped; reconnecting may help."""


class RemoteEnvError(GpubenchError):
    """The machine lacks something every run needs (python, torch, rsync)."""


class SyncError(GpubenchError):
    """rsync failed to copy the workloads."""
