"""What the shell completes (`gpubench --install-completion` installs it): provider
names and workload names. Each function gets what was typed so far and answers the
candidates; they import nothing heavy, as completion runs gpubench on each Tab."""

from __future__ import annotations


def provider_names(incomplete: str) -> list[str]:
    from gpubench.providers import registry

    return [name for name in registry.names() if name.startswith(incomplete)]


def workload_names(incomplete: str) -> list[str]:
    """The suite's workloads (a path to a script is the shell's own file completion)."""
    from gpubench.suite import suite_names

    return [name for name in suite_names() if name.startswith(incomplete)]


def workload_list(incomplete: str) -> list[str]:
    """--workload mnist-ddp,gp<Tab>: the last name of a comma list completed, the
    names before it kept (and not offered again)."""
    head, _, last = incomplete.rpartition(",")
    chosen = set(head.split(",")) if head else set()
    prefix = f"{head}," if head else ""
    return [prefix + name for name in workload_names(last) if name not in chosen]


def workload_arg_names(incomplete: str) -> list[str]:
    """--args gp<Tab>: a workload name followed by = (its arguments come next)."""
    if "=" in incomplete:
        return []
    return [f"{name}=" for name in workload_names(incomplete)]
