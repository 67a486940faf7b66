# %% [markdown]
# # Jobs as futures, from a notebook
#
# Cells as Jupyter and VS Code read them (`# %%`); also a plain script:
# `.venv/bin/python examples/notebook_futures.py` on the local test cluster.
# Functions defined in a notebook travel by value: the nodes need the same environment
# (this venv, on the shared path), not the notebook.

# %%
from concurrent.futures import as_completed

import hpclaunch

session = hpclaunch.Session()
options = {"project": "research", "tier": "low", "resources": {"time": "00:05:00", "mem": "200M"}}


# %%
def evaluate(checkpoint: int) -> float:
    """A stand-in for an evaluation: a score that grows with the checkpoint."""
    return round(1 - 1 / (checkpoint + 1), 4)


jobs = {session.submit(evaluate, step, **options): step for step in (100, 200, 400)}

# %%
# Results as the jobs end, in whatever order; one squeue a round for all of them.
scores = {}
for job in as_completed(jobs, timeout=600):
    scores[jobs[job]] = job.result()
    print(f"checkpoint {jobs[job]}: score {scores[jobs[job]]} (job {job.id})")

# %%
best = max(scores, key=scores.__getitem__)
print(f"best checkpoint: {best}")
session.close()
