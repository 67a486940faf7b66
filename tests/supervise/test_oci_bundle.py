"""The job's own OCI bundle (runtime oci): the image's config.json plus the job's mounts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hpclaunch.supervise.oci_bundle import bundle_config, venv_paths

REPO = Path(__file__).resolve().parents[2]
IMAGE_CONFIG = {
    "ociVersion": "1.0.2",
    "process": {"args": ["sh"], "cwd": "/"},
    "root": {"path": "rootfs", "readonly": True},
    "mounts": [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/data", "type": "bind", "source": "/old", "options": ["rbind"]},
    ],
}


def test_the_root_stays_the_images_and_each_mount_is_a_bind_once() -> None:
    config = bundle_config(
        IMAGE_CONFIG, "/images/b.oci", [("/j", "/j", False), ("/srv/d", "/data", True)]
    )
    assert config["root"] == {"path": "/images/b.oci/rootfs", "readonly": True}
    assert config["process"] == IMAGE_CONFIG["process"]
    by_dest = {m["destination"]: m for m in config["mounts"]}
    assert by_dest["/proc"] == IMAGE_CONFIG["mounts"][0]
    assert by_dest["/j"] == {
        "destination": "/j",
        "source": "/j",
        "type": "bind",
        "options": ["rbind", "rprivate", "rw"],
    }
    assert by_dest["/data"]["source"] == "/srv/d"  # the job's mount replaces the image's
    assert by_dest["/data"]["options"][-1] == "ro"
    assert [m["destination"] for m in config["mounts"]].count("/data") == 1
    assert IMAGE_CONFIG["root"]["path"] == "rootfs"  # the image's own is left alone


def test_a_venv_is_mounted_read_only_with_the_interpreter_it_was_made_from(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /opt/py/3.11/bin\nversion = 3.11.7\n")
    assert venv_paths(str(venv)) == [str(venv), "/opt/py/3.11"]
    config = bundle_config(IMAGE_CONFIG, "/b", [], str(venv))
    ro = {m["destination"] for m in config["mounts"] if m.get("options", [""])[-1] == "ro"}
    assert {str(venv), "/opt/py/3.11"} <= ro
    env = config["process"]["env"]
    assert f"PATH={venv}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in env
    assert f"VIRTUAL_ENV={venv}" in env
    covered = bundle_config(IMAGE_CONFIG, "/b", [("/opt", "/opt", False)], str(venv))
    assert "/opt/py/3.11" not in {m["destination"] for m in covered["mounts"]}


def test_the_command_line_writes_the_bundle(tmp_path: Path) -> None:
    image = tmp_path / "image.oci"
    image.mkdir()
    (image / "config.json").write_text(json.dumps(IMAGE_CONFIG))
    bundle = tmp_path / "job" / "oci-bundle"
    argv = [sys.executable, "-m", "hpclaunch.supervise.oci_bundle", "--image", str(image)]
    argv += ["--bundle", str(bundle), "--mount=/a:/b:ro", "--mount=/c:/c"]
    subprocess.run(argv, check=True, cwd=REPO)
    config = json.loads((bundle / "config.json").read_text())
    assert config["root"]["path"] == f"{image}/rootfs"
    assert {"/b", "/c"} <= {m["destination"] for m in config["mounts"]}
    # Slurm 22.05 runs <bundle>/rootfs whatever root.path says: it is the image's.
    assert os.readlink(bundle / "rootfs") == f"{image}/rootfs"
    subprocess.run(argv, check=True, cwd=REPO)  # the next attempt writes it again
    assert os.readlink(bundle / "rootfs") == f"{image}/rootfs"
    assert sorted(p.name for p in bundle.iterdir()) == ["config.json", "rootfs"]
    missing = subprocess.run(
        [*argv[:4], str(tmp_path / "none"), "--bundle", str(bundle)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert missing.returncode == 2
    assert "cannot read the OCI bundle" in missing.stderr
