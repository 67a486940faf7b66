"""Reports of jobs: what their accounting, ledger and GPU samples add up to, as data and
text (``hpclaunch report``; :mod:`hpclaunch.ops.report` gathers the inputs)."""
