"""How the batch script says it stopped before the job's command started.

Slurm starts a batch script in its ``--chdir`` directory; on a node without that directory
it starts it in ``/tmp`` instead and runs it anyway, with only a line in ``slurm-%j.out``
("couldn't chdir to ...: going to /tmp instead", slurmstepd, 22.05 to 25.11). hpclaunch
checks paths on the submitting host, which does not see what the nodes lack (a login node's
``/tmp`` or local disk): so the script checks that it runs where it asked, and otherwise
writes one line naming the directory, the node and the fix to ``<log dir>/``
``jobdir.START_FAILURE`` and its log, and exits :data:`EXIT_NO_WORKDIR` before anything
runs. ``hpclaunch status`` shows that line as the job's reason.
"""

from __future__ import annotations

__all__ = ["EXIT_NO_WORKDIR"]

#: The batch script's exit code when the node lacks the job's workdir (78: EX_CONFIG in
#: sysexits.h, a configuration error).
EXIT_NO_WORKDIR = 78
