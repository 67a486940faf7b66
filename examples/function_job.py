"""Functions as jobs: one call, then a map over a grid, from a plain script.

    .venv/bin/python examples/function_job.py          # on the local test cluster

The functions are this script's own (``__main__``): they travel by value, so the nodes need
hpclaunch and the same packages (this venv, on the shared path), not this file. What they
return comes back; what they raise is raised here, as itself.
"""

from __future__ import annotations

import socket

import hpclaunch


def fit(lr: float, steps: int = 100) -> dict[str, float | str]:
    """A stand-in for training: the loss it would reach, and where it ran."""
    return {"lr": lr, "loss": 1.0 / (1 + lr * steps), "host": socket.gethostname()}


def main() -> None:
    job_options = {"project": "research", "resources": {"time": "00:05:00", "mem": "200M"}}
    with hpclaunch.Session() as session:
        job = session.submit(fit, 0.1, steps=50, tier="low", **job_options)
        print(f"job {job.id}: {job.result(timeout=300)}")

        grid = [0.001, 0.01, 0.1, 1.0]
        runs = session.map(fit, grid, max_concurrent=2, **job_options)
        for lr, result in zip(grid, runs.results(timeout=600), strict=True):
            print(f"lr {lr}: loss {result['loss']:.4f} on {result['host']}")


if __name__ == "__main__":
    main()
