"""The requeue and time-limit warning options of a job, and the lead its sidecar is told."""

from __future__ import annotations

from hpclaunch.config.site import TierPolicy
from hpclaunch.errors import PlanError
from hpclaunch.jobspec.job import JobSpec

__all__ = ["SLURM_SIGNAL_EARLY", "requeue_options", "signal_lead"]


def requeue_options(
    spec: JobSpec, policy: TierPolicy, notes: list[str], *, expedite: bool = False
) -> tuple[list[tuple[str, str | None]], int]:
    """The requeue and signal options, and the lead the sidecar is told
    (``HPCLAUNCH_SIGNAL_LEAD``): --signal's, shrunk to fit the limit, or the spec's.

    Every tier gets the time-limit warning and requeue when the checkpoint policy allows
    requeues (``max_requeues`` > 0) and a sidecar handles the signal: ``--requeue`` does not
    make a job preemptible (only a QOS that another QOS's ``Preempt`` names is), it lets
    ``scontrol requeue`` and Slurm's requeue after a node failure act on it (sbatch(1):
    ``--no-requeue`` jobs are never requeued, ``scontrol requeue`` refuses them).

    ``expedite`` (the site's ``expedited_requeue``, and a backend that can ask for it):
    such a job gets ``--requeue=expedite``. Only a job with a sidecar: with the flag, Slurm
    requeues a job after *any* non-zero exit and holds it when no epilog failed
    (``_set_job_requeue_exit_value`` and ``batch_requeue_fini`` in job_mgr.c, 25.11.7:
    "job requeued in held state"), so the sidecar clears the job's Requeue before it
    ends it with an error (sidecar.py); a plain command has nobody to do that.
    """
    ckpt = spec.checkpoint
    qos = policy.qos
    kind = f"preemptible (grace {policy.grace} s)" if policy.preemptible else "never preempted"
    if ckpt.max_requeues > 0 and spec.launcher == "none":
        if not policy.preemptible:
            notes.append(
                f"tier {spec.tier} → QOS {qos}, never preempted: --no-requeue; launcher none "
                "has no sidecar, so there is no warning before the time limit and no "
                "checkpoint or requeue at it (use launcher srun, torchrun, deepspeed or "
                "accelerate for that)"
            )
            return [("--no-requeue", None)], ckpt.signal_lead_time
        # Nothing in the job would handle the signal: the batch shell execs the command, and
        # a process without a handler dies of USR1. Slurm would then end the job (COMPLETED
        # or FAILED) instead of requeueing it. Without --signal, the batch shell hears
        # nothing until GraceTime ends, then Slurm kills and requeues it (Slurm 22.05).
        notes.append(
            f"tier {spec.tier} → QOS {qos}, {kind}: --requeue, no --signal (launcher none "
            "has no sidecar to checkpoint: at preemption Slurm stops the job after the grace "
            "time and requeues it, and it starts over; at the time limit it ends TIMEOUT)"
        )
        return [("--requeue", None)], ckpt.signal_lead_time
    if ckpt.max_requeues > 0:
        lead = signal_lead(spec, notes)
        signal = f"B:{ckpt.signal}@{lead}"
        when = f"at preemption or {lead} s" if policy.preemptible else f"{lead} s"
        node = "after a node failure Slurm requeues it and it resumes from its last checkpoint"
        notes.append(
            f"tier {spec.tier} → QOS {qos}, {kind}: --requeue and --signal={signal} (B: "
            f"signals the batch shell, which execs the sidecar: {when} before the "
            f"time limit it asks for a checkpoint and requeues the job, at most "
            f"{ckpt.max_requeues} times for the time limit and node failures; {node})"
        )
        if expedite:
            notes.append(
                "site expedited_requeue: --requeue=expedite (Slurm 25.11+): after a node "
                "failure the job is eligible again at once, ahead of the queue, not after "
                "Slurm's requeue delay; the sidecar turns the flag off before it ends the "
                "job with an error, which would otherwise be requeued held"
            )
            return [("--requeue", "expedite"), ("--signal", signal)], lead
        return [("--requeue", None), ("--signal", signal)], lead
    notes.append(
        f"tier {spec.tier} → QOS {qos}, {kind}, checkpoint.max_requeues is 0: --no-requeue "
        "and no warning before the time limit (the site's JobRequeue default would otherwise "
        "requeue it after a node failure)"
    )
    return [("--no-requeue", None)], ckpt.signal_lead_time


#: sbatch(1), --signal: "the signal may be sent up to 60 seconds earlier than specified"
#: (slurmctld checks every PERIODIC_TIMEOUT, 30 s, and sends it once the time left is at
#: most the lead plus 30 s: job_mgr.c, send_job_warn_signal).
SLURM_SIGNAL_EARLY = 60


def signal_lead(spec: JobSpec, notes: list[str] | None = None) -> int:
    """The ``--signal`` lead time that fits the job's time limit.

    A lead close to the limit makes Slurm warn the job as it starts: the sidecar then
    checkpoints and requeues it at once, again each attempt, until the crash-loop breaker
    stops it (2-minute sweep tasks with the default 120 s, seen on 25.11). The default
    shrinks to half of what the limit leaves after Slurm's 60 s; a lead the spec sets is
    kept with a note when it is shorter than the limit, refused when it is not.

    Raises:
        PlanError: ``checkpoint.signal_lead_time`` was set to the time limit or more.
    """
    lead = spec.checkpoint.signal_lead_time
    seconds = spec.resources.time_seconds
    if seconds is None or seconds > lead + SLURM_SIGNAL_EARLY:
        return lead
    fits = max(0, (seconds - SLURM_SIGNAL_EARLY) // 2)
    if "signal_lead_time" not in spec.checkpoint.model_fields_set:
        if notes is not None:
            notes.append(
                f"checkpoint.signal_lead_time: the default {lead} s does not fit a time limit "
                f"of {seconds} s (Slurm warns up to {SLURM_SIGNAL_EARLY} s early): {fits} s"
            )
        return fits
    if lead >= seconds:
        raise PlanError(
            f"checkpoint.signal_lead_time: {lead} s is not shorter than the time limit, "
            f"{seconds} s (resources.time): the job would be told to stop as it starts",
            hint=f"set signal_lead_time to {fits} or less (Slurm warns up to "
            f"{SLURM_SIGNAL_EARLY} s early), or ask for more time",
        )
    if notes is not None:
        notes.append(
            f"checkpoint.signal_lead_time: {lead} s of a {seconds} s time limit; Slurm warns "
            f"up to {SLURM_SIGNAL_EARLY} s early, so the warning may come {seconds - lead} s "
            "or less after the start"
        )
    return lead
