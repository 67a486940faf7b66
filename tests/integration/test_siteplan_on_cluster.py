"""``hpclaunch site plan|apply|check`` against the real local cluster, with a site config
whose QOS and accounts have names of their own (``t<hex>...``), removed afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from .cluster import SlurmCluster
from .conftest import HPCLAUNCH, REPO

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.exclusive]


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if check:
        assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
    return done


def qos_names() -> set[str]:
    return set(sh("sacctmgr", "-n", "-P", "show", "qos", "format=name").stdout.split())


@dataclass
class SiteUnderTest:
    prefix: str
    path: Path
    env: dict[str, str]
    data: dict[str, object]

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [HPCLAUNCH, "--site", str(self.path), "site", *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def rewrite(self, **fields: object) -> None:
        self.data.update(fields)
        self.path.write_text(yaml.safe_dump(self.data))


@pytest.fixture
def test_site(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[SiteUnderTest]:
    """A site with three tiers and two projects (root a user of both), all named
    ``t<hex>...``; everything with that prefix is deleted afterwards."""
    t = f"t{uuid.uuid4().hex[:6]}"
    data: dict[str, object] = {
        "name": t,
        "partitions": [
            {
                "name": "gpu",
                "gpus_per_node": 4,
                "cpus_per_node": 8,
                "max_time": 60,
                "max_nodes": 4,
                "default": True,
            },
            {
                "name": "debug",
                "gpus_per_node": 4,
                "cpus_per_node": 8,
                "max_time": 10,
                "max_nodes": 4,
            },
        ],
        "tiers": {
            "critical": {"qos": f"{t}-crit", "priority": 1000},
            "high": {
                "qos": f"{t}-high",
                "priority": 500,
                "max_wall": 30,
                "max_gpus_per_user": 8,
                "max_jobs_per_user": 20,
            },
            "low": {"qos": f"{t}-low", "priority": 0, "preemptible": True, "grace": 10},
        },
        "quotas": {f"{t}a": 2, f"{t}b": 1},
        "overquota": {"qos": f"{t}-oq", "priority": 50, "grace": 10},
    }
    path = tmp_path / f"{t}.yaml"
    path.write_text(yaml.safe_dump(data))
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    site = SiteUnderTest(t, path, env, data)
    # Not hpclaunch's: an admin's QOS, and the projects' accounts with root in them.
    sh("sacctmgr", "-i", "add", "qos", f"{t}-admins", "Description=made by the admins")
    for project in (f"{t}a", f"{t}b"):
        sh("sacctmgr", "-i", "add", "account", project, "cluster=hpclaunch", "Description=lab")
        sh("sacctmgr", "-i", "add", "user", "root", f"account={project}", "cluster=hpclaunch")
    try:
        yield site
    finally:
        accounts = sh("sacctmgr", "-n", "-P", "show", "account", "format=account").stdout.split()
        mine = [a for a in accounts if a.startswith(t)]
        if mine:
            sh("sacctmgr", "-i", "delete", "account", ",".join(mine), check=False)
        qos = sorted(q for q in qos_names() if q.startswith(t))
        if qos:
            sh("sacctmgr", "-i", "delete", "qos", ",".join(qos), check=False)


def test_plan_apply_then_nothing_to_do(test_site: SiteUnderTest) -> None:
    t = test_site.prefix
    plan = test_site("plan")
    assert plan.returncode == 0, plan.stderr
    assert f"sacctmgr -i add qos {t}-oq" in plan.stdout
    assert f"sacctmgr -i add account {t}a-oq cluster=hpclaunch parent=root" in plan.stdout
    assert f"sacctmgr -i add user root account={t}b-oq cluster=hpclaunch" in plan.stdout
    assert "# " in plan.stdout  # each command with its reason

    refused = test_site("apply")  # no TTY, no --yes
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "--yes" in refused.stderr

    applied = test_site("apply", "--yes")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert f"site {t} matches cluster hpclaunch" in applied.stdout

    again = test_site("plan")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == f"site {t} matches cluster hpclaunch: nothing to do"
    check = test_site("check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"{t}-admins" in qos_names()  # not hpclaunch's: never dropped

    assocs = {
        (row[0], row[1]): row[2:]
        for line in sh(
            "sacctmgr", "-n", "-P", "show", "assoc", "format=account,user,qos,defaultqos,grptres"
        ).stdout.splitlines()
        if (row := line.split("|"))[0].startswith(t)
    }
    oq_qos = [f"{t}-low,{t}-oq", f"{t}-oq", ""]
    assert assocs[(f"{t}a-oq", "")] == oq_qos
    assert assocs[(f"{t}a-oq", "root")] == oq_qos
    qos, _, grp = assocs[(f"{t}a", "")]
    assert grp == "gres/gpu=2"
    assert {f"{t}-crit", f"{t}-high"} <= set(qos.split(","))

    def test_only(account: str, qos: str) -> subprocess.CompletedProcess[str]:
        return sh(
            "sbatch",
            "--test-only",
            f"--account={account}",
            f"--qos={qos}",
            "--partition=debug",
            "--time=1",
            "--wrap=true",
            check=False,
        )

    assert test_only(f"{t}a-oq", f"{t}-oq").returncode == 0
    assert test_only(f"{t}a-oq", f"{t}-low").returncode == 0
    refused_qos = test_only(f"{t}a-oq", f"{t}-crit")
    assert refused_qos.returncode != 0
    assert "Invalid qos" in refused_qos.stderr
    assert test_only(f"{t}a", f"{t}-crit").returncode == 0


def test_plan_apply_and_check_from_python(test_site: SiteUnderTest) -> None:
    code = (
        "import sys, hpclaunch\n"
        "session = hpclaunch.Session(site=sys.argv[1])\n"
        "plan = session.site.plan()\n"
        "print('commands', len(plan.commands))\n"
        "left = session.site.apply(plan)\n"
        "print('left', len(left.changes))\n"
        "print('problems', len(session.site.check(refresh=True).problems))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(test_site.path)],
        cwd=REPO,
        env=test_site.env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    said = dict(line.split() for line in done.stdout.splitlines())
    assert int(said["commands"]) > 5
    assert (said["left"], said["problems"]) == ("0", "0")
    plan = test_site("plan")  # the CLI agrees
    assert plan.stdout.strip().endswith("nothing to do"), plan.stdout


def test_a_renamed_over_quota_qos_replaces_the_old_one(test_site: SiteUnderTest) -> None:
    t = test_site.prefix
    assert test_site("apply", "--yes").returncode == 0
    test_site.rewrite(overquota={"qos": f"{t}-oq2", "priority": 50, "grace": 10})
    check = test_site("check")
    assert check.returncode == 1
    assert f"QOS {t}-oq2" in check.stdout
    plan = test_site("plan")
    assert f"sacctmgr -i delete qos {t}-oq" in plan.stdout.splitlines()
    applied = test_site("apply", "--yes")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "nothing to do" in test_site("plan").stdout
    names = qos_names()
    assert f"{t}-oq2" in names
    assert f"{t}-oq" not in names
    assert f"{t}-admins" in names


def test_the_shipped_local_site_is_in_sync(slurm_cluster: SlurmCluster) -> None:
    """The session fixture ran ``site apply --yes`` for the local site."""
    plan = subprocess.run(
        [HPCLAUNCH, "--site", "local", "site", "plan"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.strip() == "site hpclaunch matches cluster hpclaunch: nothing to do"
