"""The LM runs a config defines: every budget × window × family × allocation, with the paper's sequence rules."""

import dataclasses
import json

from helpers import REPO

from parallel_experts.config import files
from parallel_experts.core import budget
from parallel_experts.lm import experiment


def test_paper_runs_follow_the_papers_sequence_and_cache_rules():
    paper = files.load([REPO / "config/paper.yaml"])
    runs = experiment.runs(paper)
    grids = {b.name: len(b.allocations) for b in budget.budgets(paper, "lm")}
    assert len(runs) == sum(grids.values()) * len(paper["lm"]["windows"]) * 2 == 140
    assert len({run.id for run in runs}) == len(runs)
    for run in runs:
        if run.model.recurrent:  # a W-token rolling cache, trained on segments
            assert run.train.memory == run.window and run.id.startswith("recurrent/")
        else:  # independent sequences of 2W tokens: 256 for W = 128, 2,048 for W = 1,024 (paper §5.2)
            assert run.train.sequence == 2 * run.window and run.train.memory == 0
            assert run.id.startswith("nonrecurrent/")
        assert experiment.Run.from_dict(json.loads(json.dumps(run.to_dict()))) == run


def test_per_expert_caches_get_their_own_run_id():
    paper = files.load([REPO / "config/paper.yaml"])
    run = next(r for r in experiment.runs(paper) if r.model.recurrent and r.model.experts > 1)
    assert run.model.kv_cache == "level" and not run.id.endswith("-kv_level")
    per_expert = dataclasses.replace(run, model=dataclasses.replace(run.model, kv_cache="expert"))
    assert per_expert.id == run.id + "-kv_expert"
    assert experiment.Run.from_dict(json.loads(json.dumps(per_expert.to_dict()))) == per_expert
