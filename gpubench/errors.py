"""Typed errors. Every error a user can cause derives from GpubenchError, whose
message is one line that the CLI prints on stderr before exiting non-zero."""


class GpubenchError(Exception):
    """An expected failure with a message fit for the terminal."""

    exit_code = 1


class UsageError(GpubenchError):
    """A bad flag value or argument."""

    exit_code = 2


class UnknownWorkloadError(UsageError):
    pass


class ResultsError(GpubenchError):
    """A results store that cannot be read or written."""


class RunError(GpubenchError):
    """A workload run that could not be started at all."""
