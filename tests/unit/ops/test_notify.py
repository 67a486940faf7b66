"""Notifications on the login node's side: webhooks saved by name (the URL a secret: never in
the spec, the script, the history or a message), the job's private notify config written at
submission, and the notices a command sends from here (an outbox the node could not send,
the end of a job no sidecar told), to a real HTTP server on loopback."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

import hpclaunch
from hpclaunch.errors import ConfigError, SpecError
from hpclaunch.notify.message import Notice
from hpclaunch.notify.outbox import Outbox
from hpclaunch.store.history import find_record, history_path
from hpclaunch.transport.local import LocalRunner
from tests.unit.conftest import assert_clean_error, run
from tests.unit.fakes import FakeSlurm
from tests.webhook import Webhook, webhook_server

Env = dict[str, str]


@pytest.fixture
def hook() -> Any:
    with webhook_server() as server:
        yield server


def _spec(**notify: Any) -> dict[str, Any]:
    return {"name": "n", "command": ["true"], "notify": {"webhook": "lab", **notify}}


def test_a_spec_names_a_webhook_never_its_url(session: hpclaunch.Session) -> None:
    with pytest.raises(SpecError, match=r"hpclaunch notify add NAME' \(it asks for the URL\)"):
        session.dryrun(
            {"name": "n", "command": ["true"], "notify": {"webhook": "https://hooks.slack.com/x"}},
            check=False,
        )
    with pytest.raises(SpecError, match="say where to"):
        session.dryrun(
            {"name": "n", "command": ["true"], "notify": {"events": ["failed"]}}, check=False
        )
    # A webhook the spec names but nobody saved: refused before anything is submitted.
    with pytest.raises(ConfigError, match="no webhook named 'lab'") as caught:
        session.dryrun(_spec(), check=False)
    assert (
        caught.value.hint
        == "save it with: hpclaunch notify add lab (it asks for the URL, or reads it from "
        "standard input)"
    )


def test_the_url_goes_only_to_the_jobs_private_config(
    env: Env, slurm: FakeSlurm, session: hpclaunch.Session, hook: Webhook
) -> None:
    added = run(env, "notify", "add", "lab", input=hook.url + "\n")
    assert added.exit_code == 0, added.output
    assert hook.url not in added.output
    assert run(env, "notify", "list").stdout.strip() == "lab"
    job = session.submit(_spec(events=["completed", "failed"]), check=False)
    assert job.job_dir is not None
    config = Path(job.job_dir) / "notify" / "config.json"
    assert json.loads(config.read_text())["webhook"] == hook.url
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    script = next(text for text, _ in slurm.scripts.values())
    assert hook.url not in script
    assert f"HPCLAUNCH_NOTIFY={config}" in script or str(config) in script
    record = find_record(job_id=job.id, path=history_path(env))
    assert record is not None
    assert record.notify == "webhook lab"
    assert hook.url.encode() not in history_path(env).read_bytes()
    assert run(env, "notify", "test", "lab").exit_code == 0
    assert hook.events()[-1] == ("-", "test")


def test_status_sends_what_the_node_could_not_and_tells_an_end_no_sidecar_told(
    env: Env, slurm: FakeSlurm, session: hpclaunch.Session, hook: Webhook
) -> None:
    hpclaunch.Session().notify.add("lab", hook.url)
    slurm.new_job_states = ["RUNNING", "FAILED"]
    slurm.new_job_exit = "3:0"
    job = session.submit(_spec(), check=False)
    assert job.job_dir is not None
    box = Outbox.of_job(LocalRunner(), str(Path(job.job_dir) / "notify" / "config.json"))
    assert box is not None
    assert box.queue(Notice("start-0", "started", job.id, "n", "started on n1"))  # node: no network
    first = run(env, "status", job.id)
    assert first.exit_code == 0, first.output
    assert hook.events() == [(job.id, "started")]
    assert hook.taken[0]["hpclaunch"]["sent_from"].endswith("(hpclaunch)")
    ended = run(env, "status", job.id)  # Slurm says FAILED now: the end is told, once
    assert ended.exit_code == 0, ended.output
    assert hook.events() == [(job.id, "started"), (job.id, "failed")]
    assert "Slurm says FAILED, exit code 3" in hook.taken[1]["text"]
    run(env, "status", job.id)
    run(env, "history")
    assert len(hook.taken) == 2


def test_a_bad_webhook_url_is_refused_without_being_shown(env: Env) -> None:
    bad = "ftp://secret-token@host/x"
    said = run(env, "notify", "add", "lab", input=bad + "\n")
    assert_clean_error(said, 2, "not an http:// or https:// URL")
    assert "secret-token" not in said.output


def test_the_user_configs_notify_is_the_default_of_specs_without_one(
    env: Env, slurm: FakeSlurm, session: hpclaunch.Session, hook: Webhook
) -> None:
    hpclaunch.Session().notify.add("lab", hook.url)
    config = Path(env["XDG_CONFIG_HOME"]) / "hpclaunch" / "config.yaml"
    config.write_text("notify: {webhook: lab, events: [failed]}\n")
    job = session.submit({"name": "d", "command": ["true"]}, check=False)
    assert job.job_dir is not None
    written = json.loads((Path(job.job_dir) / "notify" / "config.json").read_text())
    assert (written["webhook"], written["events"]) == (hook.url, ["failed"])
    own = session.submit(_spec(events=["completed"]), check=False)  # the spec's own wins
    assert own.job_dir is not None
    assert json.loads((Path(own.job_dir) / "notify" / "config.json").read_text())["events"] == [
        "completed"
    ]
    config.write_text("notify: {webhook: 'https://x/y'}\n")
    wrong = run(env, "submit", "--no-check", "--dry-run", str(_write(config.parent, "s.yaml")))
    assert_clean_error(wrong, 2, f"{config} (notify:)")


def _write(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text("name: s\ncommand: ['true']\n")
    return path


def test_what_a_job_without_a_sidecar_cannot_tell_is_said_at_submit(
    env: Env, slurm: FakeSlurm, hook: Webhook, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 45: started (and the rest) with launcher: none sent nothing, silently."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    warned: list[str] = []
    session = hpclaunch.Session(warn=warned.append)
    hpclaunch.Session().notify.add("lab", hook.url)
    session.dryrun({**_spec(), "launcher": "none"}, check=False)
    assert len(warned) == 1
    assert warned[0].startswith("notify: started, preempted, resumed, resized")
    assert "cannot be sent for a job with launcher: none" in warned[0]
    session.dryrun({**_spec(events=["completed", "failed"]), "launcher": "none"}, check=False)
    session.dryrun({**_spec(), "launcher": "srun"}, check=False)
    assert len(warned) == 1


def test_notify_remove_forgets_a_webhook(env: Env, hook: Webhook) -> None:
    """Issue 45: there was no way but rm to forget one."""
    assert run(env, "notify", "add", "lab", input=hook.url + "\n").exit_code == 0
    removed = run(env, "notify", "remove", "lab")
    assert removed.exit_code == 0, removed.output
    assert "webhook lab removed" in removed.stdout
    assert run(env, "notify", "list").stdout.startswith("no webhook saved")
    assert_clean_error(run(env, "notify", "remove", "lab"), 2, "no webhook named 'lab'")
