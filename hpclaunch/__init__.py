"""hpclaunch: from a job spec to a validated, submitted and watched Slurm job.

The three-line case (what ``hpclaunch submit train.yaml --wait`` does)::

    import hpclaunch

    job = hpclaunch.submit("train.yaml")   # or a dict, or a JobSpec
    print(job.id, job.wait().state)        # then job.logs(), job.cancel(), job.status()

With settings of your own: ``session = hpclaunch.Session(site="mysite", backend="pyslurm")``,
``session.submit(...)``, ``session.job("123")``.

The parts, imported lazily (``import hpclaunch`` loads nothing heavy), for other flows::

    from hpclaunch import load_spec, load_site, build_plan, new_submission_id
    from hpclaunch import LocalRunner, create_backend, wait_for, check_plan, load_capabilities

    spec = load_spec("job.yaml")
    site = load_site("local")
    plan = build_plan(spec, site, submission_id=new_submission_id(), home="/home/me")
    backend = create_backend("cli", LocalRunner(), site)
    problems = check_plan(plan, load_capabilities(LocalRunner(), site.name))  # vs the cluster
    job = backend.dryrun(plan)  # the script and sbatch argv, nothing submitted yet
    ref = backend.submit(job)   # no history row, no quota read, no dedupe: Session does those
    final = wait_for(backend, [ref])[ref]

``render`` itself is ``hpclaunch.planning.render.render``: it is not re-exported here because the
submodule of the same name would shadow it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name → the module that defines it.
_EXPORTS = {
    "Session": "hpclaunch.ops.session",
    "submit": "hpclaunch.ops.session",
    "Job": "hpclaunch.ops.job",
    "MapRun": "hpclaunch.ops.job",
    "SweepRun": "hpclaunch.ops.job",
    "Backend": "hpclaunch.backends.base",
    "JobRef": "hpclaunch.backends.base",
    "available_backends": "hpclaunch.backends",
    "create_backend": "hpclaunch.backends",
    "SiteConfig": "hpclaunch.config.site",
    "load_site": "hpclaunch.config.site",
    "CheckpointPolicy": "hpclaunch.jobspec.job",
    "JobSpec": "hpclaunch.jobspec.job",
    "Resources": "hpclaunch.jobspec.job",
    "load_spec": "hpclaunch.jobspec.job",
    "SubmissionPlan": "hpclaunch.planning.plan",
    "build_plan": "hpclaunch.planning.plan",
    "new_submission_id": "hpclaunch.planning.plan",
    "RenderedJob": "hpclaunch.planning.render",
    "JobInfo": "hpclaunch.slurm.jobs",
    "JobState": "hpclaunch.slurm.jobs",
    "wait_for": "hpclaunch.slurm.jobs",
    "CommandResult": "hpclaunch.transport.base",
    "Runner": "hpclaunch.transport.base",
    "LocalRunner": "hpclaunch.transport.local",
    "HpclaunchError": "hpclaunch.errors",
    "CallError": "hpclaunch.errors",
    "JobFailed": "hpclaunch.errors",
    "RemoteError": "hpclaunch.errors",
    "EnvironmentMismatch": "hpclaunch.errors",
    "WatchTimeout": "hpclaunch.errors",
    "BackendUnavailable": "hpclaunch.errors",
    "ConfigError": "hpclaunch.errors",
    "JobNotFound": "hpclaunch.errors",
    "PlanError": "hpclaunch.errors",
    "SpecError": "hpclaunch.errors",
    "SubmissionError": "hpclaunch.errors",
    "TransportError": "hpclaunch.errors",
    "Capabilities": "hpclaunch.slurm.capabilities",
    "discover": "hpclaunch.slurm.capabilities",
    "load_capabilities": "hpclaunch.store.capabilities",
    "Problem": "hpclaunch.planning.checks",
    "check_plan": "hpclaunch.planning.checks",
    "check_site": "hpclaunch.planning.checks",
}

__all__ = [
    "Backend",
    "BackendUnavailable",
    "CallError",
    "Capabilities",
    "CheckpointPolicy",
    "CommandResult",
    "ConfigError",
    "EnvironmentMismatch",
    "HpclaunchError",
    "Job",
    "JobFailed",
    "JobInfo",
    "JobNotFound",
    "JobRef",
    "JobSpec",
    "JobState",
    "LocalRunner",
    "MapRun",
    "PlanError",
    "Problem",
    "RemoteError",
    "RenderedJob",
    "Resources",
    "Runner",
    "Session",
    "SiteConfig",
    "SpecError",
    "SubmissionError",
    "SubmissionPlan",
    "SweepRun",
    "TransportError",
    "WatchTimeout",
    "__version__",
    "available_backends",
    "build_plan",
    "check_plan",
    "check_site",
    "create_backend",
    "discover",
    "load_capabilities",
    "load_site",
    "load_spec",
    "new_submission_id",
    "submit",
    "wait_for",
]

if TYPE_CHECKING:
    from hpclaunch.backends import available_backends, create_backend
    from hpclaunch.backends.base import Backend, JobRef
    from hpclaunch.config.site import SiteConfig, load_site
    from hpclaunch.errors import (
        BackendUnavailable,
        CallError,
        ConfigError,
        EnvironmentMismatch,
        HpclaunchError,
        JobFailed,
        JobNotFound,
        PlanError,
        RemoteError,
        SpecError,
        SubmissionError,
        TransportError,
        WatchTimeout,
    )
    from hpclaunch.jobspec.job import CheckpointPolicy, JobSpec, Resources, load_spec
    from hpclaunch.ops.job import Job, MapRun, SweepRun
    from hpclaunch.ops.session import Session, submit
    from hpclaunch.planning.checks import Problem, check_plan, check_site
    from hpclaunch.planning.plan import SubmissionPlan, build_plan, new_submission_id
    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.slurm.capabilities import Capabilities, discover
    from hpclaunch.slurm.jobs import JobInfo, JobState, wait_for
    from hpclaunch.store.capabilities import load_capabilities
    from hpclaunch.transport.base import CommandResult, Runner
    from hpclaunch.transport.local import LocalRunner


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hpclaunch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
