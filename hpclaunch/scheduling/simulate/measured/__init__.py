"""The simulator for jobs whose work is measured (the Pollux artifact's workloads and
training runs), with rigid and elastic jobs; see docs/simulator.md. ``apps`` (step times,
progress per epoch), ``jobs`` (a job, the workloads), ``engine`` (the rounds),
``policies`` (FIFO, backfill, Tiresias, elastic)."""
