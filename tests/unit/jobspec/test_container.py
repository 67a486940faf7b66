"""A spec's container: how each runtime's argv is made, what the site must offer, the
mistakes users make (the scripts themselves are tests/golden/{apptainer,...}.sbatch)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from hpclaunch.errors import PlanError, SpecError
from hpclaunch.jobspec.container import parse_mount
from hpclaunch.planning.render import render
from hpclaunch.supervise.launchers import container_exec, container_step, step_argv
from hpclaunch.supervise.node import node_command
from hpclaunch.supervise.rendezvous import Rendezvous
from tests.unit.conftest import (
    CONTAINER_SITE,
    CWD,
    HOME,
    PYTHON,
    SUBMISSION_ID,
    assert_clean_error,
    make_site,
    make_spec,
    run,
)
from tests.unit.fakes import FakeSlurm


def plan(container: dict[str, Any], site: Any = CONTAINER_SITE, **spec: Any) -> Any:
    from hpclaunch.planning.plan import build_plan

    return build_plan(
        make_spec(container=container, **spec),
        site,
        submission_id=SUBMISSION_ID,
        home=HOME,
        cwd=CWD,
        python=PYTHON,
    )


def test_parse_mount() -> None:
    assert parse_mount("/data") == ("/data", "/data", False)
    assert parse_mount("~/data:/data:ro") == ("~/data", "/data", True)
    for bad in ("data", "/a:b", "/a:/b:rx", "/a,b:/c", "/a:~/b", "/a:/b:ro:x"):
        with pytest.raises(ValueError, match=r"a mount is|must be absolute"):
            parse_mount(bad)


def test_auto_takes_the_sites_default_and_relative_images_its_image_dir() -> None:
    planned = plan({"image": "torch.sif"})
    assert planned.container.runtime == "apptainer"
    assert planned.container.image == f"{HOME}/images/torch.sif"
    assert planned.launch_argv[:3] == ("apptainer", "exec", "--nv")
    refs = [plan({"image": i, "runtime": "pyxis"}).container.image for i in ("ubuntu:24.04",)]
    assert refs == ["ubuntu:24.04"]  # a reference is the runtime's to resolve


def test_a_runtime_the_site_lacks_names_the_sites_runtimes() -> None:
    site = make_site(containers={"runtimes": ["charliecloud"]})
    with pytest.raises(PlanError, match=r"has no 'apptainer'; its runtimes: charliecloud"):
        plan({"image": "/i.sif", "runtime": "apptainer"}, site)
    with pytest.raises(PlanError, match="offers no container runtime"):
        plan({"image": "/i.sif"}, make_site())


def test_oci_mounts_the_jobs_paths_through_its_own_bundle() -> None:
    """Issue 27: runtime oci mounted nothing of what the README promises (job and start
    directories, site mounts, venv), and the job failed with "python: not found". srun has
    no option for mounts: the batch script writes the job's own bundle with them."""
    planned = plan(
        {"image": "/b", "runtime": "oci", "mounts": ["/data:/d:ro"]},
        launcher="none",
        venv="/sw/venv",
    )
    job_dir = planned.job_dir
    bundle = f"{job_dir}/oci-bundle"
    assert planned.launch_argv[3] == f"--container={bundle}"
    prepare = planned.container.prepare
    assert prepare[:7] == (
        PYTHON,
        "-m",
        "hpclaunch.supervise.oci_bundle",
        "--image",
        "/b",
        "--bundle",
        bundle,
    )
    mounts = [a.removeprefix("--mount=") for a in prepare if a.startswith("--mount=")]
    assert f"{job_dir}:{job_dir}" in mounts
    assert f"{CWD}:{CWD}" in mounts
    assert "/data:/d:ro" in mounts
    assert prepare[-1] == "--venv=/sw/venv"
    script = render(planned).script
    assert f"hpclaunch.supervise.oci_bundle --image /b --bundle {bundle}" in script
    assert script.index("oci_bundle") < script.index("exec srun")


def test_a_bad_site_default_runtime_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="not among runtimes"):
        make_site(containers={"runtimes": ["pyxis"], "default": "oci"})


def test_spec_mistakes_are_field_errors() -> None:
    with pytest.raises(SpecError, match=r"container\.runtime"):
        make_spec_from_yaml({"image": "/i.sif", "runtime": "docker"})
    with pytest.raises(SpecError, match=r"container\.mounts"):
        make_spec_from_yaml({"image": "/i.sif", "mounts": ["relative:/x"]})
    with pytest.raises(SpecError, match=r"container\.image"):
        make_spec_from_yaml({"runtime": "auto"})


