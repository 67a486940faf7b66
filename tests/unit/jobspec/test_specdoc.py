"""docs/spec.md is the spec models' own reference: stale means a failing test, and every
field says what it is."""

from __future__ import annotations

import difflib
from pathlib import Path

import pydantic

from hpclaunch.jobspec.doc import spec_reference
from hpclaunch.jobspec.job import JobSpec

DOC = Path(__file__).resolve().parents[3] / "docs" / "spec.md"


def test_docs_spec_md_is_up_to_date() -> None:
    want = spec_reference()
    have = DOC.read_text(encoding="utf-8")
    diff = "".join(
        difflib.unified_diff(
            have.splitlines(True), want.splitlines(True), "docs/spec.md", "generated"
        )
    )
    assert have == want, f"regenerate: python -m hpclaunch.jobspec.doc > docs/spec.md\n{diff}"


def test_every_spec_field_has_a_description() -> None:
    missing: list[str] = []

    def walk(model: type[pydantic.BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            if not field.description:
                missing.append(prefix + name)
            for arg in (field.annotation, *getattr(field.annotation, "__args__", ())):
                if isinstance(arg, type) and issubclass(arg, pydantic.BaseModel):
                    walk(arg, f"{prefix}{name}.")

    walk(JobSpec, "")
    assert missing == []


def test_the_reference_names_every_section_and_the_new_fields() -> None:
    text = DOC.read_text(encoding="utf-8")
    for section in ("## Top level", "## `resources`", "## `checkpoint`", "## `sweep`"):
        assert section in text
    assert "| `partition` |" in text
    assert "| `max_requeues` | integer | `5` |" in text
