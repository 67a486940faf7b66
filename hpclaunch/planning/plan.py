"""Turn a spec and a site into a submission plan: the sbatch options and why each was chosen.

:func:`build_plan` is pure: the same spec, site, submission id and home directory always give
the same plan, so plans can be compared in tests and shown before anything is submitted.

Job directory and logs
    Every submission gets a private directory ``<job_root>/<submission_id>`` (mode 0700). It
    holds the batch script (``job.sbatch``) and ``slurm-<jobid>.out``, the batch shell's own
    output (sbatch ``--output`` with ``%j``; Slurm opens it before the script runs, so the
    directory must exist at submission). Slurm keeps the job id across requeues and has no
    per-attempt filename pattern, so the script itself redirects everything after its first
    lines to ``<log_dir>/attempt-<SLURM_RESTART_COUNT>.log`` (``log_dir`` is the spec's
    ``output_dir``, else the job directory): a requeued job never overwrites the log of the
    attempt before it. ``--open-mode=append`` keeps ``slurm-<jobid>.out`` across attempts too.
"""

from __future__ import annotations

import posixpath
import re
import sys
import uuid
from dataclasses import dataclass, field

from hpclaunch import jobdir
from hpclaunch.config.site import Partition, SiteConfig, TierPolicy
from hpclaunch.errors import PlanError
from hpclaunch.jobdir import JobDir
from hpclaunch.jobspec.idle import Idle
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.jobspec.notify import Notify
from hpclaunch.jobspec.tracking import Tracking
from hpclaunch.planning.container import ContainerPlan, plan_container
from hpclaunch.planning.launch import (
    container_env,
    elastic_env,
    launch_prefix,
    processes_note,
)
from hpclaunch.planning.partition import choose_partition, gpu_option, tasks_per_node
from hpclaunch.planning.quota import place
from hpclaunch.planning.signals import requeue_options
from hpclaunch.planning.tracking import tracking_env, tracking_note, tracking_of
from hpclaunch.slurm.sbatch_options import normalise_flag

__all__ = ["SubmissionPlan", "build_plan", "new_submission_id"]

_SUBMISSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Launchers started through the sidecar (hpclaunch.supervise): rendezvous, ranks, signals.
_SIDECAR_LAUNCHERS = frozenset({"srun", "torchrun", "deepspeed", "accelerate"})


