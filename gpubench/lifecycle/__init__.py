"""The instance lifecycle: renting, checking and giving back machines. The ledger
it writes is gpubench.store.ledger. Modules, roughly in the order they are used:

- waiting.py     the poll interval and the one way to wait for a deadline
- accounts.py    whose word counts for a row: its account beside the connected one
- sightings.py   what a row's own account says of it now (list, then lookup by id)
- keys.py        gpubench's SSH key pair, pinned host keys, the SSH login probe
- sshconfig.py   <config>/ssh_config written from the ledger; the `gpubench ssh` argv
- consent.py     what the user agreed to pay for, and asking about anything else
- budget.py      a bench plan's expected time and cost, the --budget ceiling, money spent
- boot.py        from launched to usable: running, SSH answering, the preflight gate's verdict
- preflight.py   the preflight gate (its checks: preflight_checks.py; what runs on the
                 machine: gpubench/onhost/preflight_probe.py)
- watchdog.py    machines that stop themselves at their --max-hours deadline (the script
                 that runs on the machine: gpubench/onhost/watchdog.py)
- terminate.py   terminate until the provider confirms, and the ledger marks around it
- provision.py   rent one machine: cheapest fitting offer, launch, wait for SSH
- cluster_provision.py  rent a cluster: one placement, all or nothing, the link measured
- fleet.py       the ledger set beside each provider's own list (ls), orphans,
                 machines past their deadline
- down.py        what `gpubench down` takes down, and taking it down
- stats.py       per provider and GPU type: time to SSH, machines never ready, gate failures
"""
