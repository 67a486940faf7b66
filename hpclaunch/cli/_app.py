"""The CLI's session: :class:`hpclaunch.ops.session.Session` (moved there)."""

from hpclaunch.ops.session import App, remote_files, slurm_user

__all__ = ["App", "remote_files", "slurm_user"]