@dataclass(frozen=True)
class SubmissionPlan:
    """Everything needed to render and submit one job; built by :func:`build_plan`.

    Attributes:
        submission_id: hpclaunch's id for this submission (uuid4 hex); tags the job as
            ``--comment=hpclaunch:<id>`` and names the job directory.
        job_name: The Slurm job name.
        sbatch_options: Ordered ``(flag, value)`` pairs, e.g. ``("--qos", "low")``;
            ``value`` is ``None`` for flags without a value (``--requeue``).
        job_dir: Absolute path of the private job directory.
        log_dir: Absolute path of the directory for per-attempt logs.
        script_path: Where the batch script is written (inside ``job_dir``).
        workdir: Absolute directory the job starts in (``--chdir``).
        command: The argv to run (the spec's ``command``, or its ``script`` made absolute
            against the workdir, followed by its ``args``).
        launch_prefix: What runs ``command``: ``()`` for launcher ``none``; for the others
            the sidecar, ``(<python>, "-m", "hpclaunch.supervise", "run", ...)``, which
            starts the launcher once per node with srun. See :attr:`launch_argv`.
        env: User environment variables, in spec order.
        runtime_env: ``HPCLAUNCH_*`` variables hpclaunch sets for the job and the sidecar.
        launcher: ``none``, ``srun``, ``torchrun``, ``deepspeed`` or ``accelerate``.
        container: The spec's container as argv (:mod:`hpclaunch.planning.container`).
        notify: The spec's ``notify:`` (a webhook's name, never its URL): the submit writes
            the job's private ``notify/config.json`` (``jobdir.NOTIFY_CONFIG``) from it.
        tracking: The trackers (the spec's, with the site's defaults): the submit makes
            the MLflow run(s) (:mod:`hpclaunch.ops.tracking`).
        modules: Environment modules to load first (the site's, then the spec's).
        module_system: The site's module system (``lmod``, ``tcl`` or ``none``).
        venv: Absolute path of the virtual environment to activate, if any.
        conda: The conda environment to activate, if any.
        scratch_var: ``(VAR, rest)`` when the site's scratch is ``$VAR/rest``: the job
            exports ``HPCLAUNCH_SCRATCH`` from a variable only the compute node knows.
        site_name, partition, qos, account, tier, preemptible: The choices made.
        quota: ``in-quota``, ``over-quota`` or ``none`` (the site has no quotas); see
            :mod:`hpclaunch.planning.quota`.
        quota_warning: One line for the user when a non-preemptible tier's job is placed
            over-quota because its project's guarantee is used up (``None`` otherwise).
        notes: Human-readable reasons for the choices ("tier low → QOS low, ...").
        sweep_params: A sweep's params file (:mod:`hpclaunch.planning.sweep`): the script then runs
            as an array task whose point is its first argument (the array's offset) plus
            ``SLURM_ARRAY_TASK_ID``, logging to ``<log_dir>/tasks/<point>/``.
        sweep_pack: Points per array task (``sweep.pack``): with more than one, the
            script's index is the task's pack, it logs to ``<log_dir>/packs/<pack>/`` and
            each point to its own ``tasks/<point>/`` (:mod:`hpclaunch.supervise.sweep_pack`).
        slurm_bin: The site's directory of Slurm commands (site config ``slurm_bin``), put
            first on the job's ``PATH`` so its ``srun`` and the sidecar's ``scontrol`` and
            ``squeue`` are the cluster's own; ``None``: the ``PATH`` the job inherits.
    """

    submission_id: str
    job_name: str
    sbatch_options: tuple[tuple[str, str | None], ...]
    job_dir: str
    log_dir: str
    script_path: str
    workdir: str
    command: tuple[str, ...]
    launch_prefix: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    runtime_env: tuple[tuple[str, str], ...]
    launcher: str
    modules: tuple[str, ...]
    venv: str | None
    site_name: str
    partition: str
    qos: str
    account: str | None
    tier: str
    preemptible: bool
    notes: tuple[str, ...] = field(default=())
    quota: str = "none"
    quota_warning: str | None = None
    module_system: str = "none"
    conda: str | None = None
    scratch_var: tuple[str, str] | None = None
    sweep_params: str | None = None
    sweep_pack: int = 1
    slurm_bin: str | None = None
    container: ContainerPlan | None = None
    notify: Notify | None = None
    tracking: Tracking | None = None

    @property
    def expedited(self) -> bool:
        """Whether the job asks Slurm's expedited requeue (``--requeue=expedite``)."""
        return ("--requeue", "expedite") in self.sbatch_options

    @property
    def launch_argv(self) -> tuple[str, ...]:
        """The argv the batch script execs: the launcher prefix, then the command."""
        return self.launch_prefix + self.command

    def describe(self) -> str:
        """The plan's notes as a bullet list, for ``--dry-run`` and ``render --explain``."""
        return "\n".join(f"- {note}" for note in self.notes)

    def option(self, flag: str) -> str | None:
        """The value of ``flag`` (``KeyError`` if the plan has no such flag)."""
        for name, value in self.sbatch_options:
            if name == flag:
                return value
        raise KeyError(flag)


def new_submission_id() -> str:
    """A fresh submission id (uuid4 hex). Callers pass it to :func:`build_plan`."""
    return uuid.uuid4().hex


