"""A small trainer for adaptive sweeps (examples/tpe-sweep.yaml): an MLP fitted on the CPU
to a noisy two-frequency curve, whose validation loss depends on the learning rate and the
width, and whose bad settings show it within a few epochs.

It reports the validation loss every epoch (``runtime.report_progress(epoch,
metrics={"val_loss": ...})``: the study's pruner may stop the trial), stops cleanly when
``runtime.should_stop()`` says so, checkpoints every epoch and on request, and resumes from
its checkpoint after a preemption (the same trial, the epochs after the checkpoint only).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from hpclaunch import runtime


def data(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(512, 1, generator=gen) * 6 - 3
    y = torch.sin(x) + 0.5 * torch.sin(3 * x) + 0.05 * torch.randn(x.shape, generator=gen)
    return x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--steps-per-epoch", type=int, default=40)
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds per epoch on top")
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    x, y = data(0)
    x_val, y_val = data(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(1, args.width), torch.nn.Tanh(), torch.nn.Linear(args.width, 1)
    )
    optimiser = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    start = 0
    ckpt = runtime.resume_point()
    if ckpt is not None:
        state = torch.load(ckpt.path / "state.pt")
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        start = ckpt.step
        print(f"resumed at epoch {start}", flush=True)

    def save(directory: Path) -> None:
        torch.save(
            {"model": model.state_dict(), "optimiser": optimiser.state_dict()},
            directory / "state.pt",
        )

    val = float("nan")
    for epoch in range(start + 1, args.epochs + 1):
        for _ in range(args.steps_per_epoch):
            optimiser.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimiser.step()
        with torch.no_grad():
            val = torch.nn.functional.mse_loss(model(x_val), y_val).item()
        if val != val or val > 1e6:  # diverged: a bad learning rate, reported as such
            val = 1e6
        print(f"epoch {epoch}: val_loss {val:.5f}", flush=True)
        runtime.report_progress(epoch, total=args.epochs, metrics={"val_loss": val}, force=True)
        runtime.commit_checkpoint(epoch, save)
        if runtime.should_stop():
            print(f"stopped by the study at epoch {epoch}", flush=True)
            return
        if runtime.checkpoint_requested():
            print(f"checkpointed at epoch {epoch} on request; stopping", flush=True)
            return
        time.sleep(args.sleep)
    runtime.report_metrics({"val_loss": val})


if __name__ == "__main__":
    main()
