"""``site plan``/``apply``: the pure plan against recorded sacctmgr output, and idempotence
against a small sacctmgr simulator (:class:`FakeAccounting`) that answers like 22.05."""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any

import pytest

from hpclaunch.config.site import SiteConfig, load_site
from hpclaunch.errors import CommandFailed
from hpclaunch.planning.checks import pending_problems
from hpclaunch.planning.siteplan import Change, apply, plan_site
from hpclaunch.slurm.accounting import (
    ACCOUNT_FORMAT,
    ASSOC_FORMAT,
    QOS_FORMAT,
    LiveQos,
    LiveState,
    parse_live,
    read_live,
)
from hpclaunch.slurm.capabilities import Capabilities, discover
from hpclaunch.slurm.times import format_time
from hpclaunch.transport.base import CommandResult
from tests.unit.fakes import FakeRunner, recorded, result

# `sacctmgr -n -P show qos|assoc|account format=...` (accounting's formats) on the local
# cluster right after docker/slurm-cluster/cluster.sh up: four bare QOS, two projects.
FRESH_QOS = """\
normal|0||cluster|00:00:00|||||Normal QOS default
low|0||cluster|00:00:00||||1.000000|low
high|0||cluster|00:00:00||||1.000000|high
critical|0||cluster|00:00:00||||1.000000|critical
"""
FRESH_ASSOC = """\
hpclaunch|root||||normal||
hpclaunch|root|root|||critical,high,low,normal|normal|
hpclaunch|research|||root|normal||
hpclaunch|research|hpcuser|||critical,high,low,normal|normal|
hpclaunch|research|root|||critical,high,low,normal|normal|
hpclaunch|vision|||root|normal||
hpclaunch|vision|hpcuser|||critical,high,low,normal|normal|
hpclaunch|vision|root|||critical,high,low,normal|normal|
"""
FRESH_ACCOUNTS = """\
research|research
root|default root account
vision|vision
"""


@pytest.fixture(scope="module")
def caps() -> Capabilities:
    return discover(recorded(), now=lambda: 1000.0)


@pytest.fixture(scope="module")
def local() -> SiteConfig:
    return load_site("local")


def fresh() -> LiveState:
    return parse_live("hpclaunch", FRESH_QOS, FRESH_ASSOC, FRESH_ACCOUNTS)


def commands(changes: list[Change]) -> list[str]:
    return [c.command for c in changes]


# -- a sacctmgr simulator -----------------------------------------------------------------