def build_plan(
    spec: JobSpec,
    site: SiteConfig,
    *,
    submission_id: str,
    home: str,
    cwd: str | None = None,
    python: str | None = None,
    quota_used: int | None = None,
    quota_mode: str = "allow",
    quota_gpus: int | None = None,
    can_expedite: bool = True,
) -> SubmissionPlan:
    """Decide how ``spec`` runs on ``site``.

    Args:
        spec: The validated job spec.
        site: The validated site config.
        submission_id: From :func:`new_submission_id` (fixed in tests).
        home: The submitting user's home on the cluster; expands ``~`` in paths.
        cwd: Where relative ``workdir`` paths start (the submit directory). ``None``:
            they start from the job directory, which is also the default workdir.
        python: The interpreter that runs the sidecar inside the job (default:
            :func:`job_python`). It must exist at the same path on the compute nodes: the
            project's environment is on a shared filesystem.
        quota_used: GPUs the project's in-quota jobs hold or wait for now (``None``:
            unknown, taken as 0); see :mod:`hpclaunch.planning.quota`.
        quota_mode: ``allow`` (over the guarantee: over-quota) or ``strict`` (in-quota,
            waiting for the project's GPUs).
        quota_gpus: The GPUs the submission holds at once when that is not one job's (a
            sweep's concurrent tasks).
        can_expedite: The backend can ask for the site's ``expedited_requeue`` (pyslurm
            cannot): otherwise the job gets plain ``--requeue``, with a note.

    Returns:
        The plan. Pure: reads no files and no environment.

    Raises:
        PlanError: The site cannot run the spec: unknown tier, no partition with that GPU
            type, too many GPUs/CPUs per node, too many nodes, time over the limit, modules
            on a site without a module system, or a launcher that is not available yet.
            The message starts with the spec's field path; the hint says what to change.
    """
    if not _SUBMISSION_ID.match(submission_id):
        raise PlanError(
            f"invalid submission id {submission_id!r}",
            hint="use 1 to 64 letters, digits, _ and - (a sweep's id: at most 58, each "
            "array adds -a<N>)",
        )
    if spec.modules and site.module_system == "none":
        raise PlanError(
            f"modules: site {site.name} has no module system (module_system: none)",
            hint="remove modules from the spec, or set module_system in the site config",
        )
    notes: list[str] = []
    tier_policy = _tier_policy(spec, site)
    partition = choose_partition(spec, site, tier_policy, notes)
    job_dir, log_dir, workdir = _paths(spec, site, submission_id, home, cwd)
    notes.append(f"job directory {job_dir}; per-attempt logs in {log_dir}/attempt-N.log")
    placement = place(spec, site, tier_policy, quota_used, mode=quota_mode, gpus=quota_gpus)
    notes += placement.notes
    policy, account = placement.policy, placement.account
    if spec.resources.time is None:
        notes.append(f"no time given: Slurm uses partition {partition.name}'s default limit")
    python = job_python(site, home, python)
    if spec.launcher in _SIDECAR_LAUNCHERS:
        notes.append(
            f"launcher {spec.launcher}: started by the sidecar ({python} -m "
            "hpclaunch.supervise), once per node with srun; that interpreter must exist at the "
            "same path on the compute nodes (a shared filesystem)"
        )

    opts: list[tuple[str, str | None]] = [
        ("--job-name", spec.name),
        ("--comment", f"hpclaunch:{submission_id}"),
    ]
    if partition.select_by == "partition":
        opts.append(("--partition", partition.name))
    opts.append(("--qos", policy.qos))
    opts += [("--account", account)] if account else []
    opts += [("--nice", str(placement.nice))] if placement.nice else []
    opts += _resource_options(spec, site, partition, notes)
    opts += [
        ("--chdir", workdir),
        # %j: the job id. Slurm expands %-patterns in --output, so a literal % is %%.
        ("--output", posixpath.join(job_dir.replace("%", "%%"), "slurm-%j.out")),
        ("--open-mode", "append"),
    ]
    if spec.launcher != "none":
        notes.append(processes_note(spec))
    expedite = _expedites(spec, site, can_expedite, notes)
    requeue, lead = requeue_options(spec, policy, notes, expedite=expedite)
    opts += requeue
    opts += _dependency_options(spec, notes)
    opts += _extra_options(spec, notes)
    modules = (*site.modules, *spec.modules)
    if modules:
        notes.append(f"modules ({site.module_system}): {', '.join(modules)}")
    if spec.conda:
        notes.append(f"conda environment {spec.conda}: activated after the modules")
    scratch_var, scratch_env = _scratch(site, home)
    runtime_env = _runtime_env(
        spec, policy, submission_id, job_dir, log_dir, home, cwd, lead, site.idle
    )
    if expedite:
        # The sidecar clears the job's Requeue before it ends it with an error (signals.py;
        # supervise/requeue.py EXPEDITED_ENV, not imported: it would load the sidecar's
        # Slurm modules into every plan).
        runtime_env += (("HPCLAUNCH_EXPEDITED_REQUEUE", "1"),)
    if spec.retry is not None:
        # The partition's nodes' memory caps what an OOM retry may ask for.
        runtime_env += (("HPCLAUNCH_RETRY", spec.retry.env_value(partition.mem_per_node)),)
        notes.append(spec.retry.describe(partition.mem_per_node))
    tracking = tracking_of(spec, site.tracking, home)
    if tracking is not None:
        tracked = tracking_env(tracking, job_dir, spec.name)
        runtime_env += tuple(tracked)
        notes.append(tracking_note(tracking, tracked))
    container = None
    if spec.container is not None:
        ckpt_dir = dict(runtime_env)["HPCLAUNCH_CHECKPOINT_DIR"]
        container = plan_container(
            spec.container,
            site,
            own_paths=(job_dir, log_dir, ckpt_dir),
            cwd=workdir,
            home=home,
            env_names=tuple(spec.env),
            job_dir=job_dir,
            python=python,
            venv=spec.venv,
        )
        notes += container.notes
        runtime_env += container.env + container_env(container, spec.launcher)

    return SubmissionPlan(
        submission_id=submission_id,
        job_name=spec.name,
        sbatch_options=tuple(opts),
        job_dir=job_dir,
        log_dir=log_dir,
        script_path=JobDir(job_dir).script,
        workdir=workdir,
        command=_command(spec, home, workdir),
        launch_prefix=launch_prefix(spec, python, container),
        env=tuple(spec.env.items()),
        runtime_env=runtime_env + scratch_env,
        launcher=spec.launcher,
        modules=modules,
        module_system=site.module_system,
        slurm_bin=site.slurm_bin,
        venv=_expand(spec.venv, home, workdir, "venv") if spec.venv else None,
        conda=spec.conda,
        scratch_var=scratch_var,
        site_name=site.name,
        partition=partition.name,
        qos=policy.qos,
        account=account,
        tier=spec.tier,
        preemptible=policy.preemptible,
        notes=tuple(notes),
        quota=placement.quota,
        quota_warning=placement.warning,
        container=container,
        notify=spec.notify,
        tracking=tracking,
    )


