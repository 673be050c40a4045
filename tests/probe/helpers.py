"""Small pages in the vLLM exposition format, for the liveness rules."""

from __future__ import annotations


def vllm_page(running: float, waiting: float, steps: float | None = None, generated: float | None = None,
              start: float = 1_767_225_600.0, escaped: bool = False) -> str:
    """A /metrics page with the gauges and counters the liveness probe reads."""
    p = "vllm_" if escaped else "vllm:"
    model = 'model_name="m",engine="0"'
    lines = [
        "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
        "# TYPE process_start_time_seconds gauge",
        f"process_start_time_seconds {start}",
        f"# HELP {p}num_requests_running Number of requests in model execution batches.",
        f"# TYPE {p}num_requests_running gauge",
        f"{p}num_requests_running{{{model}}} {running}",
        f"# HELP {p}num_requests_waiting Number of requests waiting to be processed.",
        f"# TYPE {p}num_requests_waiting gauge",
        f"{p}num_requests_waiting{{{model}}} {waiting}",
    ]
    if generated is not None:
        lines += [f"# HELP {p}generation_tokens_total Number of generation tokens processed.",
                  f"# TYPE {p}generation_tokens_total counter",
                  f"{p}generation_tokens_total{{{model}}} {generated}"]
    if steps is not None:
        lines += [f"# HELP {p}iteration_tokens_total Histogram of the number of tokens per engine_step.",
                  f"# TYPE {p}iteration_tokens_total histogram"]
        for le in ("1.0", "8.0", "+Inf"):
            lines.append(f'{p}iteration_tokens_total_bucket{{{model},le="{le}"}} {steps}')
        lines += [f"{p}iteration_tokens_total_count{{{model}}} {steps}",
                  f"{p}iteration_tokens_total_sum{{{model}}} {steps * 4}"]
    return "\n".join(lines) + "\n"
