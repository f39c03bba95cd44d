"""What gpubench keeps, at the bottom of every stage: the ledger of every machine
ever asked for (sqlite) and the result records (JSON Lines). Every stage above
writes here; nothing here imports a stage.

status   the ledger's statuses and the transitions allowed between them
ledger   every instance ever asked for, written before each launch call, with the
         account it was launched under
results  the append-only result records of each run, and reading them back
billing  a bench's records completed with what its machine cost, once it is gone
"""
