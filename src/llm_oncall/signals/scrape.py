"""Direct scraping of /metrics endpoints: concurrent, a whole-scrape timeout per target, failures recorded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import httpx

from llm_oncall.signals.source import Batch, Observation, Target, parse_for

MAX_PAGE_BYTES = 32 * 1024 * 1024
# Real vLLM keeps `vllm:` names only when served the classic text format; asking for it
# keeps names unescaped from any prometheus_client ≥ 0.23 exporter as well.
ACCEPT = "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1"


class ScrapeSource:
    """One `collect()` = one concurrent round over all targets."""

    def __init__(self, targets: Sequence[Target], timeout_s: float = 5.0, keep_text: bool = False,
                 clock: Callable[[], float] = time.time,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        if not targets:
            raise ValueError("no targets to scrape")
        for t in targets:
            if not t.url or not t.url.startswith(("http://", "https://")):
                raise ValueError(f"target {t.name}: URL must start with http:// or https:// (got {t.url!r})")
        self.targets = list(targets)
        self.timeout_s = timeout_s
        self.keep_text = keep_text
        self.clock = clock
        self.transport = transport

    def collect(self) -> Batch:
        return asyncio.run(self.collect_async())

    async def collect_async(self) -> Batch:
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
        async with httpx.AsyncClient(timeout=self.timeout_s, limits=limits, transport=self.transport,
                                     headers={"Accept": ACCEPT}, follow_redirects=False) as client:
            now = self.clock()
            results = await asyncio.gather(*(self._one(client, t, now) for t in self.targets))
        return Batch(observations=list(results))

    async def _one(self, client: httpx.AsyncClient, target: Target, now: float) -> Observation:
        assert target.url is not None
        try:
            # The timeout is for the whole scrape, as Prometheus' scrape_timeout: httpx's own timeouts bound each
            # read, and a server that trickles a page, or answers 20 s late, must still fail this round.
            async with asyncio.timeout(self.timeout_s):
                status, body = await self._fetch(client, target.url)
        except (httpx.TimeoutException, TimeoutError):
            return Observation(target, now, None, f"timeout after {self.timeout_s:g}s")
        except httpx.HTTPError as exc:
            return Observation(target, now, None, f"{type(exc).__name__}: {exc}"[:300])
        if status != 200:
            return Observation(target, now, None, f"HTTP {status}")
        if body is None:
            return Observation(target, now, None, f"page larger than {MAX_PAGE_BYTES} bytes")
        text = body.decode("utf-8", errors="replace")
        page = parse_for(target.kind, text)
        return Observation(target, now, page, None, text if self.keep_text else None)

    @staticmethod
    async def _fetch(client: httpx.AsyncClient, url: str) -> tuple[int, bytes | None]:
        """Status and body; the body is None past MAX_PAGE_BYTES (read no further than that)."""
        async with client.stream("GET", url) as resp:
            if resp.status_code != 200:
                return resp.status_code, b""
            chunks: list[bytes] = []
            size = 0
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > MAX_PAGE_BYTES:
                    return resp.status_code, None
                chunks.append(chunk)
            return resp.status_code, b"".join(chunks)
