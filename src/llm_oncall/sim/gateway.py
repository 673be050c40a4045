"""The API gateway in front of the fleet: per-client rate limits, a max_tokens cap, and its own metrics.

Quality proxies (format compliance, repetition, control characters, thumbs-down feedback) are what a gateway
with a response inspector records per serving revision; they are fed from the simulated outputs.
"""

from __future__ import annotations

from collections import defaultdict

from llm_oncall.sim.exposition import fmt


class TokenBucket:
    __slots__ = ("burst", "last", "rate", "tokens")

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.last = 0.0

    def allow(self, t: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (t - self.last) * self.rate)
        self.last = t
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class Gateway:
    def __init__(self, clients: list[str]) -> None:
        self.clients = clients
        self.limits: dict[str, TokenBucket] = {}
        self.retry_limits: dict[str, TokenBucket] = {}
        """Per-client buckets for the attempts that carry the retry header (a retry budget at the gateway): with one,
        a client's retries no longer spend its first attempts' bucket."""
        self.max_tokens_cap: int | None = None
        self.requests: defaultdict[tuple[str, str, str], int] = defaultdict(int)
        self.retries: defaultdict[str, int] = defaultdict(int)
        self.received: defaultdict[str, int] = defaultdict(int)
        self.responses: defaultdict[str, int] = defaultdict(int)
        self.format_violations: defaultdict[str, int] = defaultdict(int)
        self.repetition: defaultdict[str, int] = defaultdict(int)
        self.control_chars: defaultdict[str, int] = defaultdict(int)
        self.feedback: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.latency_sum: defaultdict[str, float] = defaultdict(float)

    def set_rate_limit(self, client: str, rps: float | None) -> None:
        if rps is None:
            self.limits.pop(client, None)
        else:
            self.limits[client] = TokenBucket(rps, 2.0 * rps)

    def set_retry_limit(self, client: str, rps: float | None) -> None:
        if rps is None:
            self.retry_limits.pop(client, None)
        else:
            self.retry_limits[client] = TokenBucket(rps, 2.0 * rps)

    def admit(self, client: str, t: float, retry: bool) -> bool:
        self.received[client] += 1
        bucket = self.limits.get(client)
        if retry:
            self.retries[client] += 1
            bucket = self.retry_limits.get(client, bucket)
        if bucket is not None and not bucket.allow(t):
            self.requests[(client, "429", "none")] += 1
            return False
        return True

    def record(self, client: str, code: str, revision: str, latency: float = 0.0) -> None:
        self.requests[(client, code, revision)] += 1
        if code == "200":
            self.latency_sum[revision] += latency

    def record_quality(self, revision: str, violation: bool, repetition: bool, control: bool,
                       feedback: str | None) -> None:
        self.responses[revision] += 1
        if violation:
            self.format_violations[revision] += 1
        if repetition:
            self.repetition[revision] += 1
        if control:
            self.control_chars[revision] += 1
        if feedback is not None:
            self.feedback[(revision, feedback)] += 1

    def render(self) -> str:
        out: list[str] = []

        def family(name: str, kind: str, help_: str, rows: list[tuple[str, float]]) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(f"{name}{{{lab}}} {fmt(v)}" if lab else f"{name} {fmt(v)}" for lab, v in rows)

        family("gateway_requests_total", "counter", "Requests answered by the gateway, by client, HTTP status "
               "code and serving revision.", [
                   (f'client="{c}",code="{code}",revision="{r}"', float(n))
                   for (c, code, r), n in sorted(self.requests.items())])
        family("gateway_requests_received_total", "counter", "Requests received from clients (counted on "
               "arrival, before any response), by client.",
               [(f'client="{c}"', float(self.received.get(c, 0))) for c in self.clients])
        family("gateway_retries_total", "counter", "Requests carrying a retry-attempt header, by client.",
               [(f'client="{c}"', float(self.retries.get(c, 0))) for c in self.clients])
        revs = sorted(self.responses)
        family("gateway_responses_inspected_total", "counter", "Completed responses inspected for quality, by "
               "revision.", [(f'revision="{r}"', float(self.responses[r])) for r in revs])
        family("gateway_format_violations_total", "counter", "Responses violating the requested output format.",
               [(f'revision="{r}"', float(self.format_violations.get(r, 0))) for r in revs])
        family("gateway_repetition_detected_total", "counter", "Responses with degenerate repetition.",
               [(f'revision="{r}"', float(self.repetition.get(r, 0))) for r in revs])
        family("gateway_control_chars_total", "counter", "Responses containing control characters.",
               [(f'revision="{r}"', float(self.control_chars.get(r, 0))) for r in revs])
        family("gateway_feedback_total", "counter", "End-user feedback on responses, by rating and revision.",
               [(f'rating="{k}",revision="{r}"', float(self.feedback.get((r, k), 0)))
                for r in revs for k in ("down", "up")])
        family("gateway_request_duration_seconds_sum", "counter", "Total latency of successful requests.",
               [(f'revision="{r}"', self.latency_sum[r]) for r in sorted(self.latency_sum)])
        family("gateway_max_tokens_cap", "gauge", "max_tokens cap enforced by the gateway (0 = none).",
               [("", float(self.max_tokens_cap or 0))])
        family("gateway_rate_limit_requests_per_second", "gauge", "Per-client rate limit (absent = none).",
               [(f'client="{c}"', b.rate) for c, b in sorted(self.limits.items())])
        return "\n".join(out) + "\n"
