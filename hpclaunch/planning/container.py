"""How a spec's ``container:`` becomes argv: a prefix in front of the command, or srun options.

Two kinds of runtime (each argument one argv word: no shell string is ever built):

* **exec** runtimes wrap a process: ``apptainer|singularity exec [--nv] [--bind S:D[:ro]]...
  --pwd W IMAGE CMD`` and ``ch-run [-b S:D]... -c W IMAGE -- CMD`` (Charliecloud). Without a
  launcher the batch script execs prefix + command; with one, every node's ``node-exec``
  (outside, on the node's python) execs prefix + launcher + command, so the launcher
  (torchrun, ...) runs inside, from the image.
* **step** runtimes are srun options: pyxis/enroot ``--container-image=IMAGE
  --container-mounts=S:D[:ro],... --container-workdir=W``, and Slurm's own OCI support
  (23.02+) ``--container=BUNDLE`` with the site's ``oci.conf``, where BUNDLE is the job's
  own (the image's ``config.json`` with the mounts added, written by the batch script:
  :mod:`hpclaunch.supervise.oci_bundle`). Without a launcher the
  command runs as a one-task srun step with them; with one, the sidecar's step gets them,
  so ``node-exec`` runs inside with the image's ``python3``: hpclaunch must be importable
  there (installed in the image, or the site's ``containers.hpclaunch_path``).

Every container mounts, at the same paths: the site's ``containers.mounts``, the job
directory (control files, ledger, logs), the checkpoint directory, the log directory and the
directory the job starts in, then the spec's own mounts (oci: also the spec's venv and its
base interpreter, read-only).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from hpclaunch.config.site import SiteConfig
from hpclaunch.errors import PlanError
from hpclaunch.jobspec.container import Container, Mount, RuntimeName, parse_mount
from hpclaunch.supervise.oci_bundle import mounted_at_same_path

__all__ = ["ContainerPlan", "plan_container"]


@dataclass(frozen=True)
class ContainerPlan:
    """What a job's container adds to its launch.

    Attributes:
        runtime: The runtime chosen.
        image: The image as the runtime gets it (a relative path made absolute).
        exec_prefix: For an exec runtime: the argv in front of what runs inside.
        step_options: For a step runtime: the srun options of the step that runs inside.
        inner_prefix: Argv inside the container before the command (oci: ``env --chdir=W``).
        env: Environment the job exports for the container (``PYTHONPATH``).
        notes: Why, for ``--dry-run`` and ``render --explain``.
        prepare: Argv the batch script runs before the launch (oci: the job's own bundle,
            :mod:`hpclaunch.supervise.oci_bundle`).
    """

    runtime: RuntimeName
    image: str
    exec_prefix: tuple[str, ...] = ()
    step_options: tuple[str, ...] = ()
    inner_prefix: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    prepare: tuple[str, ...] = ()


def plan_container(
    container: Container,
    site: SiteConfig,
    *,
    own_paths: tuple[str, ...],
    cwd: str,
    home: str,
    env_names: tuple[str, ...] = (),
    job_dir: str | None = None,
    python: str = "python3",
    venv: str | None = None,
) -> ContainerPlan:
    """The container part of a plan.

    Args:
        container: The spec's ``container:``.
        site: Which runtimes the cluster has, their default and flags, shared mounts.
        own_paths: The job's directories to mount at the same paths (job, checkpoint, log).
        cwd: Where the job starts (mounted; the default working directory inside).
        home: The user's home where Slurm runs (``~`` in paths).
        env_names: The spec's ``env`` names (pyxis lets them override the image's).
        job_dir: The job's directory (oci: its own bundle goes there).
        python: The interpreter that runs hpclaunch on the nodes (oci: builds the bundle).
        venv: The spec's venv (oci: mounted read-only with its base interpreter).

    Raises:
        PlanError: The site has no containers or not this runtime.
    """
    offered = site.containers
    if offered is None:
        raise PlanError(
            f"site {site.name!r} offers no container runtime (no containers: in its config)",
            hint="run without container:, or ask the site's admins which runtime the nodes "
            "have and add containers: {runtimes: [...]} to the site config",
        )
    runtime = offered.default_runtime if container.runtime == "auto" else container.runtime
    if runtime not in offered.runtimes:
        raise PlanError(
            f"container.runtime: site {site.name!r} has no {runtime!r}; its runtimes: "
            f"{', '.join(offered.runtimes)}",
            hint=f"use runtime: auto ({offered.default_runtime}) or one of the site's",
        )
    image = _image(container.image, offered.image_dir, home)
    hp_path = _expand(offered.hpclaunch_path, home) if offered.hpclaunch_path else None
    mounts = _mounts(
        [parse_mount(m) for m in offered.mounts],
        [*own_paths, cwd],
        hp_path,
        [parse_mount(m) for m in container.mounts],
        home,
    )
    workdir = container.workdir or cwd
    flags = offered.flags.get(runtime, ())
    env: tuple[tuple[str, str], ...] = (("PYTHONPATH", hp_path),) if hp_path else ()
    inside = tuple(container.env.items())
    notes = [f"container: {runtime} runs {image} (working directory {workdir})"]
    if runtime in ("apptainer", "singularity"):
        prefix = [runtime, "exec", *(["--nv"] if container.gpus else []), *flags]
        for src, dst, ro in mounts:
            prefix += ["--bind", f"{src}:{dst}" + (":ro" if ro else "")]
        prefix += ["--pwd", workdir, image]
        # APPTAINERENV_X (SINGULARITYENV_X) becomes X inside, over the image's value; any
        # value passes (--env's list would split it at commas).
        env += tuple((f"{runtime.upper()}ENV_{name}", value) for name, value in inside)
        return ContainerPlan(runtime, image, exec_prefix=tuple(prefix), env=env, notes=(*notes,))
    if runtime == "charliecloud":
        prefix = ["ch-run", *flags]
        for src, dst, _ in mounts:  # ch-run 0.31 binds read-write: ":ro" is not its syntax
            prefix += ["-b", f"{src}:{dst}"]
        if inside:  # as written: ch-run would otherwise expand $VAR in the values
            prefix += ["--env-no-expand", *(f"--set-env={n}={v}" for n, v in inside)]
        prefix += ["-c", workdir, image, "--"]
        if any(ro for _, _, ro in mounts):
            notes.append("container: ch-run binds read-write; the :ro of a mount is not kept")
        return ContainerPlan(runtime, image, exec_prefix=tuple(prefix), env=env, notes=(*notes,))
    # pyxis and oci: the step's environment reaches the command inside.
    env += inside
    if runtime == "pyxis":
        env_names = (*env_names, *(name for name, _ in inside if name not in env_names))
        listed = ",".join(f"{s}:{d}" + (":ro" if ro else "") for s, d, ro in mounts)
        options = [
            f"--container-image={image}",
            f"--container-mounts={listed}",
            f"--container-workdir={workdir}",
            *([f"--container-env={','.join(env_names)}"] if env_names else []),
            *flags,
        ]
        return ContainerPlan(runtime, image, step_options=tuple(options), env=env, notes=(*notes,))
    # Slurm's OCI support: the bundle's config.json and oci.conf say what is mounted, and
    # srun has no option for more. The batch script writes the job's own bundle (the
    # image's config.json with the mounts added; hpclaunch/supervise/oci_bundle.py).
    bundle = posixpath.join(job_dir or cwd, "oci-bundle")
    prepare = [python, "-m", "hpclaunch.supervise.oci_bundle", "--image", image]
    prepare += ["--bundle", bundle]
    prepare += [f"--mount={s}:{d}" + (":ro" if ro else "") for s, d, ro in mounts]
    prepare += [f"--venv={venv}"] if venv else []
    # Slurm starts the container in the bundle's process.cwd: srun's --chdir is not carried
    # inside (checked on 25.11 with crun), so an asked-for workdir is entered with
    # coreutils' `env --chdir` inside the image. Without one the job's directory may not
    # exist in the bundle at all, so the bundle's cwd is kept.
    options = [f"--container={bundle}", *flags]
    inner = ("env", f"--chdir={container.workdir}") if container.workdir else ()
    notes[0] = (
        f"container: oci runs {image} (working directory "
        f"{container.workdir or 'the bundle config.json process.cwd'})"
    )
    notes.append(
        f"container: oci: the job's bundle {bundle} is the image's config.json with the "
        "mounts added (written by the batch script at each attempt)"
        + (f"; the venv {venv} and its base interpreter mounted read-only" if venv else "")
    )
    return ContainerPlan(
        runtime,
        image,
        step_options=tuple(options),
        inner_prefix=inner,
        env=env,
        notes=(*notes,),
        prepare=tuple(prepare),
    )


def _image(image: str, image_dir: str | None, home: str) -> str:
    """A reference (``docker://``, ``name:tag``, enroot's ``user@registry#image``) as it is;
    a path made absolute (``~``; relative to the site's image directory)."""
    if image.startswith(("/", "~")):
        return _expand(image, home)
    if image_dir is None or any(mark in image for mark in ("://", "#", ":")):
        return image  # a reference the runtime resolves (pyxis: ubuntu:24.04)
    return posixpath.join(_expand(image_dir, home), image)


def _expand(path: str, home: str) -> str:
    return home + path[1:] if path == "~" or path.startswith("~/") else path


def _mounts(
    site: list[Mount],
    own: list[str],
    hpclaunch_path: str | None,
    spec: list[Mount],
    home: str,
) -> list[Mount]:
    """Every mount once per container path, in order: the site's, the job's own paths (not
    those already under an earlier mount of the same path), hpclaunch read-only, the spec's
    (which win over an earlier one at the same container path)."""
    found: dict[str, Mount] = {}

    def add(src: str, dst: str, ro: bool, *, replace: bool = False) -> None:
        src = _expand(src, home)
        if dst in found and not replace:
            return
        found[dst] = (src, dst, ro)

    for src, dst, ro in site:
        add(src, dst, ro)
    for path in own:
        if any(c in path for c in ":,\x00"):
            raise PlanError(
                f"container: the job's directory {path!r} holds ':' or ',', which the "
                "runtimes' mount syntax (SRC:DST, pyxis' comma list) cannot carry",
                hint="submit from (or set workdir/output_dir/checkpoint.dir to) a path "
                "without ':' or ','",
            )
        if not mounted_at_same_path(path, found.values()):
            add(path, path, False)
    if hpclaunch_path:
        add(hpclaunch_path, hpclaunch_path, True)
    for src, dst, ro in spec:
        add(src, dst, ro, replace=True)
    return list(found.values())
