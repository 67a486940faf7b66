"""What the cluster of the integration tests cannot show pyslurm's discovery (its equality
with the commands' is checked there, tests/integration/test_backends_agree_on_cluster.py):
typed GPUs, a real deny list, a parameter switched off."""

from __future__ import annotations

from hpclaunch.backends.pyslurm.discover import _denied, _gres, _text
from hpclaunch.slurm.capabilities import Gres, parse_gres


def test_config_values_print_as_scontrol_prints_them() -> None:
    assert _text({"bf_interval": 1, "bf_continue": True, "off": False}) == (
        "bf_interval=1,bf_continue"
    )
    assert _text(["cpu", "gres/gpu"]) == "cpu,gres/gpu"
    assert _text(None) == ""
    assert _text(300) == "300"


def test_typed_gpus_read_as_sinfo_shows_them() -> None:
    typed = _gres({"gpu:a100": 2, "gpu:v100": 2, "nvme": 1})
    assert typed == parse_gres("gpu:a100:2,gpu:v100:2,nvme:1")
    assert typed[0] == Gres("gpu", "a100", 2)


def test_an_unset_deny_list_is_empty_and_a_set_one_kept() -> None:
    assert _denied(["ALL"]) == ()
    assert _denied(None) == ()
    assert _denied(["low", "overquota"]) == ("low", "overquota")
