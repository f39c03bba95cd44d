"""Reports computed from result records alone (pandas and matplotlib, imported
lazily by the CLI).

normalise  records of any schema version -> one DataFrame of the columns a report uses
           (which, and every report column: gpubench.workloads.record_schema)
cache      those columns of a long history, kept between reports
filters    --run and --since
selectors  naming a provider, a GPU or provider:gpu on the command line
compute    speedup, efficiency, cost, the fastest/cheapest-paid marks, the Pareto front,
           the step in parts and the points of efficiency lost to each
slow_rank  the rank the others waited for, from every rank's step in parts
expected_parts  the exposed all-reduce beside the one the performance model expected
compare    two providers or GPU types side by side (or what they could be compared on)
story      per table, the fastest against the cheapest paid configuration in words
tables     what each output shows: rows and headings for people and for programs, which
           columns a narrow terminal keeps, footnotes (a price that is a machine's share)
render     a report as text in each format (table, markdown, csv, json)
plots      matplotlib figures per workload
html       one self-contained page: the tables and the figures inlined
"""
