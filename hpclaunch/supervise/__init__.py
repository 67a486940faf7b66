"""What runs inside the job: the sidecar and the per-node launch.

* :mod:`~hpclaunch.supervise.rendezvous`: master address/port, ranks, sizes from Slurm.
* :mod:`~hpclaunch.supervise.launchers`: argv of torchrun, deepspeed, accelerate, srun.
* :mod:`~hpclaunch.supervise.node`: ``node-exec``, the srun task on each node.
* :mod:`~hpclaunch.supervise.signals`: catch USR1/USR2/TERM/INT.
* :mod:`~hpclaunch.supervise.control`: the request/done/progress files shared with the trainer.
* :mod:`~hpclaunch.supervise.requeue`: ``scontrol requeue`` and the retry policy.
* :mod:`~hpclaunch.supervise.ledger`: ``events.jsonl``.
* :mod:`~hpclaunch.supervise.sidecar`: the process that ties them together.

Entry point: ``python -m hpclaunch.supervise`` / ``hpclaunch-sidecar``.
"""
