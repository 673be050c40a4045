"""ScrapeSource against a real HTTP server on 127.0.0.1: pages, failures, and the whole-scrape timeout."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tests.testkit import free_port, wait_for

from llm_oncall.signals import scrape
from llm_oncall.signals.scrape import ScrapeSource
from llm_oncall.signals.source import Target

PAGE = b"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 7.0\n"
TRICKLE_CAP_S = 120.0
"""Only a safety net: the trickle gives up after this long (the scrape then fails with an error of its own)."""
trickle_hung_up = threading.Event()
"""Set when a client went away while the trickling page was still being sent."""


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def _head(self, status: int = 200, length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._head(length=len(PAGE))
            self.wfile.write(PAGE)
        elif self.path == "/error":
            self._head(500, 0)
        elif self.path == "/trickle":
            # A page that never ends: a comment byte every 10 ms, each well inside httpx's per-read timeout, so
            # only a timeout over the whole scrape can end it (until the safety cap closes the connection early).
            size = 16 * 1024 * 1024
            self._head(length=size)
            cap = time.monotonic() + TRICKLE_CAP_S
            try:
                self.wfile.write(b"#")
                while time.monotonic() < cap:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.01)
            except (BrokenPipeError, ConnectionResetError):
                trickle_hung_up.set()  # the scraper stopped reading: what the test wants
        elif self.path == "/huge":
            size = scrape.MAX_PAGE_BYTES + 1
            self._head(length=size)
            chunk = b"#" * 65536
            sent = 0
            try:
                while sent < size:
                    n = min(len(chunk), size - sent)
                    self.wfile.write(chunk[:n])
                    sent += n
            except (BrokenPipeError, ConnectionResetError):
                pass  # the scraper stopped reading: what the test wants


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _one(url: str, timeout_s: float = 5.0) -> tuple[str | None, float | None]:
    batch = ScrapeSource([Target("p", url)], timeout_s=timeout_s, keep_text=True).collect()
    obs = batch.observations[0]
    waiting = None
    if obs.page is not None:
        waiting = sum(s.value for s in obs.page.get("vllm:num_requests_waiting"))
    return obs.error, waiting


def test_page_is_parsed_and_kept(server: str) -> None:
    batch = ScrapeSource([Target("p", f"{server}/metrics")], keep_text=True).collect()
    obs = batch.observations[0]
    assert obs.error is None and obs.text == PAGE.decode()
    assert _one(f"{server}/metrics") == (None, 7.0)


def test_http_error_is_recorded(server: str) -> None:
    assert _one(f"{server}/error") == ("HTTP 500", None)


def test_refused_connection_is_recorded() -> None:
    error, page = _one(f"http://127.0.0.1:{free_port()}/metrics")
    assert page is None and error is not None and error.startswith("ConnectError")


def test_timeout_covers_the_whole_scrape(server: str) -> None:
    trickle_hung_up.clear()
    error, page = _one(f"{server}/trickle", timeout_s=1.0)
    assert (error, page) == ("timeout after 1s", None)
    # The scraper hung up while the page was still coming (it never ends): the whole-scrape timeout ended it.
    wait_for(trickle_hung_up.is_set, 60, "the trickling server to see the scraper hang up")


def test_oversized_page_is_refused(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scrape, "MAX_PAGE_BYTES", 1_000_000)
    error, page = _one(f"{server}/huge")
    assert (error, page) == ("page larger than 1000000 bytes", None)
