"""`gpubench bench`: rent, sweep, give back, in one call, over one plan.

request   what a bench is asked (BenchRequest) and what it did (BenchResult)
plan      before renting: the offers, the points, the estimate against the budget,
          each machine's deadline, what confirming agrees to
sweeps    the sweeps on what was rented: the launcher factory, the budget per run,
          the host's facts on every record
teardown  the one way to give back a machine or a cluster, and rent_sweep_teardown,
          the one shape of a bench (teardown whatever happens, then the cost)
machine   one machine, or K of them on distinct hosts (--hosts)
hosts     --hosts: telling hosts apart, in turn or at once (--parallel)
cluster   a cluster of rented machines (--nodes)
candidates  bench all --candidates K: which offers are most worth measuring (pure)
shortlist   ... before renting: every provider's offers, the predictions, each candidate's plan
across      ... the candidates rented and swept at once, replaced or dropped, all given back
"""
