"""The SSH transport's pure parts: destinations, ssh config, host keys, errors, sync."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import time
from pathlib import Path

import paramiko
import pytest

from hpclaunch.errors import ConfigError, ConnectError
from hpclaunch.transport.hostkeys import (
    HostKeyStatus,
    accept_host_key,
    check_host_key,
    fingerprint,
)
from hpclaunch.transport.ssh import SSHRunner
from hpclaunch.transport.sshconfig import SSHTarget, parse_destination, resolve_target
from hpclaunch.transport.sync import materialise_script, scan, store_dir

# A fixed ed25519 public key and its fingerprint as `ssh-keygen -lf` printed it.
PUB = "AAAAC3NzaC1lZDI1NTE5AAAAIPhWDNYfxNaBAN6ZJoSTR3asEct+Pspf5DJcXf1UGzPu"
FP = "SHA256:76Bo6nATpc50ySkNWERHOj6KbyO7GPgD+RMhVOvjutE"
OTHER = "AAAAC3NzaC1lZDI1NTE5AAAAIJHDeNUlezDaZXgOaVPYFIUNexTOOMciAg1qK4qq3Sev"


def key(b64: str = PUB) -> paramiko.PKey:
    return paramiko.Ed25519Key(data=base64.b64decode(b64))


def test_destinations_parse() -> None:
    assert parse_destination("alice@login:2222") == ("alice", "login", 2222)
    assert parse_destination("ssh://login") == (None, "login", None)
    assert parse_destination("[::1]:22") == (None, "::1", 22)
    for bad in ("me@", "host:0", "host:x", ""):
        with pytest.raises(ConfigError):
            parse_destination(bad)


def test_ssh_config_aliases_and_typed_values_win(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "Host cl\n  HostName login.example.org\n  User bob\n  Port 2200\n"
        "  IdentityFile ~/.ssh/cluster_key\n  ProxyJump gw1,gw2\n"
        "  UserKnownHostsFile /k/one /k/two\n  HashKnownHosts yes\n"
    )
    target = resolve_target("cl", config_files=[config])
    assert (target.hostname, target.user, target.port) == ("login.example.org", "bob", 2200)
    assert target.proxy_jump == ("gw1", "gw2")
    assert target.identity_files[0].endswith("/.ssh/cluster_key")
    assert target.known_hosts == ("/k/one", "/k/two")
    assert target.hash_known_hosts
    assert target.known_hosts_name == "[login.example.org]:2200"
    typed = resolve_target("carol@cl:22", config_files=[config])
    assert (typed.user, typed.port, typed.known_hosts_name) == ("carol", 22, "login.example.org")


def test_server_alive_options_bound_a_silent_link(tmp_path: Path) -> None:
    """ServerAliveInterval/CountMax are read as ssh reads them; unset, hpclaunch asks every
    15 s and gives up after 3 misses (ssh's own default, 0, would never notice)."""
    config = tmp_path / "config"
    config.write_text(
        "Host quiet\n  ServerAliveInterval 5\n  ServerAliveCountMax 2\n"
        "Host off\n  ServerAliveInterval 0\n"
    )
    quiet = resolve_target("quiet", config_files=[config])
    assert (quiet.alive_interval, quiet.alive_count_max) == (5.0, 2)
    assert resolve_target("off", config_files=[config]).alive_interval == 0
    plain = resolve_target("elsewhere", config_files=[config])
    assert (plain.alive_interval, plain.alive_count_max) == (15.0, 3)


def test_fingerprint_matches_ssh_keygen() -> None:
    assert fingerprint(key()) == FP


def test_host_key_known_unknown_changed(tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"[h]:2222 ssh-ed25519 {PUB}\n")
    assert check_host_key("[h]:2222", key(), [str(known)])[0] is HostKeyStatus.KNOWN
    assert check_host_key("h", key(), [str(known)])[0] is HostKeyStatus.UNKNOWN
    status, where = check_host_key("[h]:2222", key(OTHER), [str(known)])
    assert (status, where) == (HostKeyStatus.CHANGED, str(known))


@pytest.mark.parametrize("hashed", [True, False])
def test_accepting_writes_one_line_hashed_or_plain(tmp_path: Path, hashed: bool) -> None:
    known = tmp_path / "ssh" / "known_hosts"
    accept_host_key("[h]:2222", key(), str(known), hashed=hashed)
    line = known.read_text()
    assert line.startswith("|1|") is hashed
    assert ("[h]:2222" in line) is not hashed
    assert oct(known.parent.stat().st_mode & 0o777) == "0o700"
    assert check_host_key("[h]:2222", key(), [str(known)])[0] is HostKeyStatus.KNOWN


def test_refused_port_is_a_clean_connect_error(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    target = SSHTarget("x", "127.0.0.1", "me", port, known_hosts=(str(tmp_path / "kh"),))
    runner = SSHRunner("x", resolve=lambda _: target)
    with pytest.raises(ConnectError, match="refused") as info:
        runner.run(["true"])
    assert info.value.hint is not None
    assert "sshd" in info.value.hint


def test_sync_tree_hash_and_snapshot_script(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x y.txt").write_text("1")
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "run.sh").chmod(0o755)
    tree = scan(tmp_path)
    assert [f.path for f in tree.files] == ["a/x y.txt", "run.sh"]
    assert [f.executable for f in tree.files] == [False, True]
    assert scan(tmp_path).digest == tree.digest
    (tmp_path / "a" / "x y.txt").write_text("2")
    assert scan(tmp_path).digest != tree.digest
    script = materialise_script(tree, "/s")
    assert "'a/x y.txt'" in script  # quoted for the shell
    assert store_dir("~/.hpclaunch/jobs", "/home/u") == "/home/u/.hpclaunch/snapshots"
    with pytest.raises(ConfigError, match="larger than"):
        scan(tmp_path, max_bytes=1)


def test_snapshot_script_builds_the_tree_and_clears_only_stale_temporaries(
    tmp_path: Path,
) -> None:
    src, store = tmp_path / "src", tmp_path / "store"
    (src / "a").mkdir(parents=True)
    (src / "a" / "x y.txt").write_text("1")
    tree = scan(src)
    (store / "objects").mkdir(parents=True)
    (store / "objects" / tree.files[0].sha256).write_text("1")
    # a cut upload's leftovers: an object temporary and a half-built snapshot, old and new
    old = [store / "objects" / ".abc.1234.tmp", store / "ffff.tmp.99"]
    new = [store / "objects" / ".def.5678.tmp", store / "eeee.tmp.98"]
    for path in old + new:
        path.write_text("partial")
    # Ages set from one clock (a faked one too: the kernel stamps files with the real one).
    now = time.time()
    for path in old + new:
        stamp = now - 2 * 3600 if path in old else now
        os.utime(path, (stamp, stamp))
    subprocess.run(["sh", "-s"], input=materialise_script(tree, str(store)), text=True, check=True)
    assert (store / tree.digest / "a" / "x y.txt").read_text() == "1"
    assert [p.exists() for p in old + new] == [False, False, True, True]


def test_unknown_host_name_is_a_clean_connect_error(tmp_path: Path) -> None:
    target = SSHTarget("x", "nonexistent.invalid", "me", known_hosts=(str(tmp_path / "kh"),))
    with pytest.raises(ConnectError, match=r"cannot resolve host 'nonexistent\.invalid'"):
        SSHRunner("x", resolve=lambda _: target).run(["true"])


def test_accepting_ends_a_last_line_without_newline(tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"other ssh-ed25519 {OTHER}")
    accept_host_key("h", key(), str(known), hashed=False)
    assert known.read_text().splitlines() == [
        f"other ssh-ed25519 {OTHER}",
        f"h ssh-ed25519 {PUB}",
    ]


def test_site_login_suggests_the_remote_and_env_overrides_it(tmp_path: Path) -> None:
    import yaml

    from hpclaunch.ops.session import Session

    site = yaml.safe_load(
        (Path(__file__).resolve().parents[3] / "site-configs" / "local.yaml").read_text()
    )
    site["login"] = "me@login.example.org"
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(site))
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    remote = Session(site=str(path), env=env).settings.remote
    assert (remote.value, remote.source) == ("me@login.example.org", "site")
    env["HPCLAUNCH_REMOTE"] = "other"
    assert Session(site=str(path), env=env).settings.remote.value == "other"


def test_closing_after_the_link_was_reset_raises_nothing(tmp_path: Path) -> None:
    """paramiko's close sends a message, and raises EOFError on a reset link: close (also
    the atexit hook) must not, or a traceback follows hpclaunch's own error."""

    class Dead:
        closed = 0

        def close(self) -> None:
            Dead.closed += 1
            raise EOFError

    target = SSHTarget("x", "127.0.0.1", "me", known_hosts=(str(tmp_path / "kh"),))
    runner = SSHRunner("x", resolve=lambda _: target)
    runner._sftp = Dead()  # type: ignore[assignment]
    runner._transports = [Dead(), Dead()]  # type: ignore[list-item]
    runner.close()
    assert Dead.closed == 3
    assert runner._sftp is None
    assert runner._transports == []
