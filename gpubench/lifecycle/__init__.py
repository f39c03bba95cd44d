"""The instance lifecycle, one module per job, imported in this order (no module
imports one above it):

- status.py     the ledger's statuses and the transitions between them
- waiting.py    the poll interval and the one way to wait for a deadline
- ledger.py     every instance ever asked for, in sqlite (written before each launch),
                with the account it was launched under
- accounts.py   whose word counts for a row: its account beside the connected one
- sightings.py  what a row's own account says of it now (list, then lookup by id)
- keys.py       gpubench's SSH key pair, pinned host keys, the SSH login probe
- sshconfig.py  <config>/ssh_config written from the ledger; the `gpubench ssh` argv
- watchdog.py   machines that stop themselves at their --max-hours deadline (the
                script that runs on the machine is onhost/watchdog.py)
- budget.py     a bench plan's expected time and cost, the --budget ceiling, money spent
- terminate.py  terminate until the provider confirms, and the ledger marks around it
- provision.py  rent one machine: cheapest fitting offer, launch, wait for SSH
- fleet.py      the ledger set beside each provider's own list (ls), orphans,
                machines past their deadline
- down.py       what `gpubench down` takes down, and taking it down
"""
