"""A trace-driven GPU cluster simulator for comparing scheduling and preemption policies.

Pure standard library (a heap of events, float times): importing it is cheap, and 100,000
jobs on 256 GPUs take seconds. ``model`` (jobs, nodes, placement), ``engine`` (events and
the scheduling pass), ``policies`` (FIFO, backfill, priority, Slurm-native preemption,
random victim, ours), ``workload`` (synthetic generator, CSV traces), ``metrics`` and
``report`` (tables, JSON, the CDF plot; matplotlib only for the plot). See
docs/simulator.md.
"""
