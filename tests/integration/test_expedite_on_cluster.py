"""Issue 48: Slurm 25.11's expedited requeue, on a site that asks for it
(``expedited_requeue: true``; the 25.11+ test clusters set
``SlurmctldParameters=enable_expedited_requeue``).

With ``--requeue=expedite`` Slurm requeues a job after *any* non-zero exit and holds it
("job requeued in held state", job_mgr.c, 25.11.7): a job that fails must still end FAILED.
Here, a command that exits 3 under the sidecar (which clears the job's Requeue first) and
a job that fails before its sidecar runs (no workdir on the node: the batch script's trap
clears it) both end FAILED, never held. The pyslurm backend cannot ask for the flag
(pyslurm 25.11.2): its job is plain ``--requeue`` and the plan says so. The node failure
itself, where the flag pays, is in test_faults_on_cluster.py (it kills a node).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hpclaunch.slurm.text import key_values

from .conftest import Cli, SlurmCluster, wait_state
from .faults import expedited_site

pytestmark = [pytest.mark.slurm, pytest.mark.backends]

# REQUEUE_HOLD: what a failing expedited job becomes when its Requeue is left on.
ENDS = {"COMPLETED", "FAILED", "CANCELLED", "OUT_OF_MEMORY", "TIMEOUT", "REQUEUE_HOLD"}


@pytest.fixture
def expedited(slurm_cluster: SlurmCluster, tmp_path: Path) -> Cli:
    """The CLI on site-configs/local.yaml with ``expedited_requeue: true``."""
    if slurm_cluster.release < (25, 11):
        pytest.skip(f"Slurm {slurm_cluster.release} has no expedited requeue (25.11 added it)")
    return Cli(tmp_path / "state", site=str(expedited_site(tmp_path)))


def ended_failed(cli: Cli, spec: Path) -> dict[str, str]:
    """Submit ``spec``, wait for its end, check that it is FAILED (not REQUEUE_HOLD) and
    return ``scontrol show job``'s fields of it."""
    submitted = cli("submit", str(spec))
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.split()[0]
    try:
        done = wait_state(cli, job_id, ENDS, timeout=120)
        assert done["state"] == "FAILED", done
        out = subprocess.run(
            ["scontrol", "show", "job", "--oneliner", job_id], capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return key_values(out.stdout)
    finally:
        subprocess.run(["scancel", job_id], check=False, capture_output=True)


def test_a_failing_job_ends_failed_not_requeued_held(
    expedited: Cli, backend: str, write_spec: Callable[..., Path]
) -> None:
    spec = write_spec(command=[sys.executable, "-c", "import sys; sys.exit(3)"], launcher="srun")
    dry = expedited("submit", "--dry-run", str(spec))
    assert dry.returncode == 0, dry.stderr
    if backend == "cli":
        assert "#SBATCH --requeue=expedite" in dry.stdout
    else:
        assert "site expedited_requeue: not with this backend" in dry.stdout
        assert "#SBATCH --requeue\n" in dry.stdout
    job = ended_failed(expedited, spec)
    assert job["JobState"] == "FAILED", job
    assert job["Restarts"] == "0", job  # never requeued, so never held
    assert job.get("ExpeditedRequeue", "No") == ("Yes" if backend == "cli" else "No"), job
    # the sidecar turned the job's Requeue off before it exited 3 (cli: or it would be
    # held); the pyslurm job never needed it
    assert job["Requeue"] == ("0" if backend == "cli" else "1"), job
    assert job["ExitCode"] == "3:0", job


def test_a_job_that_fails_before_its_sidecar_ends_failed_too(
    expedited: Cli, backend: str, write_spec: Callable[..., Path], tmp_path: Path
) -> None:
    if backend != "cli":
        pytest.skip("the pyslurm backend asks no expedited requeue (the test above)")
    # tmp_path is on this host only: the node has no such directory, and the batch script
    # exits 78 before the sidecar runs (planning/script_start.py)
    spec = write_spec(command=["true"], launcher="srun", workdir=str(tmp_path))
    job = ended_failed(expedited, spec)
    assert (job["Restarts"], job["Requeue"], job["ExitCode"]) == ("0", "0", "78:0"), job
    assert job["ExpeditedRequeue"] == "Yes", job
