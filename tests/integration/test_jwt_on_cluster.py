"""Issue 48 (Slurm 26.05): a submitter's REST token, ``SLURM_JWT``, never reaches the job,
and nothing hpclaunch runs inside a job needs it.

With ``SLURM_JWT`` set, every Slurm command authenticates by JWT (``auth.c``: the variable
switches the auth plugin), and sbatch before 26.05 exports it into the job. There the
sidecar's ``srun`` failed at once ("Task launch for StepId=3.0 failed on node n1: Protocol
authentication error": slurmd takes no JWT), and a job that outlived its token could not
``scontrol requeue`` itself: here, a token of 10 s, an attempt that fails after 15 s and a
``retry:`` that requeues it. The batch script
unsets the token (the cli backend: sbatch exported it) and the pyslurm backend leaves it
out, as sbatch 26.05 does (``DEF_ENV_EXCLUDE``); the nodes authenticate with the cluster's
own AuthType. The test cluster takes JWT as a second way in (``AuthAltTypes=auth/jwt``,
etc/23.11+/slurm.conf); Debian's 22.05 is built without it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Run, SlurmCluster, wait_state

pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends]

#: Says whether it sees a token; fails (exit 3) on its first attempt once the token expired.
SEES = (
    "import os, sys, time\n"
    "attempt = int(os.environ['HPCLAUNCH_ATTEMPT'])\n"
    "seen = 'set' if 'SLURM_JWT' in os.environ else 'unset'\n"
    "print(f'attempt {attempt}: SLURM_JWT {seen}', flush=True)\n"
    "if attempt == 0:\n"
    "    time.sleep(15)\n"
    "    sys.exit(3)\n"
)


def _token(lifespan: int) -> str:
    out = subprocess.run(
        ["scontrol", "token", f"lifespan={lifespan}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().removeprefix("SLURM_JWT=")


def test_a_job_outlives_its_submitters_token(
    slurm_cluster: SlurmCluster,
    hpclaunch: Run,
    write_spec: Callable[..., Path],
    shared_dir: Path,
) -> None:
    if slurm_cluster.release < (23, 11):
        pytest.skip("Debian's Slurm 22.05 is built without auth/jwt: no token to hold")
    script = shared_dir / "sees.py"
    script.write_text(SEES)
    spec = write_spec(
        command=[sys.executable, str(script)],
        launcher="srun",
        retry={"times": 1, "when": [{"exit_code": [3]}], "backoff": 1},
    )
    token = _token(10)
    hpclaunch.env["SLURM_JWT"] = token  # as a REST user's shell has it: sbatch takes it
    submitted = hpclaunch("submit", str(spec))
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    del hpclaunch.env["SLURM_JWT"]  # it expires in 10 s; the submitter's own queries go on
    done = wait_state(hpclaunch, job_id, {"COMPLETED", "FAILED", "CANCELLED"}, timeout=120)
    assert done["state"] == "COMPLETED", done
    log = hpclaunch.log(job_id)
    assert "attempt 0: SLURM_JWT unset" in log, log
    assert "attempt 1: SLURM_JWT unset" in log, log
    shown = hpclaunch("events", job_id, "--json")
    ledger = json.loads(shown.stdout)["ledger"]
    # the sidecar's requeue, 15 s after the token expired, went through
    assert [e["event"] for e in ledger if e["event"].startswith("retry_")] == ["retry_scheduled"]
    ends = [e["reason"] for e in ledger if e["event"] == "attempt_end"]
    assert ends == ["user_error", "success"], ledger
    job_dir = Path(hpclaunch.submitted()[job_id]["job_dir"])
    for path in job_dir.rglob("*"):
        if path.is_file():
            assert token not in path.read_text(errors="replace"), path
