"""Jobs in containers on the real cluster, with the real runtimes Debian 12 has.

The test cluster's nodes have Charliecloud 0.31 (``ch-run``) and crun for Slurm's own OCI
support (``etc/*/oci.conf``); ``lib/images.sh`` built ``debian-python`` (a Charliecloud
directory image) and ``debian-python.oci`` (a bundle of the same root), each holding
``/etc/hpclaunch-image``, which the nodes themselves do not have: a command that can read
it ran inside. site-configs/local.yaml offers both (``containers:``).

* ``charliecloud``: torchrun, 2 nodes, tier low, a GPU per node, the trainer inside the
  image (the sidecar outside): preempted by a critical job, checkpointed, requeued, resumed
  with final weights equal to an uninterrupted bare-metal twin's, bit for bit.
* ``oci``: ``srun --container=BUNDLE`` (launcher none; crun in the node containers, runc on
  the native cluster, whose cgroup v1+v2 "hybrid" crun 1.8 refuses): the command runs in the
  job's own bundle (the image's, with the job's mounts), sees its 2 GPUs
  (``CUDA_VISIBLE_DEVICES``), a spec mount, the job directory and the venv's python, and
  starts in the asked ``workdir``.
* ``apptainer`` and ``pyxis``, which Debian 12 lacks, through stand-ins that record how
  they were called and run the command on the node: ``tests/integration/stubs/apptainer``
  first on the job's PATH, and a SPANK plugin with pyxis' srun options
  (``docker/slurm-cluster/pyxis-stub``). A 2-node torchrun each: every node's call is
  exactly what the plan says (binds, workdir, image, env), and training completes.
* ``site check`` finds both runtimes on a node; a runtime the site lacks and an image that
  does not exist stop ``submit`` with exit 2 and nothing queued.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import hostlist  # type: ignore[import-untyped]  # python-hostlist ships no types
import pytest
import yaml

from .cluster import SlurmCluster
from .conftest import TORCHRUN_MEM, Cli
from .test_sidecar_on_cluster import (
    TRAIN,
    VENV,
    Jobs,
    _assert_exact_resume,
    _preempt,
)
from .test_sidecar_on_cluster import _submit as submit

pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.exclusive]

IMAGE = "debian-python"  # in the site's image_dir
IMAGE_DIR = Path("/var/cache/hpclaunch-cluster/images")
REPO = Path(__file__).resolve().parents[2]
STUBS = Path(__file__).resolve().parent / "stubs"
PYXIS_IMAGE = "nvcr.io#nvidia/pytorch:24.01-py3"  # an enroot reference, as pyxis takes it
PYXIS_SEEN = (
    'env | grep ^PYXIS_STUB_ | LC_ALL=C sort >"$0/$(hostname)"; pwd >>"$0/$(hostname)"; exec "$@"'
)
# Each process of the trainer first records what /etc/hpclaunch-image says where it runs
# (one file per node and attempt), then execs the trainer.
SEEN = 'cat /etc/hpclaunch-image >"$0/image-$(hostname)-$HPCLAUNCH_ATTEMPT" 2>&1; exec "$@"'


@pytest.fixture(scope="module")
def jobs(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jobs]:
    tmp = tmp_path_factory.mktemp("containers")
    cli = Cli(tmp / "state")
    shared = Path.home() / ".hpclaunch-it" / uuid.uuid4().hex[:8]
    shared.mkdir(parents=True)

    def train(key: str) -> list[str]:
        out = shared / key
        out.mkdir()
        return [*TRAIN, "--log-dir", str(out), "--hash-out", str(out / "final.sha256")]

    # 10 minutes: a low-tier job is warned 120 s before its limit, and under load torchrun in
    # the image once took 150 s to its first step (clean-clone run 24), so that a 5-minute
    # limit warned it before the preemption this module makes.
    res = {"nodes": 2, "gpus_per_node": 1, "time": "00:10:00", "mem": TORCHRUN_MEM}
    ids = {
        "charliecloud": submit(
            cli,
            tmp,
            "charliecloud",
            command=["sh", "-c", SEEN, str(shared / "charliecloud"), *train("charliecloud")],
            launcher="torchrun",
            tier="low",
            venv=VENV,
            resources=res,
            container={"image": IMAGE},
        ),
        "twin": submit(
            cli,
            tmp,
            "twin",
            command=train("twin"),
            launcher="torchrun",
            venv=VENV,
            resources={**res, "gpus_per_node": 0},
        ),
        "oci": submit(
            cli,
            tmp,
            "oci",
            command=["sh", "-c", OCI_SEEN],
            resources={"gpus_per_node": 2, "time": "00:02:00", "mem": "100M"},
            venv=VENV,
            container={
                "image": f"{IMAGE}.oci",
                "runtime": "oci",
                "workdir": "/srv",
                "mounts": [f"{_oci_data(shared)}:/data:ro"],
            },
        ),
    }
    # Apptainer: the stub (tests/integration/stubs/apptainer) first on the job's PATH, on
    # a site that offers apptainer too; the same history, so `jobs` finds its directory.
    site = yaml.safe_load((REPO / "site-configs" / "local.yaml").read_text())
    site["containers"]["runtimes"] += ["apptainer", "pyxis"]
    (tmp / "site.yaml").write_text(yaml.safe_dump(site))
    short = [*TRAIN[:3], "40", *TRAIN[4:]]
    ids["apptainer"] = submit(
        Cli(tmp / "state", site=str(tmp / "site.yaml")),
        tmp,
        "apptainer",
        command=[*short, "--log-dir", str(shared / "apptainer")],
        launcher="torchrun",
        venv=VENV,
        env={"PATH": f"{STUBS}:/usr/local/bin:/usr/bin:/bin"},
        resources={"nodes": 2, "time": "00:03:00", "mem": TORCHRUN_MEM},
        container={"image": IMAGE, "runtime": "apptainer", "env": {"STAGE": "a, b=$c"}},
    )
    # pyxis: the SPANK stand-in (docker/slurm-cluster/pyxis-stub) sets PYXIS_STUB_* in each
    # task from the srun options it got; each process records them, then trains.
    (shared / "pyxis").mkdir()
    ids["pyxis"] = submit(
        Cli(tmp / "state", site=str(tmp / "site.yaml")),
        tmp,
        "pyxis",
        command=["sh", "-c", PYXIS_SEEN, str(shared / "pyxis"), *short],
        launcher="torchrun",
        venv=VENV,
        resources={"nodes": 2, "time": "00:03:00", "mem": TORCHRUN_MEM},
        container={"image": PYXIS_IMAGE, "runtime": "pyxis", "env": {"STAGE": "x"}},
    )
    jobs = Jobs(cli, shared, ids, release=slurm_cluster.release)
    try:  # a set-up that fails still cancels its jobs (left running, they once took the
        # GPUs and the fair-share usage the next modules measure: clean-clone run 24)
        jobs.wait_progress("charliecloud", 30, timeout=300)
        jobs.preemptor = _preempt(ids["charliecloud"])
        yield jobs
    finally:
        subprocess.run(["scancel", jobs.preemptor], check=False, capture_output=True)
        shutil.rmtree(shared, ignore_errors=True)
        subprocess.run(["scancel", *ids.values()], check=False, capture_output=True)


def test_torchrun_in_charliecloud_preempted_resumes_exactly(jobs: Jobs) -> None:
    assert jobs.wait_final("charliecloud", 150) == "COMPLETED"
    _assert_exact_resume(jobs, "charliecloud", by_slurm=jobs.release >= (24, 11))
    # Both attempts trained inside the image, on both nodes of each.
    seen = {
        p.name: p.read_text().split()[0] for p in (jobs.shared / "charliecloud").glob("image-*")
    }
    assert len(seen) == 4, seen
    assert set(seen.values()) == {IMAGE}, seen
    assert {name.rsplit("-", 1)[1] for name in seen} == {"0", "1"}
    # ... and the sidecar did not: the batch script ran on the node, outside.
    log = jobs.cli.log(jobs.ids["charliecloud"])
    assert "ch-run" not in log.splitlines()[0]
    assert jobs.wait_final("twin", 60) == "COMPLETED"
    twin = (jobs.shared / "twin" / "final.sha256").read_text()
    assert (jobs.shared / "charliecloud" / "final.sha256").read_text() == twin


def test_oci_bundle_runs_the_command_inside_with_its_gpus_and_mounts(jobs: Jobs) -> None:
    """Inside the bundle with its GPUs and workdir; and (issue 27: none of these were
    mounted) the spec's mount, the job directory and the venv, whose python runs there."""
    assert jobs.wait_final("oci", 60) == "COMPLETED"
    log = jobs.cli.log(jobs.ids["oci"])
    assert f"\n{IMAGE} " in log, log
    gpus = next(line for line in log.splitlines() if line.startswith("gpus="))
    assert len(gpus.removeprefix("gpus=").split(",")) == 2, log
    assert "pwd=/srv" in log, log
    assert "data=from the spec's mount" in log, log
    assert "jobdir=ok" in log, log
    assert f"python={VENV} hpclaunch=ok" in log, log
    bundle = json.loads((jobs.job_dir("oci") / "oci-bundle" / "config.json").read_text())
    assert bundle["root"]["path"] == f"{IMAGE_DIR}/{IMAGE}.oci/rootfs"


