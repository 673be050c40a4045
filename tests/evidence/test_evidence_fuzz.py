"""classify_text never raises, on arbitrary text and on mutated real samples."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_oncall.evidence import classify as cl
from llm_oncall.evidence.model import INCIDENT_IDS, Finding

SAMPLES = Path(__file__).parent / "samples"
SAMPLE_TEXTS = [p.read_text(encoding="utf-8") for p in sorted(SAMPLES.iterdir())]

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


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=3000))
def test_arbitrary_text(text: str) -> None:
    check(cl.classify_text(text, "fuzz"), "fuzz")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=12)), max_size=60))
def test_token_soup(parts: list[str]) -> None:
    check(cl.classify_text("".join(parts), "soup"), "soup")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_through_a_file(data: bytes) -> None:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".log") as fh:
        fh.write(data)
        fh.flush()
        check(cl.classify_file(fh.name), fh.name)


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(SAMPLE_TEXTS), st.integers(min_value=0, max_value=50_000))
def test_truncated_samples(text: str, cut: int) -> None:
    check(cl.classify_text(text[: cut % (len(text) + 1)], "cut"), "cut")
