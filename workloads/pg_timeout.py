"""The collective timeout: the environment variable through which gpubench bounds how
long a collective waits for the other ranks (gpubench/launch/cluster.py sets it for
a cluster run), and init_process_group's timeout the harness reads from it.

Standard library only: copied to the machine beside the workloads (imported as
`pg_timeout`) and installed in gpubench as `gpubench.workloads.pg_timeout`, which
the CLI imports without torch.
"""

from __future__ import annotations

import os
from datetime import timedelta

# Seconds a collective may wait for the other ranks before it fails (gloo's default is
# 30 minutes, NCCL's 10): across machines a lost node must fail the run, not hang it.
PG_TIMEOUT_ENV = "GPUBENCH_PG_TIMEOUT_S"


def collective_timeout() -> dict:
    """init_process_group's timeout from $GPUBENCH_PG_TIMEOUT_S; torch's default without it."""
    text = os.environ.get(PG_TIMEOUT_ENV, "").strip()
    try:
        seconds = float(text) if text else 0.0
    except ValueError:
        seconds = 0.0
    return {"timeout": timedelta(seconds=seconds)} if seconds > 0 else {}
