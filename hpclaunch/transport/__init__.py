"""How hpclaunch runs commands and moves files where Slurm is: locally, later over SSH.

See :class:`hpclaunch.transport.base.Runner`; :class:`hpclaunch.transport.local.LocalRunner`
runs on this machine.
"""