def _paths(
    spec: JobSpec, site: SiteConfig, submission_id: str, home: str, cwd: str | None
) -> tuple[str, str, str]:
    """(job_dir, log_dir, workdir), all absolute."""
    job_dir = posixpath.join(_expand(site.job_root, home, None, "job_root"), submission_id)
    base = cwd or job_dir
    log_dir = _expand(spec.output_dir, home, base, "output_dir") if spec.output_dir else job_dir
    workdir = _expand(spec.workdir, home, base, "workdir") if spec.workdir else base
    return job_dir, log_dir, workdir


def _command(spec: JobSpec, home: str, workdir: str) -> tuple[str, ...]:
    if spec.script is None:
        return spec.argv
    # An absolute path, so that neither PATH nor the launcher's cwd can pick another file.
    return (_expand(spec.script, home, workdir, "script"), *spec.args)


def _resource_options(
    spec: JobSpec, site: SiteConfig, partition: Partition, notes: list[str]
) -> list[tuple[str, str | None]]:
    res = spec.resources
    opts: list[tuple[str, str | None]] = [
        ("--nodes", str(res.nodes)),
        ("--ntasks-per-node", str(tasks_per_node(spec))),
    ]
    if res.cpus_per_gpu is not None:
        # sbatch(1): --cpus-per-gpu and --cpus-per-task are mutually exclusive.
        opts.append(("--cpus-per-gpu", str(res.cpus_per_gpu)))
    else:
        opts.append(("--cpus-per-task", str(res.cpus_per_task)))
    if res.gpus_per_node:
        opts.append(gpu_option(spec, site, partition))
    if res.mem:
        opts.append(("--mem", res.mem))
        notes.append(_mem_note(res.mem, res.mem_mb or 0))
    if res.time:
        opts.append(("--time", res.time))
    constraint = _constraint(partition.constraint, res.constraint)
    if constraint:
        opts.append(("--constraint", constraint))
        if partition.constraint:
            how = "instead of --partition" if partition.select_by == "constraint" else "too"
            notes.append(
                f"--constraint={constraint}: partition {partition.name} is selected by "
                f"feature {partition.constraint!r} ({how})"
            )
        else:
            notes.append(f"--constraint={constraint}: the spec's node features")
    if res.exclusive:
        opts.append(("--exclusive", None))
        notes.append("--exclusive: whole nodes, shared with no other job")
    return opts


