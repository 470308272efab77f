"""`provision doctor`: is this cluster ready for one multi-node training job?

Data flow: :mod:`.sources` (the steps doctor adds to probe's gather script, with pure parsers) ->
:mod:`.runner` (one connection per host: the gather round trip, then the pairwise-SSH round trip
of :mod:`.pairwise`, run as the job user on the node) -> :mod:`.checks` (pure comparisons across
nodes on frozen dataclasses, one :class:`.model.CheckResult` each). With ``--perf``, :mod:`.perf`
then runs iperf3 between pairs of nodes in rounds and :mod:`.perf_judge` judges each link against
the others; :mod:`.healthy` turns doctor's verdict into the hosts `launch --pick-healthy` uses.
"""