def make_spec_from_yaml(container: dict[str, Any]) -> Any:
    from hpclaunch.ops.plan_job import load_spec_input

    return load_spec_input({"name": "x", "command": ["true"], "container": container})


def test_the_job_dirs_must_fit_the_mount_syntax() -> None:
    from hpclaunch.planning.plan import build_plan

    with pytest.raises(PlanError, match="holds ':' or ','"):
        build_plan(
            make_spec(container={"image": "/i.sif"}),
            CONTAINER_SITE,
            submission_id=SUBMISSION_ID,
            home=HOME,
            cwd="/home/alice/a,b",
            python=PYTHON,
        )


def test_with_a_launcher_the_sidecar_stays_outside() -> None:
    exec_plan = plan({"image": "/i.sif"}, launcher="torchrun", resources={"nodes": 2})
    assert exec_plan.launch_argv[:4] == (PYTHON, "-m", "hpclaunch.supervise", "run")
    env = dict(exec_plan.runtime_env)
    assert json.loads(env["HPCLAUNCH_CONTAINER_EXEC"])[-1] == "/i.sif"
    step_plan = plan({"image": "/i.sqsh", "runtime": "pyxis"}, launcher="srun")
    env = dict(step_plan.runtime_env)
    assert json.loads(env["HPCLAUNCH_CONTAINER_STEP"])[0] == "--container-image=/i.sqsh"
    assert env["HPCLAUNCH_CONTAINER_PYTHON"] == "python3"


def test_node_exec_puts_the_launcher_inside_an_exec_runtime() -> None:
    env = {"HPCLAUNCH_CONTAINER_EXEC": json.dumps(["ch-run", "-c", "/w", "/img", "--"])}
    argv, _ = node_command(
        "srun",
        nnodes=1,
        nproc_per_node=1,
        master_addr="n1",
        master_port=29500,
        job_id="7",
        command=["python", "train.py"],
        env=env,
    )
    assert argv == ["ch-run", "-c", "/w", "/img", "--", "python", "train.py"]
    assert container_exec({}) == []


def test_the_sidecars_step_carries_a_step_runtimes_options() -> None:
    env = {"HPCLAUNCH_CONTAINER_STEP": json.dumps(["--container-image=/i.sqsh"])}
    rdzv = Rendezvous("7", "n1", 29500, ("n1", "n2"), 0, 2)
    argv = step_argv(
        "torchrun",
        rdzv,
        ["python", "t.py"],
        python="python3",
        container_options=container_step(env),
    )
    image = argv.index("--container-image=/i.sqsh")
    assert argv[0] == "srun"
    assert argv[image + 1 : image + 4] == ["python3", "-m", "hpclaunch.supervise"]
    with pytest.raises(ValueError, match="not a JSON list"):
        container_step({"HPCLAUNCH_CONTAINER_STEP": '"--x"'})


# Text a YAML file can hold (utf-8: no lone surrogates), as test_render_hostile.py draws it.
_TEXT = st.text(
    st.characters(codec="utf-8", exclude_characters="\x00\n:,"), min_size=1, max_size=30
)


@given(
    image=_TEXT,
    mount=_TEXT,
    word=st.text(st.characters(codec="utf-8", exclude_characters="\x00")),
)
def test_hostile_images_mounts_and_words_reach_the_runtime_as_one_word_each(
    image: str, mount: str, word: str
) -> None:
    """Each user value is one shell word in the script, whatever it holds."""
    for runtime in ("apptainer", "charliecloud", "pyxis"):
        planned = plan(
            {"image": "/" + image, "runtime": runtime, "mounts": [f"/{mount}:/in"]},
            command=["echo", word],
        )
        script = render(planned).script
        last = script[script.rindex("\nexec ") + 1 :]  # the command may hold newlines
        assert shlex.split(last)[1:] == list(planned.launch_argv)


# -- through the CLI: the mistakes users make ------------------------------------------------


def with_containers(env: dict[str, str], containers: dict[str, Any] | None) -> None:
    site_path = Path(env["HPCLAUNCH_SITE"])
    site = yaml.safe_load(site_path.read_text())
    site["containers"] = containers
    site_path.write_text(yaml.safe_dump(site))


def spec_file(tmp_path: Path, container: dict[str, Any]) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(
        yaml.safe_dump({"name": "c", "command": ["nvidia-smi"], "container": container})
    )
    return str(path)