def _mem_note(mem: str, mb: int) -> str:
    """``--mem`` in words; a bare number is megabytes (sbatch's default unit)."""
    note = f"--mem={mem}: {mb:,} MB per node"
    if mb < 100:
        note += f" (a number without a unit is megabytes: did you mean {mem[:-1]}G?)"
    return note


def _constraint(site_part: str | None, spec_part: str | None) -> str | None:
    """Both constraints must hold: ``site&(spec)`` (sbatch(1) --constraint: ``&`` is AND,
    brackets group)."""
    if site_part and spec_part:
        inner = spec_part if re.fullmatch(r"[A-Za-z0-9_.:-]+", spec_part) else f"({spec_part})"
        return f"{site_part}&{inner}"
    return site_part or spec_part


def _dependency_options(spec: JobSpec, notes: list[str]) -> list[tuple[str, str | None]]:
    if not spec.dependencies:
        return []
    by_type: dict[str, list[str]] = {}
    for dep in spec.dependencies:
        by_type.setdefault(dep.type, []).append(dep.job)
    # sbatch(1) --dependency: "type:id[:id...]", types joined by "," must all hold.
    value = ",".join(f"{kind}:{':'.join(jobs)}" for kind, jobs in by_type.items())
    notes.append(
        f"--dependency={value}: starts when all hold; one that can never hold leaves the job "
        "PENDING (reason DependencyNeverSatisfied) until cancelled, unless the site sets "
        "kill_invalid_depend (Slurm 22.05)"
    )
    return [("--dependency", value)]


def _extra_options(spec: JobSpec, notes: list[str]) -> list[tuple[str, str | None]]:
    opts: list[tuple[str, str | None]] = []
    for key, value in spec.sbatch_extra.items():
        flag, inline = normalise_flag(key)  # the spec validated every key already
        opts.append((flag, inline if value is None else value))
    if opts:
        shown = ", ".join(f if v is None else f"{f}={v}" for f, v in opts)
        notes.append(f"sbatch_extra, passed as written: {shown}")
    return opts


def _scratch(
    site: SiteConfig, home: str
) -> tuple[tuple[str, str] | None, tuple[tuple[str, str], ...]]:
    """(``($VAR, rest)`` for the template, or a literal ``HPCLAUNCH_SCRATCH`` entry)."""
    if site.scratch is None:
        return None, ()
    if site.scratch.startswith("$"):
        var, _, rest = site.scratch[1:].partition("/")
        return (var, f"/{rest}" if rest else ""), ()
    return None, (("HPCLAUNCH_SCRATCH", _expand(site.scratch, home, None, "scratch")),)


def _tier_policy(spec: JobSpec, site: SiteConfig) -> TierPolicy:
    policy = site.tiers.get(spec.tier)
    if policy is None:
        known = ", ".join(site.tiers) or "none"
        raise PlanError(
            f"tier: site {site.name} has no tier {spec.tier!r} (tiers: {known})",
            hint="pick one of the site's tiers, or add this one under tiers: in the site config",
        )
    return policy