class FakeAccounting:
    """QOS, accounts and associations of one cluster, changed by the argv forms
    :func:`plan_site` emits and shown in :mod:`hpclaunch.slurm.accounting`'s formats. An
    association's QOS list and default QOS are ``None`` when inherited from its parent
    (the user's account, the account's parent), as slurmdbd does."""

    def __init__(self, live: LiveState) -> None:
        self.cluster = live.cluster
        self.qos = {q.name: dataclasses.asdict(q) for q in live.qos}
        self.accounts = {a.name: a.description for a in live.accounts}
        self.assocs: dict[tuple[str, str, str], dict[str, Any]] = {}
        for a in live.assocs:
            key = (a.account, a.user or "", a.partition or "")
            self.assocs[key] = {
                "parent": a.account if a.user else a.parent,
                "qos": list(a.qos),
                "default_qos": a.default_qos,
                "grp_tres": a.grp_tres,
            }

    def runner(self, fail: str | None = None) -> FakeRunner:
        def answer(argv: tuple[str, ...]) -> CommandResult:
            if fail and fail in shlex.join(argv):
                return result(argv, 1, err="sacctmgr: error: simulated")
            return result(argv, out=self.run(list(argv)))

        return FakeRunner(answer)

    def run(self, argv: list[str]) -> str:
        assert argv[0] == "sacctmgr", argv
        if argv[1:4] == ["-n", "-P", "show"]:
            return self.show(argv[4])
        assert argv[1] == "-i", argv
        verb, what, *rest = argv[2:]
        where, sets = self._split(rest)
        getattr(self, f"{verb}_{what}")(where, sets)
        return ""

    @staticmethod
    def _split(rest: list[str]) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
        where: dict[str, str] = {}
        sets: list[tuple[str, str, str]] = []
        mode = "where"
        for i, arg in enumerate(rest):
            if arg in ("where", "set"):
                mode = arg
                continue
            if "=" not in arg:
                where["name"] = arg
                continue
            key, op, value = arg.partition("+=") if "+=" in arg else arg.partition("=")
            if mode == "set" or (mode == "where" and i and key[0].isupper()):
                sets.append((key.lower(), op, value))
            else:
                where[key.lower()] = value
        return where, sets

    def add_qos(self, where: dict[str, str], sets: list[tuple[str, str, str]]) -> None:
        name = where["name"]
        assert name not in self.qos
        desc = {k: v for k, _, v in sets}.get("description", name)
        self.qos[name] = dataclasses.asdict(LiveQos(name, desc))

    def modify_qos(self, where: dict[str, str], sets: list[tuple[str, str, str]]) -> None:
        from hpclaunch.slurm.accounting import _seconds

        q = self.qos[where["name"]]
        for key, _, value in sets:
            if key == "priority":
                q["priority"] = int(value)
            elif key == "preempt":
                q["preempt"] = tuple(sorted(v for v in value.split(",") if v))
            elif key == "preemptmode":
                q["preempt_mode"] = value
            elif key == "gracetime":
                q["grace"] = int(value)
            elif key == "maxwall":
                q["max_wall"] = _seconds(value)
            elif key == "maxtresperuser":
                q["max_tres_per_user"] = value
            elif key == "maxjobsperuser":
                q["max_jobs_per_user"] = int(value)
            elif key == "usagefactor":
                q["usage_factor"] = float(value)
            else:
                raise AssertionError(key)

    def delete_qos(self, where: dict[str, str], sets: list[tuple[str, str, str]]) -> None:
        del self.qos[where["name"]]
        for assoc in self.assocs.values():
            if assoc["qos"]:
                assoc["qos"] = [q for q in assoc["qos"] if q != where["name"]]

    def add_account(self, where: dict[str, str], sets: list[tuple[str, str, str]]) -> None:
        name, values = where["name"], {k: v for k, _, v in sets}
        assert where["cluster"] == self.cluster
        self.accounts.setdefault(name, values["description"])
        parent = where.get("parent", "root")
        self.assocs[(name, "", "")] = {
            "parent": parent,
            "qos": None,
            "default_qos": None,
            "grp_tres": "",
        }

    def _modify(self, assoc: dict[str, Any], sets: list[tuple[str, str, str]]) -> None:
        for key, op, value in sets:
            if key == "qos":
                base = self.effective(assoc, "qos") if op == "+=" else []
                assoc["qos"] = sorted(set(base) | set(value.split(",")))
            elif key == "defaultqos":
                assoc["default_qos"] = value
            elif key == "grptres":
                assoc["grp_tres"] = value
            elif key == "parent":
                assoc["parent"] = value
            else:
                raise AssertionError(key)

    def modify_account(self, where: dict[str, str], sets: list[tuple[str, str, str]]) -> None:
        self._modify(self.assocs[(where["name"], "", "")], sets)

    def add_user(self, where: dict[str, str], sets: list[tuple[str, str, str]]) -> None:
        key = (where["account"], where["name"], where.get("partition", ""))
        assert key not in self.assocs
        assert (where["account"], "", "") in self.assocs
        self.assocs[key] = {
            "parent": where["account"],
            "qos": None,
            "default_qos": None,
            "grp_tres": "",
        }

    def modify_user(self, where: dict[str, str], sets: list[tuple[str, str, str]]) -> None:
        for (account, user, part), assoc in self.assocs.items():
            if (account, user) == (where["account"], where["name"]) and where.get(
                "partition", part
            ) == part:
                self._modify(assoc, sets)

    def delete_account(self, where: dict[str, str], sets: list[tuple[str, str, str]]) -> None:
        # Deleting an account deletes its user associations (checked on 22.05).
        self.assocs = {k: v for k, v in self.assocs.items() if k[0] != where["name"]}
        del self.accounts[where["name"]]

    def effective(self, assoc: dict[str, Any], key: str) -> Any:
        """The value, or the inherited one."""
        while assoc[key] is None:
            parent = assoc["parent"] or "root"
            if assoc is self.assocs.get((parent, "", "")):
                return [] if key == "qos" else None
            assoc = self.assocs[(parent, "", "")]
        return assoc[key]

    def show(self, what: str) -> str:
        if what == "qos":
            return "".join(
                f"{q['name']}|{q['priority']}|{','.join(q['preempt'])}|{q['preempt_mode']}|"
                f"{format_time(q['grace'])}|{_time(q['max_wall'])}|{q['max_tres_per_user']}|"
                f"{q['max_jobs_per_user'] or ''}|{q['usage_factor']:.6f}|{q['description']}\n"
                for q in self.qos.values()
            )
        if what == "account":
            return "".join(f"{n}|{d}\n" for n, d in self.accounts.items())
        lines = []
        for (account, user, part), a in self.assocs.items():
            parent = "" if user else (a["parent"] or "")
            qos = ",".join(self.effective(a, "qos"))
            default = self.effective(a, "default_qos") or ""
            lines.append(
                f"{self.cluster}|{account}|{user}|{part}|{parent}|{qos}|{default}|{a['grp_tres']}\n"
            )
        return "".join(lines)

    def live(self) -> LiveState:
        return read_live(self.runner(), self.cluster)


