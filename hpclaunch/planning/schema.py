"""The JSON schemas of a job spec and of a multi-job file (``hpclaunch schema``), from the
pydantic models, for editors (the YAML language server) and other tools."""

from __future__ import annotations

__all__ = ["SCHEMA_ID", "pipeline_schema", "spec_schema"]

SCHEMA_ID = "https://json-schema.org/draft/2020-12/schema"


def spec_schema() -> dict[str, object]:
    """The job spec's JSON schema (draft 2020-12), from the pydantic model."""
    from hpclaunch.jobspec.job import JobSpec  # noqa: PLC0415 (pydantic)

    schema: dict[str, object] = {"$schema": SCHEMA_ID, "title": "hpclaunch job spec"}
    schema.update(JobSpec.model_json_schema())
    schema["title"] = "hpclaunch job spec"
    return schema


def pipeline_schema() -> dict[str, object]:
    """The JSON schema of a multi-job file (``jobs:``, ``defaults:``; see
    hpclaunch.planning.pipeline)."""
    from hpclaunch.planning.pipeline import Pipeline  # noqa: PLC0415 (pydantic)

    schema: dict[str, object] = {"$schema": SCHEMA_ID}
    schema.update(Pipeline.model_json_schema())
    schema["title"] = "hpclaunch multi-job file"
    return schema
