"""Steps shared by the commands that turn a spec into a job."""

from __future__ import annotations

import os

from hpclaunch.cli._app import App
from hpclaunch.plan import SubmissionPlan, build_plan, new_submission_id
from hpclaunch.spec import load_spec


def plan_spec(app: App, spec_path: str, submission_id: str | None = None) -> SubmissionPlan:
    """Load ``spec_path`` and plan it on the app's site, from the current directory.

    ``submission_id``: the caller's own (``submit --submission-id``); default: a new one.
    """
    spec = load_spec(spec_path)
    return build_plan(
        spec,
        app.site,
        submission_id=submission_id or new_submission_id(),
        home=os.path.expanduser("~"),
        cwd=os.getcwd(),
    )
