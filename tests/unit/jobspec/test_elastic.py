"""The elastic block: batch plans per size, the spec's checks, the sampler's exactness."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hpclaunch.errors import SpecError
from hpclaunch.jobspec.batchplan import plan_batch
from hpclaunch.jobspec.job import JobSpec, load_spec
from hpclaunch.runtime.elastic import ElasticSampler, batch_plan, sample_ids, step_digest


def test_fixed_keeps_the_global_batch_and_accumulates_what_a_small_world_cannot_hold() -> None:
    plans = {
        w: plan_batch(global_batch=64, max_batch_per_gpu=8, policy="fixed", base_world=8, world=w)
        for w in (1, 2, 4, 8)
    }
    assert {w: (p.per_rank_batch, p.accumulation) for w, p in plans.items()} == {
        1: (8, 8),
        2: (8, 4),
        4: (8, 2),
        8: (8, 1),
    }
    assert all(p.global_batch == 64 and p.lr_factor == 1.0 for p in plans.values())
    # The largest micro-batch that divides the share: 48/4 = 12 > 8, so 6 x 2.
    odd = plan_batch(global_batch=48, max_batch_per_gpu=8, policy="fixed", base_world=4, world=4)
    assert (odd.per_rank_batch, odd.accumulation) == (6, 2)


def test_linear_and_sqrt_grow_the_batch_and_scale_the_rate_up_to_the_cap() -> None:
    def plan(policy: str, world: int, cap: float = 8.0) -> tuple[int, float]:
        p = plan_batch(
            global_batch=32,
            max_batch_per_gpu=8,
            policy=policy,  # type: ignore[arg-type]
            base_world=4,
            world=world,
            max_lr_factor=cap,
        )
        return p.global_batch, p.lr_factor

    assert plan("linear", 8) == (64, 2.0)
    assert plan("linear", 2) == (16, 0.5)
    assert plan("sqrt", 16) == (128, 2.0)
    assert plan("linear", 16, cap=3.0) == (128, 3.0)
    assert math.isclose(plan("sqrt", 8)[1], math.sqrt(2))


def _spec(**elastic: object) -> dict[str, object]:
    block = {"nodes": [1, 2, 4], "global_batch": 16, "max_batch_per_gpu": 4} | elastic
    return {
        "name": "e",
        "command": ["python", "train.py"],
        "launcher": "torchrun",
        "resources": {"nodes": 4, "gpus_per_node": 1},
        "elastic": block,
    }


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"nodes": [1, 2]}, "must include resources.nodes (4)"),
        ({"global_batch": 10}, "global_batch: at 4 node(s) x 1 rank(s)"),
        ({"nodes": [2, 2, 4]}, "repeats a size"),
        ({"batch": "cubic"}, "'fixed', 'linear', 'sqrt' or 'adaptive'"),
        ({"batch": "adaptive"}, "add max_global_batch"),
        ({"batch": "adaptive", "max_global_batch": 8}, "raise it to 16 or more"),
        ({"max_global_batch": 64}, "drop max_global_batch or set batch: adaptive"),
    ],
)
def test_a_block_that_cannot_work_names_the_field_and_the_fix(
    tmp_path: Path, change: dict[str, object], said: str
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(_spec(**change)))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    text = str(err.value)
    assert "elastic" in text, text
    assert said in text, text
    assert str(path) in text, text


def test_elastic_needs_a_sidecar_and_requeues() -> None:
    none = _spec() | {"launcher": "none"}
    with pytest.raises(ValueError, match="launcher none has no sidecar"):
        JobSpec.model_validate(none)
    never = _spec() | {"checkpoint": {"max_requeues": 0}}
    with pytest.raises(ValueError, match="set it to 1 or more"):
        JobSpec.model_validate(never)


def test_the_plan_in_a_job_comes_from_the_spec_and_the_world_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hpclaunch.planning.launch import elastic_env

    spec = JobSpec.model_validate(_spec())
    monkeypatch.setenv("HPCLAUNCH_ELASTIC", elastic_env(spec))
    two = batch_plan(world_size=2, global_batch=999)  # the job's block wins
    assert (two.per_rank_batch, two.accumulation, two.global_batch) == (4, 2, 16)
    monkeypatch.delenv("HPCLAUNCH_ELASTIC")
    with pytest.raises(ValueError, match="pass global_batch and max_batch_per_gpu"):
        batch_plan(world_size=2)


def test_every_size_takes_the_same_samples_per_step_and_ranks_split_them_whole() -> None:
    def run(world: int, steps: int, cursor: int = 0) -> list[list[int]]:
        plan = plan_batch(
            global_batch=12, max_batch_per_gpu=2, policy="fixed", base_world=4, world=world
        )
        samplers = [ElasticSampler(50, plan, seed=7, cursor=cursor, rank=r) for r in range(world)]
        out = []
        for per_rank in zip(*(s.steps(steps) for s in samplers), strict=True):
            union = sorted(i for step in per_rank for mb in step.micro_batches for i in mb)
            assert union == sorted(per_rank[0].global_ids)  # no sample lost or doubled
            out.append(list(per_rank[0].global_ids))
        return out

    four = run(4, 9)  # crosses two epochs of 50
    assert run(2, 9) == four == run(1, 9)
    # 4 -> 2 -> 4, resumed from the cursors a checkpoint would hold:
    assert run(4, 3) + run(2, 3, cursor=36) + run(4, 3, cursor=72) == four
    assert len({step_digest(s) for s in four}) == 9


def test_the_stream_is_a_shuffle_per_epoch() -> None:
    first, second = sample_ids(0, 10, 10, 3), sample_ids(10, 10, 10, 3)
    assert sorted(first) == sorted(second) == list(range(10))
    assert first != second
    assert sample_ids(5, 10, 10, 3) == first[5:] + second[:5]
