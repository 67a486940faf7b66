"""A tiny PyTorch trainer for the demo: fits a small MLP to a synthetic regression task on
the CPU and prints its progress. Real enough to exercise a job's Python environment (torch
from the project's venv on every node), small enough to finish in seconds on 2 cores."""

from __future__ import annotations

import argparse
import os
import socket
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    job = os.environ.get("SLURM_JOB_ID", "-")
    print(f"job {job} on {socket.gethostname()}: torch {torch.__version__}", flush=True)

    x = torch.linspace(-3, 3, 512).unsqueeze(1)
    y = torch.sin(x) + 0.1 * torch.randn_like(x)
    model = torch.nn.Sequential(torch.nn.Linear(1, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    optimiser = torch.optim.Adam(model.parameters(), lr=0.02)

    for epoch in range(1, args.epochs + 1):
        for _ in range(50):
            optimiser.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimiser.step()
        print(f"epoch {epoch:3d}/{args.epochs}  loss {loss.item():.4f}", flush=True)
        time.sleep(0.1)
    print(f"done: final loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