def test_a_missing_relative_image_points_at_the_sites_image_dir(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    """Issue 27: the hint talked about the workdir; a relative image is image_dir's."""
    with_containers(env, {"runtimes": ["apptainer"], "image_dir": str(tmp_path / "images")})
    missing = run(env, "submit", spec_file(tmp_path, {"image": "nope.sif"}))
    assert_clean_error(missing, 2, "container.image")
    assert (
        "a relative container.image is looked up in the site's containers.image_dir "
        f"({tmp_path / 'images'})"
    ) in missing.stderr
    assert "relative paths start from the workdir" not in missing.stderr


def test_submit_refuses_a_missing_image_and_a_runtime_the_site_lacks(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    with_containers(env, {"runtimes": ["apptainer"]})
    missing = run(env, "submit", spec_file(tmp_path, {"image": str(tmp_path / "nope.sif")}))
    assert_clean_error(missing, 2, "container.image")
    assert "does not exist" in missing.stderr
    image = tmp_path / "torch.sif"
    image.write_text("not really an image")
    other = run(env, "submit", spec_file(tmp_path, {"image": str(image), "runtime": "pyxis"}))
    assert_clean_error(other, 2, "has no 'pyxis'; its runtimes: apptainer")
    assert slurm.submitted == []
    good = run(env, "submit", spec_file(tmp_path, {"image": str(image)}))
    assert good.exit_code == 0, good.output
    (script,) = (text for text, _ in slurm.scripts.values())
    assert "exec apptainer exec --nv --bind" in script
    assert script.rstrip().endswith(f"{image} nvidia-smi")


def test_a_site_without_containers_says_so(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    site = yaml.safe_load(Path(env["HPCLAUNCH_SITE"]).read_text())
    del site["containers"]
    bare = tmp_path / "bare.yaml"
    bare.write_text(yaml.safe_dump(site))
    out = run(
        {**env, "HPCLAUNCH_SITE": str(bare)}, "render", spec_file(tmp_path, {"image": "/i.sif"})
    )
    assert_clean_error(out, 2, "offers no container runtime")
    assert "Hint: " in out.stderr


def test_oci_enters_an_asked_workdir_inside_and_otherwise_keeps_the_bundles_cwd() -> None:
    # Slurm does not carry srun's --chdir into an OCI container (checked on 25.11 with
    # crun): the workdir is entered by `env --chdir` inside the image.
    asked = plan({"image": "/b", "runtime": "oci", "workdir": "/srv"}, launcher="none")
    assert asked.launch_argv[4:7] == ("env", "--chdir=/srv", "python")
    kept = plan({"image": "/b", "runtime": "oci"}, launcher="none")
    assert not any(a.startswith(("--chdir", "env")) for a in kept.launch_argv[:-1])
    assert "the bundle config.json process.cwd" in kept.container.notes[0]


def test_container_env_is_set_inside_each_runtime_its_own_way() -> None:
    env = {"HF_HOME": "/data/hf", "GREETING": "a, b=$c"}
    apptainer = plan({"image": "/i.sif", "runtime": "apptainer", "env": env})
    assert ("APPTAINERENV_GREETING", "a, b=$c") in apptainer.runtime_env
    charlie = plan({"image": "/i", "runtime": "charliecloud", "env": env})
    argv = charlie.container.exec_prefix
    assert argv[argv.index("--env-no-expand") + 1 :][:2] == (
        "--set-env=HF_HOME=/data/hf",
        "--set-env=GREETING=a, b=$c",
    )
    pyxis = plan({"image": "u:24.04", "runtime": "pyxis", "env": env}, env={"A": "1"})
    assert "--container-env=A,HF_HOME,GREETING" in pyxis.container.step_options
    assert ("HF_HOME", "/data/hf") in pyxis.runtime_env
    with pytest.raises(ValidationError, match="SLURM_"):
        plan({"image": "/i", "env": {"SLURM_JOB_ID": "1"}})


def test_an_oci_image_must_be_a_bundle_with_config_json(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    with_containers(env, {"runtimes": ["oci"], "image_dir": str(tmp_path)})
    (tmp_path / "rootfs-only").mkdir()  # a root filesystem, as Charliecloud takes it
    bare = run(env, "submit", spec_file(tmp_path, {"image": "rootfs-only"}))
    assert_clean_error(bare, 2, "an OCI bundle's config.json")
    assert f"{tmp_path}/rootfs-only/config.json" in bare.stderr
    assert slurm.submitted == []
    (tmp_path / "rootfs-only" / "config.json").write_text("{}")
    good = run(env, "submit", spec_file(tmp_path, {"image": "rootfs-only"}))
    assert good.exit_code == 0, good.output