def _oci_data(shared: Path) -> Path:
    data = shared / "oci-data"
    data.mkdir()
    (data / "marker").write_text("from the spec's mount\n")
    return data


# What the oci job shows of where it runs.
OCI_SEEN = (
    'cat /etc/hpclaunch-image; echo "gpus=$CUDA_VISIBLE_DEVICES"; echo "pwd=$(pwd)"; '
    'echo "data=$(cat /data/marker)"; test -d "$HPCLAUNCH_JOB_DIR" && echo jobdir=ok; '
    "python -c \"import sys, hpclaunch; print('python=' + sys.prefix, 'hpclaunch=ok')\""
)


def test_site_check_finds_the_runtimes_on_a_node(tmp_path: Path) -> None:
    out = Cli(tmp_path)("site", "check")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "container runtime charliecloud: " in out.stdout
    assert "/ch-run (on n" in out.stdout
    # crun in the node containers, runc on the native cluster (etc/*/oci-<mode>.conf)
    assert re.search(r"container runtime oci: /\S+/(crun|runc) \(on n\d\)", out.stdout)


def test_site_check_reports_a_runtime_the_nodes_lack(tmp_path: Path) -> None:
    site = yaml.safe_load((REPO / "site-configs" / "local.yaml").read_text())
    site["containers"]["runtimes"] = ["charliecloud", "apptainer"]
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(site))
    out = Cli(tmp_path, site=str(path))("site", "check")
    assert out.returncode == 1
    assert "container runtime 'apptainer' is not usable on n" in out.stdout
    assert "no apptainer on PATH" in out.stdout
    assert "containers.runtimes" in out.stdout