def _time(seconds: int | None) -> str:
    return "" if seconds is None else format_time(seconds)


def test_the_simulator_reads_back_what_it_was_given() -> None:
    live = fresh()
    assert FakeAccounting(live).live() == live


# -- plans --------------------------------------------------------------------------------


def test_a_fresh_cluster_gets_the_tiers_quotas_and_over_quota_accounts(
    local: SiteConfig, caps: Capabilities
) -> None:
    changes = plan_site(local, fresh(), caps)
    assert all(c.kind == "sacctmgr" for c in changes)  # the local slurm.conf is ready
    assert commands(changes) == [
        "sacctmgr -i add qos overquota 'Description=hpclaunch: over-quota work (site hpclaunch)'",
        "sacctmgr -i modify qos critical set Priority=1000 Preempt=low,overquota",
        "sacctmgr -i modify qos high set Priority=500 Preempt=low,overquota",
        "sacctmgr -i modify qos normal set Priority=100 Preempt=low,overquota",
        "sacctmgr -i modify qos low set PreemptMode=requeue GraceTime=10 UsageFactor=0.5",
        "sacctmgr -i modify qos overquota set Priority=50 PreemptMode=requeue GraceTime=10 "
        "UsageFactor=0.5",
        "sacctmgr -i add account research-oq cluster=hpclaunch parent=root "
        "'Description=hpclaunch: over-quota work of research (site hpclaunch)' "
        "Organization=hpclaunch",
        "sacctmgr -i add account vision-oq cluster=hpclaunch parent=root "
        "'Description=hpclaunch: over-quota work of vision (site hpclaunch)' "
        "Organization=hpclaunch",
        "sacctmgr -i modify account where name=research cluster=hpclaunch set "
        "GrpTRES=gres/gpu=8 QOS+=critical,high",
        "sacctmgr -i modify account where name=research-oq cluster=hpclaunch set "
        "QOS=low,overquota DefaultQOS=overquota",
        "sacctmgr -i modify account where name=vision cluster=hpclaunch set "
        "GrpTRES=gres/gpu=4 QOS+=critical,high",
        "sacctmgr -i modify account where name=vision-oq cluster=hpclaunch set "
        "QOS=low,overquota DefaultQOS=overquota",
        "sacctmgr -i add user hpcuser account=research-oq cluster=hpclaunch",
        "sacctmgr -i add user root account=research-oq cluster=hpclaunch",
        "sacctmgr -i add user hpcuser account=vision-oq cluster=hpclaunch",
        "sacctmgr -i add user root account=vision-oq cluster=hpclaunch",
    ]
    assert changes[1].reason == (
        "QOS critical (tier critical): Priority=1000 (was 0), Preempt=low,overquota (was none)"
    )


def test_applying_the_plan_leaves_nothing_to_do(local: SiteConfig, caps: Capabilities) -> None:
    fake = FakeAccounting(fresh())
    changes = plan_site(local, fake.live(), caps)
    assert changes
    apply(changes, fake.runner())
    after = fake.live()
    assert plan_site(local, after, caps) == []
    oq = list(after.user_assocs("research-oq"))
    assert {a.user for a in oq} == {"root", "hpcuser"}
    assert all(a.qos == ("low", "overquota") and a.default_qos == "overquota" for a in oq)


def test_every_qos_setting(caps: Capabilities) -> None:
    site = SiteConfig.model_validate(
        {
            "name": "s",
            "partitions": [{"name": "gpu", "cpus_per_node": 8}],
            "tiers": {
                "high": {
                    "qos": "high",
                    "max_wall": "2-00:00:00",
                    "max_gpus_per_user": 8,
                    "max_jobs_per_user": 3,
                    "preempts": False,
                    "usage_factor": 2,
                },
                "low": {"qos": "low", "preemptible": True, "grace": 30},
            },
        }
    )
    live = parse_live(
        "hpclaunch",
        "high|10|low|cluster|00:00:00|1-00:00:00|cpu=4,gres/gpu=2|5|1.000000|high\n"
        "low|0||requeue|00:00:30||||0.500000|low\n",  # a preemptible tier's default factor
        "",
        "",
    )
    (change,) = plan_site(site, live, caps)
    assert change.argv[3:] == (
        "qos",
        "high",
        "set",
        "Preempt=",  # cleared: sacctmgr(1) "Setting a Preempt to ''"
        "MaxWall=2-00:00:00",
        "MaxTRESPerUser=gres/gpu=8",
        "MaxJobsPerUser=3",
        "UsageFactor=2",
    )
    fake = FakeAccounting(live)
    apply([change], fake.runner())
    assert plan_site(site, fake.live(), caps) == []


