"""Rendezvous from Slurm's environment."""

from __future__ import annotations

import socket

from hpclaunch.supervise.rendezvous import (
    PORT_BASE,
    PORT_BLOCK,
    Rendezvous,
    derive_port,
    gpus_on_node,
    port_in_use,
)


def test_from_env_expands_the_node_list() -> None:
    env = {
        "SLURM_JOB_ID": "123",
        "SLURM_JOB_NODELIST": "gpu-a[07-08],gpu-b1",
        "SLURM_NODEID": "0",
        "CUDA_VISIBLE_DEVICES": "2,3",
    }
    rdzv = Rendezvous.from_env(env, in_use=lambda port: False)
    assert rdzv.nodes == ("gpu-a07", "gpu-a08", "gpu-b1")
    assert rdzv.master_addr == "gpu-a07"
    assert rdzv.nnodes == 3
    assert rdzv.nproc_per_node == 2
    assert rdzv.gpus is True
    assert rdzv.master_port == PORT_BASE + 123 * PORT_BLOCK


def test_nproc_without_gpus_is_one_or_given() -> None:
    env = {"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n1"}
    assert Rendezvous.from_env(env, in_use=lambda p: False).nproc_per_node == 1
    assert Rendezvous.from_env(env, nproc_per_node=3, in_use=lambda p: False).nproc_per_node == 3


def test_gpus_on_node() -> None:
    assert gpus_on_node({"CUDA_VISIBLE_DEVICES": "0,1,2"}) == 3
    assert gpus_on_node({"CUDA_VISIBLE_DEVICES": "NoDevFiles", "SLURM_GPUS_ON_NODE": "2"}) == 2
    assert gpus_on_node({}) == 0


def test_port_differs_between_jobs_and_skips_taken_ports_within_the_jobs_block() -> None:
    assert derive_port("2501", lambda p: False) == PORT_BASE + PORT_BLOCK
    assert derive_port("2502", lambda p: False) == PORT_BASE + 2 * PORT_BLOCK
    # Job 1's first port is held (e.g. by its previous attempt): it moves within its own
    # block, never onto job 2's port.
    taken = {PORT_BASE + PORT_BLOCK, PORT_BASE + PORT_BLOCK + 1}
    assert derive_port("1", lambda p: p in taken) == PORT_BASE + PORT_BLOCK + 2
    assert derive_port("2", lambda p: p in taken) == PORT_BASE + 2 * PORT_BLOCK
    block = set(range(PORT_BASE + PORT_BLOCK, PORT_BASE + 2 * PORT_BLOCK))
    assert derive_port("1", lambda p: p in block) == PORT_BASE + PORT_BLOCK


def test_port_in_use_sees_a_real_listener() -> None:
    with socket.socket() as sock:
        sock.bind(("", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert port_in_use(port)
