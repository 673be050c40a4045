"""Golden-prompt prober: fixed prompts at temperature 0, answers compared with references.

"HTTP 200 with wrong answers" is invisible to latency and error metrics.  Sending the same
prompts greedily to every pod and comparing the answers with references recorded while the
fleet was healthy turns it into a counter: mismatches concentrated on one pod point at that
pod's GPU (gpu-ecc); mismatches spread over every pod of one revision point at the rollout
(bad-model-rollout).

Metrics (a prometheus_client registry, rendered by `GoldenProber.render()`):
`llm_oncall_probe_requests_total{pod,revision}` (probes answered and compared),
`llm_oncall_probe_mismatches_total{pod,revision}` (answers that differ from the reference),
`llm_oncall_probe_errors_total{pod,revision}` (no answer: refused, timed out, non-200),
`llm_oncall_probe_garbage_total{pod,revision}` (answers that are garbage, not merely different: loops,
special tokens, control characters, script soup, empty; counted when the prober is given a ``garbage``
measure — the evidence layer's ``evidence.outputs.is_garbage``, passed in by the caller because the probe
sidecar imports only ``signals``).

References file: `{"version": 1, "max_tokens": N, "models": {model: {prompt: answer}}}`.
When recording, each prompt's reference is the answer most pods agree on, so one bad pod
present at recording time does not poison the references.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
from prometheus_client import CollectorRegistry, Counter, generate_latest

GOLDEN_PROMPTS: tuple[str, ...] = (
    "What is the capital of France? Answer in one word.",
    "Compute 17 * 23 and give only the number.",
    "List the first five prime numbers, separated by commas.",
    "Translate 'good morning' into German.",
    "Write the JSON object {\"ok\": true} and nothing else.",
    "Spell the word 'inference' backwards.",
    "Name the chemical symbol of gold.",
    "Complete the sequence: 2, 4, 8, 16,",
)
DEFAULT_MAX_TOKENS = 32

Refs = dict[str, dict[str, str]]
"""model → prompt → reference answer."""


def normalize(text: str) -> str:
    """Whitespace differences are not wrong answers."""
    return " ".join(text.split())


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    pod: str
    url: str
    """Base URL of the OpenAI-compatible server (e.g. http://10.0.0.7:8000); a trailing /v1 is accepted."""
    revision: str = "unknown"
    model: str | None = None
    """The served model; asked from /v1/models when None."""

    @property
    def base(self) -> str:
        url = self.url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url


@dataclass(slots=True)
class Outcome:
    pod: str
    revision: str
    prompt: str
    answer: str | None
    match: bool | None
    """None: no reference for this prompt (record mode) or no answer."""
    error: str | None = None


@dataclass(slots=True)
class RoundResult:
    outcomes: list[Outcome] = field(default_factory=list)

    def by_pod(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for o in self.outcomes:
            row = out.setdefault(o.pod, {"pod": o.pod, "revision": o.revision, "requests": 0, "mismatches": 0,
                                         "errors": 0})
            if o.error is not None:
                row["errors"] += 1
            else:
                row["requests"] += 1
                row["mismatches"] += 1 if o.match is False else 0
        return out


class GoldenProber:
    """Compares answers with references and keeps the counters (one instance per prober process)."""

    def __init__(self, refs: Refs | None = None, prompts: Iterable[str] = GOLDEN_PROMPTS,
                 max_tokens: int = DEFAULT_MAX_TOKENS,
                 garbage: Callable[[str, str], bool] | None = None) -> None:
        self.refs: Refs = {m: dict(a) for m, a in (refs or {}).items()}
        self.garbage_measure = garbage
        """(prompt, answer) → True when the answer is garbage; None: not measured."""
        self.prompts = tuple(prompts)
        self.max_tokens = max_tokens
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("pod", "revision")
        self.requests = Counter("llm_oncall_probe_requests", "Golden-prompt probes answered and compared",
                                labels, registry=self.registry)
        self.mismatches = Counter("llm_oncall_probe_mismatches",
                                  "Golden-prompt answers that differ from the reference", labels,
                                  registry=self.registry)
        self.errors = Counter("llm_oncall_probe_errors", "Golden-prompt probes without an answer", labels,
                              registry=self.registry)
        self.garbage = Counter("llm_oncall_probe_garbage", "Golden-prompt answers that are garbage (loops, special "
                               "tokens, control characters, script soup, empty)", labels, registry=self.registry)

    def prompts_for(self, model: str) -> tuple[str, ...]:
        """The prompts with a reference for `model` (all prompts when recording)."""
        known = self.refs.get(model)
        if not known:
            return self.prompts
        return tuple(p for p in self.prompts if p in known) or tuple(known)

    def judge(self, pod: str, revision: str, model: str, prompt: str, answer: str | None,
              error: str | None = None) -> Outcome:
        """Count one probe; returns what it showed."""
        if answer is None:
            self.errors.labels(pod, revision).inc()
            return Outcome(pod, revision, prompt, None, None, error or "no answer")
        ref = self.refs.get(model, {}).get(prompt)
        if ref is None and self.refs:
            # Checking, but nothing to compare with: an error, never a silent pass.
            self.errors.labels(pod, revision).inc()
            return Outcome(pod, revision, prompt, answer, None, f"no reference for model {model!r}")
        self.requests.labels(pod, revision).inc()
        if self.garbage_measure is not None and self.garbage_measure(prompt, answer):
            self.garbage.labels(pod, revision).inc()
        if ref is None:
            return Outcome(pod, revision, prompt, answer, None)
        match = normalize(answer) == normalize(ref)
        if not match:
            self.mismatches.labels(pod, revision).inc()
        return Outcome(pod, revision, prompt, answer, match)

    def render(self) -> str:
        return generate_latest(self.registry).decode()

    def totals(self) -> dict[tuple[str, str], tuple[float, float, float]]:
        """(pod, revision) → (requests, mismatches, errors) so far."""
        out: dict[tuple[str, str], list[float]] = {}
        for metric, idx in ((self.requests, 0), (self.mismatches, 1), (self.errors, 2)):
            for fam in metric.collect():
                for s in fam.samples:
                    if s.name.endswith("_total"):
                        key = (s.labels["pod"], s.labels["revision"])
                        out.setdefault(key, [0.0, 0.0, 0.0])[idx] = s.value
        return {k: (v[0], v[1], v[2]) for k, v in out.items()}


# ---- references --------------------------------------------------------------------------------------
def majority_refs(answers: Iterable[tuple[str, str, str]]) -> Refs:
    """(model, prompt, answer) triples → the most common answer per (model, prompt)."""
    tallies: dict[tuple[str, str], Tally[str]] = {}
    originals: dict[tuple[str, str, str], str] = {}
    for model, prompt, answer in answers:
        norm = normalize(answer)
        tallies.setdefault((model, prompt), Tally())[norm] += 1
        originals.setdefault((model, prompt, norm), answer)
    refs: Refs = {}
    for (model, prompt), tally in sorted(tallies.items()):
        best = max(sorted(tally), key=lambda a: tally[a])
        refs.setdefault(model, {})[prompt] = originals[(model, prompt, best)]
    return refs


def load_refs(path: Path) -> tuple[Refs, int]:
    """Read a references file → (refs, max_tokens).  Raises ValueError on a malformed file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read references: {exc}") from None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict) or not all(
            isinstance(m, str) and isinstance(a, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                               for k, v in a.items())
            for m, a in models.items()):
        raise ValueError(f"{path}: expected {{\"models\": {{model: {{prompt: answer}}}}}}")
    max_tokens = data.get("max_tokens", DEFAULT_MAX_TOKENS)
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"{path}: max_tokens must be a positive integer")
    return {m: dict(a) for m, a in models.items()}, max_tokens


def save_refs(path: Path, refs: Refs, max_tokens: int) -> None:
    data = {"version": 1, "max_tokens": max_tokens, "temperature": 0, "models": refs}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".refs-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)


# ---- over HTTP ---------------------------------------------------------------------------------------
def served_model(client: httpx.Client, target: ProbeTarget) -> str:
    if target.model:
        return target.model
    resp = client.get(target.base + "/v1/models")
    resp.raise_for_status()
    data = resp.json().get("data") or []
    if not data or not isinstance(data[0], dict) or not isinstance(data[0].get("id"), str):
        raise ValueError("/v1/models lists no model")
    return str(data[0]["id"])


def complete_http(client: httpx.Client, target: ProbeTarget, model: str, prompt: str, max_tokens: int) -> str:
    resp = client.post(target.base + "/v1/completions", json={
        "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "seed": 0, "n": 1})
    if resp.status_code != 200:
        raise RuntimeError(f"HTTP {resp.status_code}")
    choices = resp.json().get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0].get("text"), str):
        raise ValueError("no completion text in the answer")
    return str(choices[0]["text"])


def probe_round(prober: GoldenProber, targets: Iterable[ProbeTarget], client: httpx.Client,
                on_answer: Callable[[str, str, str], None] | None = None) -> RoundResult:
    """One pass of every prompt over every target; `on_answer(model, prompt, answer)` sees each answer."""
    result = RoundResult()
    models: dict[str, str] = {}
    for target in targets:
        try:
            model = models.get(target.pod) or served_model(client, target)
        except (httpx.HTTPError, ValueError, KeyError, AttributeError) as exc:
            err = f"{type(exc).__name__}: {exc}"[:200]
            for prompt in prober.prompts:
                result.outcomes.append(prober.judge(target.pod, target.revision, "", prompt, None, err))
            continue
        models[target.pod] = model
        for prompt in prober.prompts_for(model):
            try:
                answer: str | None = complete_http(client, target, model, prompt, prober.max_tokens)
                error = None
            except (httpx.HTTPError, RuntimeError, ValueError, AttributeError) as exc:
                answer, error = None, f"{type(exc).__name__}: {exc}"[:200]
            result.outcomes.append(prober.judge(target.pod, target.revision, model, prompt, answer, error))
            if answer is not None and on_answer is not None:
                on_answer(model, prompt, answer)
    return result


# ---- in-process, against the simulator --------------------------------------------------------------
class SimFleet(Protocol):
    """What the in-process prober needs from a simulated fleet (`llm_oncall.sim.Fleet` fits)."""

    @property
    def cfg(self) -> Any: ...

    def targets(self) -> dict[str, dict[str, str]]: ...

    def complete(self, pod: str, prompt: str, max_tokens: int, temperature: float = 0.0) -> str: ...


def _fleet_round(fleet: SimFleet, prober: GoldenProber, on_answer: Callable[[str, str, str], None] | None = None
                 ) -> RoundResult:
    result = RoundResult()
    model = str(fleet.cfg.model_name)
    for pod, labels in sorted(fleet.targets().items()):
        revision = labels.get("revision", "unknown")
        for prompt in prober.prompts_for(model):
            try:
                answer: str | None = fleet.complete(pod, prompt, prober.max_tokens, 0.0)
                error = None
            except (ConnectionError, TimeoutError) as exc:
                answer, error = None, f"{type(exc).__name__}: {exc}"
            result.outcomes.append(prober.judge(pod, revision, model, prompt, answer, error))
            if answer is not None and on_answer is not None:
                on_answer(model, prompt, answer)
    return result


def record_fleet(fleet: SimFleet, prompts: Iterable[str] = GOLDEN_PROMPTS,
                 max_tokens: int = DEFAULT_MAX_TOKENS) -> Refs:
    """References from the simulated fleet as it is now (record while it is healthy)."""
    answers: list[tuple[str, str, str]] = []
    _fleet_round(fleet, GoldenProber(None, prompts, max_tokens), lambda m, p, a: answers.append((m, p, a)))
    return majority_refs(answers)


def probe_fleet(fleet: SimFleet, refs: Refs | GoldenProber, rounds: int = 1) -> str:
    """Probe every pod of a simulated fleet (`fleet.complete`); returns the prober's /metrics page.

    Pass the same `GoldenProber` on every call to keep the counters growing across scrapes
    (what a prober process does); passing refs starts fresh counters.
    """
    prober = refs if isinstance(refs, GoldenProber) else GoldenProber(refs)
    for _ in range(max(1, rounds)):
        _fleet_round(fleet, prober)
    return prober.render()


def summarize(totals: Mapping[tuple[str, str], tuple[float, float, float]]) -> list[dict[str, Any]]:
    rows = []
    for (pod, revision), (req, mm, err) in sorted(totals.items()):
        rows.append({"pod": pod, "revision": revision, "requests": int(req), "mismatches": int(mm),
                     "errors": int(err), "mismatch_ratio": round(mm / req, 4) if req else None})
    return rows
