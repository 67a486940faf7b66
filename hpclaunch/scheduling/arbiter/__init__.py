"""The arbiter: checkpoint-aware preemption on a live Slurm cluster (``hpclaunch arbiter``).

When a job of a preempting tier waits for GPUs, the arbiter preempts the preemptible running
jobs whose preemption wastes least (the simulator's ``ours`` policy,
:func:`hpclaunch.scheduling.victims.choose_victims`), asks them to checkpoint first, and
requeues them. Modules, in the order of a pass:

* :mod:`~hpclaunch.slurm.cluster`: the cluster's jobs and GPUs, in two Slurm calls;
* :mod:`~hpclaunch.scheduling.arbiter.progress`: what each running job has at stake, from its ledger
  and newest checkpoint on the shared filesystem;
* :mod:`~hpclaunch.scheduling.arbiter.decide`: the pure decision;
* :mod:`~hpclaunch.scheduling.arbiter.daemon`: the loop, the actions and the decision log.
"""