def test_slurm_conf_settings_are_listed_not_run(local: SiteConfig, caps: Capabilities) -> None:
    bare = dataclasses.replace(
        caps,
        preempt_type="preempt/none",
        preempt_mode="OFF",
        slurmctld_parameters=(),
        priority_type="priority/basic",
        priority_weight_qos=0,
        accounting_storage_enforce=("associations",),
        accounting_storage_tres=("cpu", "mem"),
    )
    conf = [c for c in plan_site(local, fresh(), bare) if c.kind == "slurm.conf"]
    assert [c.command for c in conf] == [
        "slurm.conf: PreemptType=preempt/qos  (now: preempt/none)",
        "slurm.conf: PreemptMode=REQUEUE  (now: OFF)",
        "slurm.conf: SlurmctldParameters=preempt_send_user_signal  (now: unset)",
        "slurm.conf: PriorityType=priority/multifactor  (now: priority/basic)",
        "slurm.conf: PriorityWeightQOS=100000  (now: 0)",
        "slurm.conf: AccountingStorageEnforce=associations,limits,qos  (now: associations)",
        "slurm.conf: AccountingStorageTRES=cpu,mem,gres/gpu  (now: cpu,mem)",
    ]
    assert all(c.argv == () for c in conf)
    fake = FakeAccounting(fresh())
    runner = fake.runner()
    apply(conf, runner)
    assert runner.calls == []
    problems = pending_problems(conf)
    assert problems[0].where == "site plan (slurm.conf)"
    assert "scontrol reconfigure" in problems[0].fix


def test_users_and_parents_of_owned_over_quota_accounts_are_set_exactly(
    local: SiteConfig, caps: Capabilities
) -> None:
    fake = FakeAccounting(fresh())
    apply(plan_site(local, fake.live(), caps), fake.runner())
    oq = fake.assocs[("research-oq", "", "")]
    oq["parent"] = "vision"  # moved under another account by hand
    fake.assocs[("research-oq", "root", "")]["qos"] = ["low", "normal", "overquota"]
    fake.assocs[("research", "alice", "")] = {
        "parent": "research",
        "qos": None,
        "default_qos": None,
        "grp_tres": "",
    }
    changes = plan_site(local, fake.live(), caps)
    assert commands(changes) == [
        "sacctmgr -i modify account where name=research-oq cluster=hpclaunch set Parent=root",
        "sacctmgr -i add user alice account=research-oq cluster=hpclaunch",
        "sacctmgr -i modify user where name=root account=research-oq cluster=hpclaunch "
        "set QOS=low,overquota",
    ]
    apply(changes, fake.runner())
    assert plan_site(local, fake.live(), caps) == []


def test_never_deletes_or_cuts_what_it_does_not_own(local: SiteConfig, caps: Capabilities) -> None:
    live = parse_live(
        "hpclaunch",
        FRESH_QOS
        + "admins|0||cluster|00:00:00||||made by the admins\n"
        + "t1|0||cluster|00:00:00||||hpclaunch: tier low (site another)\n",
        FRESH_ASSOC
        + "hpclaunch|research-oq|||root|low,normal,overquota|low|\n"
        + "hpclaunch|lab|||root|normal||\n",
        FRESH_ACCOUNTS + "research-oq|made by hand\nlab|hpclaunch: project lab (site another)\n",
    )
    changes = plan_site(local, live, caps)
    text = "\n".join(commands(changes))
    assert "delete" not in text  # neither the admins' QOS nor another site's
    assert "research-oq cluster=hpclaunch set QOS+=" not in text  # has them already
    assert (
        "sacctmgr -i modify account where name=research-oq cluster=hpclaunch set "
        "DefaultQOS=overquota" in text  # not owned: normal stays in its list
    )
    assert "add account research-oq" not in text
    for change in changes:
        if "QOS" in " ".join(change.argv) and change.argv[3] == "account":
            assert any(a.startswith(("QOS+=", "DefaultQOS=", "GrpTRES=")) for a in change.argv)


