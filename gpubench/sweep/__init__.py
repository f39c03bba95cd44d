"""Sweep: one workload run at each point of a plan (nodes x processes per node)
through a Launcher, every run recorded.

run      the plan, the sweep itself (skips, repeats, stops), a new run over the points
records  a record completed with what only gpubench knows (where, cost, command)
runlogs  the whole output of every run, kept beside its records
events   what a sweep tells a live display while it runs

The points come from gpubench.launch.points; where they run is the launcher's affair.
"""
