"""Sweeps: one job spec run once per point of a parameter sweep, as Slurm job arrays.

``hpclaunch sweep SPEC`` expands the spec's ``sweep:`` section into points
(:mod:`hpclaunch.sweep.points`: grid, seeded random draw, or an explicit list), writes them to
``<job dir>/sweep-params.jsonl`` (one JSON object per line, line *i* = point *i*), and submits
one batch script as one or more arrays (:mod:`hpclaunch.sweep.submit`): indices must stay
below the cluster's ``MaxArraySize``, so a sweep of P points becomes ``ceil(P / MaxArraySize)``
arrays, each given its offset as the batch script's first argument. Inside the job,
:mod:`hpclaunch.sweep.task` finds the task's point (offset + ``SLURM_ARRAY_TASK_ID``), gives it
its own directory ``<job dir>/tasks/<point>/`` (control files, ledger, checkpoints, attempt
logs), replaces ``{name}`` in the command with the point's values (argv words, no shell) and
execs the command. ``hpclaunch sweep status ID`` (:mod:`hpclaunch.sweep.status`) counts the
tasks by state and shows the final metrics the trainer reported with
:func:`hpclaunch.runtime.report_metrics`.

This package's ``__init__`` imports nothing: :mod:`hpclaunch.sweep.task` runs in every task.
"""
