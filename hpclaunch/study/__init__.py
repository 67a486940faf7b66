"""Adaptive sweeps: one Optuna study a sweep, its array's tasks the study's workers.

- :mod:`hpclaunch.study.config`: what a study is, as ``study.json`` in the sweep's job
  directory (written at submit; read by every task, the trainer and the sidecar).
- :mod:`hpclaunch.study.engine`: the one module that imports Optuna: the study made and
  opened, a task's trial taken (or resumed after a requeue), its intermediate values
  reported to the pruner, its end told.
"""
