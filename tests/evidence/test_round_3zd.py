"""Focused tests for the rule round 3zd added from check set 3zd's misses (docs/evidence.md, "Round 3zd"), a
producer's format: Horovod's stall inspector (horovod/common/stall_inspector.cc: "One or more tensors were submitted to
be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than %d
seconds. ..." and "Stalled ranks:"). Lines rendered with made-up values; a look-alike beside it."""

from __future__ import annotations

from tests.evidence.rounds import quiet as _quiet

from llm_oncall.evidence.classify import classify_text

_STALL = """\
[1,0]<stderr>:[2019-10-09 05:33:38.249493: W horovod/common/stall_inspector.cc:105] One or more tensors were \
submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more \
than 60 seconds. This may indicate that different ranks are trying to submit different tensors or that only subset of \
ranks is submitting tensors, which will cause deadlock.
[1,0]<stderr>:Stalled ranks:
[1,0]<stderr>:3: [DistributedAdamOptimizer_Allreduce/HorovodAllreduce_bert_encoder_layer_0_0]
"""


def test_horovods_stall_inspector_is_a_hang_of_the_job() -> None:
    f = classify_text(_STALL, "train.log")
    assert (f.kind, f.category, f.incident_hint) == ("horovod_stalled_ranks", "hang", "engine-hang")
    assert f.facts["seconds"] == 60 and f.lines == (1, 2)
    assert _quiet("HOROVOD_STALL_CHECK_TIME_SECONDS sets how long the stall inspector waits for the remainder of "
                  "ranks.\n")
