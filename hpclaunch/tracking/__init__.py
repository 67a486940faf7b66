"""Tracker runs that outlive the attempts of a job: the MLflow runs made at submit
(:mod:`~hpclaunch.tracking.mlflow_runs`, the one module that imports MLflow for the
commands) and W&B's offline runs found and synced from the login node
(:mod:`~hpclaunch.tracking.offline`). Inside the job: :mod:`hpclaunch.runtime.tracking`."""
