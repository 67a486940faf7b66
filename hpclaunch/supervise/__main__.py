"""``python -m hpclaunch.supervise`` (the ``hpclaunch-sidecar`` console script).

Subcommands::

    run --launcher L [--nproc-per-node N] -- COMMAND...        the sidecar (batch shell)
    node-exec --launcher L --nnodes N --nproc-per-node P \\
        --master-addr A --master-port PORT --job-id J -- COMMAND...   on each node

argparse, not click: this runs inside every job and must start fast with few imports.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from hpclaunch.supervise.launchers import LAUNCHERS
from hpclaunch.supervise.node import exec_node, node_command
from hpclaunch.supervise.process_group import end_by
from hpclaunch.supervise.sidecar import Sidecar, SidecarConfig
from hpclaunch.supervise.signals import SignalCatcher
from hpclaunch.transport.local import LocalRunner

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hpclaunch-sidecar")
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="supervise one attempt of the job")
    run.add_argument("--launcher", choices=LAUNCHERS, required=True)
    run.add_argument("--nproc-per-node", type=int, default=None)
    run.add_argument("command", nargs=argparse.REMAINDER)
    node = sub.add_parser("node-exec", help="exec the launcher on this node (srun task)")
    node.add_argument("--launcher", choices=LAUNCHERS, required=True)
    node.add_argument("--nnodes", type=int, required=True)
    node.add_argument("--nproc-per-node", type=int, required=True)
    node.add_argument("--master-addr", required=True)
    node.add_argument("--master-port", type=int, required=True)
    node.add_argument("--job-id", required=True)
    node.add_argument("command", nargs=argparse.REMAINDER)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parser().parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("hpclaunch-sidecar: no command given after --", file=sys.stderr)
        return 2
    if args.cmd == "node-exec":
        node_argv, env = node_command(
            args.launcher,
            nnodes=args.nnodes,
            nproc_per_node=args.nproc_per_node,
            master_addr=args.master_addr,
            master_port=args.master_port,
            job_id=args.job_id,
            command=command,
            env=os.environ,
        )
        exec_node(node_argv, env)
        return 127  # not reached
    # The batch script ignores USR1/USR2 from its exec until here (templates/command.sh.j2):
    # Slurm's warning in that moment is lost. Catch before the sidecar's imports and set-up,
    # so the moment is this interpreter's start only.

    with SignalCatcher() as signals:
        config = SidecarConfig.from_env(
            args.launcher,
            command,
            python=sys.executable,
            env=os.environ,
            nproc_per_node=args.nproc_per_node,
        )
        sidecar = Sidecar(config, LocalRunner())
        code = sidecar.run(signals)
    end_by(sidecar.stopped_by)
    # A child killed by signal N has returncode -N; exit as a shell does, 128+N (Python's
    # sys.exit(-11) would exit 245, which reads as nothing: a SIGSEGV shows as 139).
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    raise SystemExit(main())