def _expedites(spec: JobSpec, site: SiteConfig, can_expedite: bool, notes: list[str]) -> bool:
    """Whether the job asks for the site's expedited requeue (a job with a sidecar only)."""
    if not site.expedited_requeue or spec.launcher == "none" or spec.checkpoint.max_requeues <= 0:
        return False
    if not can_expedite:
        notes.append(
            "site expedited_requeue: not with this backend (pyslurm's JobSubmitDescription "
            "has no field for --requeue=expedite, 25.11.2; the local backend has no Slurm): "
            "plain --requeue; the cli backend asks for it"
        )
        return False
    return True


def _runtime_env(
    spec: JobSpec,
    policy: TierPolicy,
    submission_id: str,
    job_dir: str,
    log_dir: str,
    home: str,
    cwd: str | None,
    lead: int,
    site_idle: Idle | None = None,
) -> tuple[tuple[str, str], ...]:
    env = [
        ("HPCLAUNCH_SUBMISSION_ID", submission_id),
        ("HPCLAUNCH_JOB_DIR", job_dir),
        ("HPCLAUNCH_LOG_DIR", log_dir),
        ("HPCLAUNCH_TIER", spec.tier),
        ("HPCLAUNCH_MAX_REQUEUES", str(spec.checkpoint.max_requeues)),
        ("HPCLAUNCH_CHECKPOINT_SIGNAL", spec.checkpoint.signal),
        ("HPCLAUNCH_SIGNAL_LEAD", str(lead)),
        # The sidecar/trainer control channel (hpclaunch/supervise/control.py).
        ("HPCLAUNCH_CONTROL_DIR", JobDir(job_dir).control),
    ]
    if spec.elastic is not None:
        env.append(("HPCLAUNCH_ELASTIC", elastic_env(spec)))
    idle = spec.idle or site_idle  # the spec's guard, else the site's
    if idle is not None and spec.launcher != "none" and spec.resources.gpus_per_node:
        env += idle.env()
    if spec.notify is not None:
        # Where the notices go: a private file the submit writes (the URL is a secret and
        # stays out of the script and of the environment Slurm records).
        env.append(("HPCLAUNCH_NOTIFY", posixpath.join(job_dir, jobdir.NOTIFY_CONFIG)))
    if spec.checkpoint.dir:
        ckpt_dir = _expand(spec.checkpoint.dir, home, cwd or job_dir, "checkpoint.dir")
    else:
        ckpt_dir = JobDir(job_dir).checkpoints
    env.append(("HPCLAUNCH_CHECKPOINT_DIR", ckpt_dir))
    if policy.preemptible and policy.grace:
        # The QOS GraceTime: how long the sidecar lets the trainer checkpoint at preemption.
        env.append(("HPCLAUNCH_GRACE", str(policy.grace)))
    return tuple(env)


def job_python(site: SiteConfig, home: str, python: str | None = None) -> str:
    """The interpreter jobs run hpclaunch's own steps with: ``python`` when given, else the
    site's ``python`` (``~`` expanded with ``home``), else the one running now."""
    if python is not None:
        return python
    if site.python is not None:
        return _expand(site.python, home, None, "site python")

    return sys.executable


def needs_python(spec: JobSpec) -> bool:
    """Whether the job runs hpclaunch inside (the sidecar, or a sweep's task step)."""
    return spec.launcher in _SIDECAR_LAUNCHERS or spec.sweep is not None


def _expand(path: str, home: str, base: str | None, what: str) -> str:
    """Expand ``~`` with ``home`` and make ``path`` absolute against ``base``."""
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    elif path.startswith("~"):
        raise PlanError(f"{what}: {path!r}: only '~/' (your own home) can be expanded")
    if "\\" in path:
        # sbatch turns off all %-patterns in a path that contains a backslash.
        raise PlanError(f"{what}: {path!r}: backslashes are not supported in paths")
    if not posixpath.isabs(path):
        if base is None:
            raise PlanError(f"{what}: {path!r} must be absolute or start with '~/'")
        path = posixpath.join(base, path)
    return posixpath.normpath(path)
