"""The instance lifecycle: rent (provision), keep track (ledger), list and reconcile
with the providers (fleet), take down until confirmed, and gpubench's SSH identity
and ssh_config for the machines it holds (keys)."""