@pytest.mark.parametrize(
    ("container", "says"),
    [
        ({"image": IMAGE, "runtime": "apptainer"}, "its runtimes: charliecloud, oci"),
        ({"image": "no-such-image"}, "no-such-image"),
    ],
)
def test_container_errors_stop_submit(tmp_path: Path, container: dict[str, str], says: str) -> None:
    cli = Cli(tmp_path / "state")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        yaml.safe_dump({"name": "it-ct-bad", "command": ["true"], "container": container})
    )
    out = cli("submit", str(spec))
    assert out.returncode == 2, out.stdout + out.stderr
    assert says in out.stderr
    assert "Traceback" not in out.stderr
    assert not cli.submitted()


def _job_nodes(job_id: str) -> list[str]:
    """The nodes a finished job ran on, as sacct names them, expanded and sorted."""
    out = subprocess.run(
        ["sacct", "-j", job_id, "-X", "--noheader", "--parsable2", "--format=NodeList"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert len(out) == 1, out
    return sorted(hostlist.expand_hostlist(out[0]))


def test_torchrun_through_apptainer_is_called_as_planned(jobs: Jobs) -> None:
    """The stub records each call: one per node, each ``apptainer exec --nv`` with the
    site's and the job's mounts, the working directory, the image and then the launcher;
    the container's env reaches it as APPTAINERENV_*."""
    assert jobs.wait_final("apptainer", 120) == "COMPLETED"
    job_dir = jobs.job_dir("apptainer")
    calls = [json.loads(p.read_text()) for p in job_dir.glob("apptainer-call-*.json")]
    assert sorted(c["host"] for c in calls) == _job_nodes(jobs.ids["apptainer"]), calls
    assert len(calls) == 2, calls
    for call in calls:
        argv = call["argv"]
        assert argv[:2] == ["exec", "--nv"]
        binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--bind"]
        assert binds[:2] == ["/root:/root", "/home:/home"]
        # where the job starts (the repository), at its own path
        assert any(REPO.is_relative_to(b.split(":")[0]) for b in binds), binds
        at = argv.index("--pwd")
        assert argv[at + 1 : at + 3] == [str(REPO), str(IMAGE_DIR / IMAGE)]
        assert argv[at + 3] == "torchrun"  # the launcher runs inside, from the image's PATH
        assert call["env"] == {"APPTAINERENV_STAGE": "a, b=$c"}
    assert "done: 40 steps" in jobs.cli.log(jobs.ids["apptainer"])


def test_torchrun_through_pyxis_gets_the_planned_srun_options_on_each_node(jobs: Jobs) -> None:
    """srun accepted pyxis' options (the stand-in registers them as pyxis does) and each
    node's tasks got them: the image, the site's and the job's mounts, the workdir (where
    the tasks started), the container's env names for --container-env."""
    assert jobs.wait_final("pyxis", 120) == "COMPLETED"
    covered = any(REPO.is_relative_to(top) for top in ("/root", "/home"))
    mounts = "/root:/root,/home:/home" + ("" if covered else f",{REPO}:{REPO}")
    want = [
        "PYXIS_STUB_ENV=STAGE",
        f"PYXIS_STUB_IMAGE={PYXIS_IMAGE}",
        f"PYXIS_STUB_MOUNTS={mounts}",
        "PYXIS_STUB_MOUNT_HOME=1",
        f"PYXIS_STUB_WORKDIR={REPO}",
        str(REPO),
    ]
    # The nodes Slurm gave it (not always n1 and n2: the module's other jobs run beside it;
    # clean-clone run 11 on 22.05 put it elsewhere), each node's record the same.
    nodes = _job_nodes(jobs.ids["pyxis"])
    assert len(nodes) == 2, nodes
    assert sorted(p.name for p in (jobs.shared / "pyxis").iterdir()) == nodes
    for node in nodes:
        assert (jobs.shared / "pyxis" / node).read_text().splitlines() == want
    assert "done: 40 steps" in jobs.cli.log(jobs.ids["pyxis"])
