"""The trainer of the tracker cluster test: 8 steps, ``loss`` and ``attempt`` reported at
each (``runtime.report_progress(step, metrics=...)``: logged to the job's W&B, MLflow and
TensorBoard runs), a checkpoint every 3 steps. With ``--hold``, attempt 0 writes
``holding`` in the job directory at step 5 and waits for the checkpoint request the test's
preemption warning brings; it then stops without a new checkpoint, so attempt 1 resumes
from step 3 and reports 4 and 5 again.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from hpclaunch import runtime

STEPS, EVERY, HOLD = 8, 3, 5


def main() -> None:
    job_dir = Path(os.environ["HPCLAUNCH_JOB_DIR"])
    attempt = runtime.attempt()
    ckpt = runtime.resume_point()
    start = ckpt.step if ckpt else 0
    print(f"attempt {attempt} resumes at {start}", flush=True)
    for step in range(start + 1, STEPS + 1):
        time.sleep(0.2)
        runtime.report_progress(
            step, metrics={"loss": 1 / step, "attempt": float(attempt)}, force=True
        )
        if step % EVERY == 0:
            runtime.commit_checkpoint(step, lambda d, s=step: (d / "s.json").write_text(str(s)))
        if attempt == 0 and step == HOLD and "--hold" in sys.argv:
            (job_dir / "holding").write_text(json.dumps(step))
            deadline = time.monotonic() + 120
            while not runtime.checkpoint_requested() and time.monotonic() < deadline:
                time.sleep(0.2)
            print("stopping for the request, without a new checkpoint", flush=True)
            return


if __name__ == "__main__":
    main()