def test_owned_qos_and_accounts_the_site_dropped_are_deleted(
    local: SiteConfig, caps: Capabilities
) -> None:
    fake = FakeAccounting(fresh())
    apply(plan_site(local, fake.live(), caps), fake.runner())
    renamed = local.model_copy(
        update={
            "overquota": local.overquota.model_copy(update={"qos": "spare"}),
            "quotas": {"research": 8},
        }
    )
    changes = plan_site(renamed, fake.live(), caps)
    text = commands(changes)
    assert text[0] == (
        "sacctmgr -i add qos spare 'Description=hpclaunch: over-quota work (site hpclaunch)'"
    )
    assert text[-2:] == [
        "sacctmgr -i delete account where name=vision-oq cluster=hpclaunch",
        "sacctmgr -i delete qos overquota",
    ]
    apply(changes, fake.runner())
    assert plan_site(renamed, fake.live(), caps) == []
    assert ("vision", "", "") in fake.assocs  # not owned: kept, GrpTRES left as it was


def test_no_quotas_no_accounts(caps: Capabilities, local: SiteConfig) -> None:
    site = local.model_copy(update={"quotas": {}})
    changes = plan_site(site, fresh(), caps)
    assert {c.argv[3] for c in changes} == {"qos"}
    assert "overquota" not in " ".join(commands(changes))


def test_apply_stops_at_the_first_failure(local: SiteConfig, caps: Capabilities) -> None:
    fake = FakeAccounting(fresh())
    changes = plan_site(local, fake.live(), caps)
    runner = fake.runner(fail="modify qos high")
    with pytest.raises(CommandFailed) as info:
        apply(changes, runner)
    assert info.value.hint is not None
    assert f"step 3 of {len(changes)} failed" in info.value.hint
    assert len(runner.calls) == 3


def test_read_live_runs_three_sacctmgr_calls() -> None:
    fake = FakeAccounting(fresh())
    runner = fake.runner()
    read_live(runner, "hpclaunch")
    assert sorted(runner.calls) == [
        ("sacctmgr", "-n", "-P", "show", "account", f"format={ACCOUNT_FORMAT}"),
        (
            *("sacctmgr", "-n", "-P", "show", "assoc", "where", "cluster=hpclaunch"),
            f"format={ASSOC_FORMAT}",
        ),
        ("sacctmgr", "-n", "-P", "show", "qos", f"format={QOS_FORMAT}"),
    ]


def test_read_live_fails_clearly_without_slurmdbd() -> None:
    runner = FakeRunner(lambda argv: result(argv, 1, err="sacctmgr: error: Problem talking"))
    with pytest.raises(CommandFailed, match="Problem talking"):
        read_live(runner, "hpclaunch")


def test_an_arbiter_site_keeps_slurm_from_preempting(local: SiteConfig, caps: Capabilities) -> None:
    arbiter = local.model_copy(update={"preemption": "arbiter"})
    fake = FakeAccounting(fresh())
    apply(plan_site(arbiter, fake.live(), caps), fake.runner())
    after = fake.live()
    for name in ("critical", "high", "normal"):
        qos = after.qos_named(name)
        assert qos is not None
        assert qos.preempt == (), name  # hpclaunch arbiter picks the victims instead
    low = after.qos_named("low")
    assert low is not None
    assert (low.preempt_mode.lower(), low.grace) == ("requeue", 10)  # still requeued
    assert plan_site(arbiter, after, caps) == []
    # Back to Slurm's own preemption: the lists come back.
    back = plan_site(local, after, caps)
    assert any("Preempt=low,overquota" in change.reason for change in back)


def test_signal_at_preemption_is_proposed_in_the_releases_own_words(
    local: SiteConfig, caps: Capabilities
) -> None:
    # 22.05 (the recording): SlurmctldParameters; 24.11+ document PreemptParameters.
    for version, line in (
        ("22.05.8", "slurm.conf: SlurmctldParameters=preempt_send_user_signal  (now: unset)"),
        ("25.11.7", "slurm.conf: PreemptParameters=send_user_signal  (now: unset)"),
    ):
        bare = dataclasses.replace(caps, slurm_version=version, slurmctld_parameters=())
        conf = [c.command for c in plan_site(local, fresh(), bare) if c.kind == "slurm.conf"]
        assert line in conf
    # Either spelling satisfies it (25.11's slurmctld reads both: node_scheduler.c).
    for done in (
        {"slurmctld_parameters": ("preempt_send_user_signal",)},
        {"slurmctld_parameters": (), "preempt_parameters": ("send_user_signal",)},
    ):
        ok = dataclasses.replace(caps, slurm_version="25.11.7", **done)
        assert ok.signals_at_preemption
        assert not [c for c in plan_site(local, fresh(), ok) if "signal" in c.command]
