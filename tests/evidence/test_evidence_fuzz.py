"""classify_text never raises, on arbitrary text and on mutated samples (hand-made and real).

Deterministic: every test runs derandomized, so CI sees the same examples every run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_oncall.evidence import classify as cl
from llm_oncall.evidence import matcher, outputs
from llm_oncall.evidence.classify import Parser
from llm_oncall.evidence.model import INCIDENT_IDS, Finding

SAMPLES = Path(__file__).parent / "samples"
REAL = Path(__file__).parent / "real"
SAMPLE_TEXTS = [p.read_text(encoding="utf-8") for p in sorted(SAMPLES.iterdir())]
SAMPLE_TEXTS += [p.read_text(encoding="utf-8", errors="replace") for p in sorted(REAL.rglob("*"))
                 if p.is_file() and p.name != "manifest.yaml"][::4]

# Fragments that steer fuzzing into the parsers' interesting branches.
TOKENS = [
    "NVRM: Xid (PCI:0000:3b:00): ",
    "79",
    ", pid=12, name=python3, ",
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=",
    ", OpType=ALLREDUCE, Timeout(ms)=600000) ran for 1 milliseconds",
    "NCCL WARN ",
    "NCCL INFO ",
    'Thread 12 (idle): "MainThread"\n',
    "    all_reduce (x.py:1)\n",
    "GPU 00000000:18:00.0\n",
    "    ECC Errors\n        Volatile\n",
    "            DRAM Uncorrectable            : ",
    "    Remapped Rows\n        Pending : Yes\n",
    "| Volatile Uncorr. ECC |\n",
    "|   0  NVIDIA A100  On  | 00000000:18:00.0 Off |      3 |\n",
    '<nvidia_smi_log><gpu id="x"><ecc_errors><volatile><dram_uncorrectable>',
    "</dram_uncorrectable>",
    "GPU 0: NVIDIA A100 (UUID: GPU-1)\n\t Link 0: CRC Errors: ",
    "| Overall Health            | Failure |\n",
    "|       -> Memory system    | Warning |\n",
    "Capturing CUDA graph shapes: 100%|",
    "Capturing CUDA graphs (PIECEWISE):  3%|",
    "RuntimeError: CUDA error: invalid argument",
    "custom_all_reduce.cuh:164 'invalid argument'",
    "Connection closed by peer",
    "EngineDeadError",
    "Sequence group 1 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space",
    "Engine 000: Avg prompt throughput: 0.0 tokens/s, Running: 3 reqs, GPU KV cache usage: 99.0%",
    "      Reason:       CrashLoopBackOff\n",
    "      Exit Code:    137\n",
    "(APIServer pid=1) INFO 10-02 11:40:12 [loggers.py:123] Engine 000: Avg prompt throughput: 9.0 tokens/s, "
    "Avg generation throughput: 0.0 tokens/s, Running: 250 reqs, Waiting: 40 reqs, GPU KV cache usage: 97.5%\n",
    "[2025-01-01 00:00:00 TP0] Decode batch. #running-req: 6, #token: 9, token usage: 0.92, #queue-req: 40\n",
    "No available shared memory broadcast block found in 60 seconds.\n",
    "RPC call to execute_model timed out.",
    'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="0"} ',
    "| `DCGM_FI_DEV_ROW_REMAP_PENDING` | 1 |\n",
    "#Entity   EDVTL  ESVTL\nID\nGPU 0   ",
    "| GPU Memory                | Fail - GPU: 0   |\n",
    "| Error                     | GPU 3 has uncorrectable memory errors and row  |\n",
    "RuntimeError: CUDA error: uncorrectable ECC error encountered\n",
    "Capture cuda graph failed: ",
    '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 1, in capture_model\n',
    "Traceback (most recent call last):\n",
    "ProcessGroupNCCL'\ns watchdog got stuck for 480 seconds",
    "NVRM: Xid (PCI:...): 145, ",
    "caused by previous Xid 149",
    "XidCriticalError: Xid=48 on Device=GPU-1;",
    "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, ",
    '{"choices": [{"text": "',
    "'content': '",
    '"}]}\n',
    "Generated response cmpl-1: output: '!!!!', output_token_ids: [0, 0, 0], finish_reason: length\n",
    "CompletionOutput(index=0, text=' is is', token_ids=[563, 563]",
    "<|reserved_special_token_3|>",
    "|assistant|",
    "Привет世界มนุษย์",
    "\u0000",
    "    Remapped Rows\n        Pending : Yes\n",
    "ecc.errors.uncorrected.volatile.total, remapped_rows.pending\n0, Yes\n",
    "\t Link 1: <inactive>\n",
    "\n",
    "\r",
    "\x00",
    "\ufffd",
    " ",
    "|",
    ":",
    "(",
    ")",
]


def check(f: Finding, name: str) -> None:
    assert isinstance(f, Finding)
    assert f.file == name
    assert 0.0 <= f.confidence <= 1.0
    assert f.incident_hint is None or f.incident_hint in INCIDENT_IDS
    j = f.to_json()
    assert {"file", "kind", "benign", "incident_hint", "confidence", "facts"} <= j.keys()


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=3000))
def test_arbitrary_text(text: str) -> None:
    check(cl.classify_text(text, "fuzz"), "fuzz")


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=12)), max_size=60))
def test_token_soup(parts: list[str]) -> None:
    check(cl.classify_text("".join(parts), "soup"), "soup")


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(SAMPLE_TEXTS),
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=20_000), st.integers(0, 40), st.text(max_size=20)), max_size=8
    ),
)
def test_mutated_samples(text: str, edits: list[tuple[int, int, str]]) -> None:
    for pos, cut, insert in edits:
        pos = pos % (len(text) + 1)
        text = text[:pos] + insert + text[pos + cut :]
    check(cl.classify_text(text, "mutant"), "mutant")


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_through_a_file(data: bytes) -> None:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".log") as fh:
        fh.write(data)
        fh.flush()
        check(cl.classify_file(fh.name), fh.name)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.sampled_from(SAMPLE_TEXTS), st.integers(min_value=0, max_value=50_000))
def test_truncated_samples(text: str, cut: int) -> None:
    check(cl.classify_text(text[: cut % (len(text) + 1)], "cut"), "cut")


# ---- every parser alone, and the output analyzer ------------------------------------------------------
PARSERS = sorted(cl.parsers().items())
SOUP = st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=12)), max_size=60).map("".join)


@pytest.mark.parametrize(("pname", "fn"), PARSERS, ids=[p for p, _ in PARSERS])
@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(SOUP, st.text(max_size=2000), st.sampled_from(SAMPLE_TEXTS)))
def test_each_parser(pname: str, fn: Parser, text: str) -> None:
    result = fn(text, "p")
    items = [result] if isinstance(result, Finding) else list(result or ())
    for f in items:
        check(f, "p")


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(SOUP, st.text(max_size=3000)), prompt=st.one_of(st.none(), st.text(max_size=200)),
       ids=st.lists(st.integers(min_value=-5, max_value=200_000), max_size=50))
def test_output_analyzer(text: str, prompt: str | None, ids: list[int]) -> None:
    g = outputs.garbage(text, prompt, ids)
    assert isinstance(g.garbage, bool) and g.garbage == bool(g.reasons)
    samples, fmt = outputs.samples_of(text)
    assert fmt in ("", "json", "log", "text")
    for q in outputs.measure(samples).values():
        assert 0.0 <= q.rate <= 1.0
    f = outputs.parse_plain(text, "o")
    if f is not None:
        check(f, "o")


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=30)), max_size=80).map("".join))
def test_signature_matcher(text: str) -> None:
    for f in matcher.findings(text, "m"):
        check(f, "m")
        assert all(1 <= n <= len(text.splitlines()) for n in f.lines)
