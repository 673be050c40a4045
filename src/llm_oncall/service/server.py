"""The service's HTTP server: one ASGI app under uvicorn, in a thread of its own, on a socket bound at once (so
the port is known — and taken — before the loop starts).

What a hostile or broken client gets:
- a request (headers and body) that has not fully arrived `read_timeout` seconds after the connection opened, or
  after the previous answer on a kept-alive connection, is cut off (408 when part of it came): a slow-loris client
  cannot hold a connection; a connection that sent nothing is closed silently;
- an idle kept-alive connection is closed after `KEEP_ALIVE_S`;
- a client that hangs up before its answer is one log line; uvicorn's own log lines go to the JSON log as one line
  each, never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from llm_oncall.service.observability import Log

KEEP_ALIVE_S = 5
_REQUEST_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n" \
                   b"content-length: 40\r\n\r\n{\"error\": \"the request took too long\"}\r\n"


class _Config(uvicorn.Config):
    oncall_log: Log
    read_timeout_s: float


class _Protocol(H11Protocol):
    """uvicorn's h11 protocol with a read deadline per request and a log line for clients that hang up."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kw: Any) -> None:
        super().__init__(config, *args, **kw)
        assert isinstance(config, _Config)
        self.oncall_log = config.oncall_log
        self.read_timeout_s = config.read_timeout_s
        self.read_timer: asyncio.TimerHandle | None = None
        self.timed_out = False
        self.partial = False
        """Bytes of a request arrived since the last answer (an idle connection is closed without a 408)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def _arm(self) -> None:
        if self.read_timer is not None:
            self.read_timer.cancel()
        self.read_timer = self.loop.call_later(self.read_timeout_s, self._read_deadline)

    def data_received(self, data: bytes) -> None:
        self.partial = True
        super().data_received(data)

    def on_response_complete(self) -> None:
        self.partial = False
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request on this connection gets its own deadline

    def _read_deadline(self) -> None:
        self.read_timer = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and self.conn.their_state is h11.DONE:
            return  # the whole request arrived; the app is answering (its answer re-arms the deadline)
        if not self.partial:
            self.transport.close()  # idle (a browser's spare connection): nothing to answer
            return
        self.timed_out = True
        if cycle is None or cycle.response_complete or not cycle.response_started:
            if cycle is not None:
                cycle.disconnected = True  # the app's late answer is dropped
            self.transport.write(_REQUEST_TIMEOUT)
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.read_timer is not None:
            self.read_timer.cancel()
            self.read_timer = None
        cycle = self.cycle
        peer = f"{self.client[0]}:{self.client[1]}" if self.client else None
        if self.timed_out:
            self.oncall_log.warning("request read timeout: connection closed", client=peer,
                                    read_timeout_s=self.read_timeout_s)
        elif cycle is not None and not cycle.response_complete:
            self.oncall_log.info("client hung up before the answer", client=peer,
                                 method=cycle.scope["method"], path=cycle.scope["path"])
        super().connection_lost(exc)


class _ToLog(logging.Handler):
    """uvicorn's log records → the service's JSON log, one line each, an exception named but never traced."""

    def __init__(self, log: Log) -> None:
        super().__init__(logging.INFO)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields: dict[str, Any] = {"logger": record.name}
            if record.exc_info and record.exc_info[1] is not None:
                err = record.exc_info[1]
                fields["error"] = f"{type(err).__name__}: {err}"
            msg = record.getMessage()
            if record.levelno >= logging.ERROR:
                self.log.error(msg, **fields)
            elif record.levelno >= logging.WARNING:
                self.log.warning(msg, **fields)
            else:
                self.log.debug(msg, **fields)
        except Exception:  # a log line must never break the server
            self.handleError(record)


class HttpServer:
    def __init__(self, app: Any, host: str, port: int, log: Log, read_timeout_s: float = 10.0) -> None:
        self.log = log
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
            self.sock.listen(128)
        except OSError:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        config = _Config(app, http=_Protocol, lifespan="off", log_config=None, access_log=False,
                         timeout_keep_alive=KEEP_ALIVE_S, timeout_graceful_shutdown=3, server_header=False,
                         h11_max_incomplete_event_size=64 * 1024)
        config.oncall_log = log
        config.read_timeout_s = read_timeout_s
        self.server = uvicorn.Server(config)
        self.thread: threading.Thread | None = None
        self.handler = _ToLog(log)
        for name in ("uvicorn", "uvicorn.error"):
            lg = logging.getLogger(name)
            lg.addHandler(self.handler)
            lg.propagate = False
            lg.setLevel(logging.INFO)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return str(host), int(port)

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="http", daemon=True)
        self.thread.start()
        while not self.server.started and self.thread.is_alive():
            threading.Event().wait(0.01)

    def _run(self) -> None:
        try:
            asyncio.run(self.server.serve(sockets=[self.sock]))
        except Exception as exc:
            self.log.error("http server stopped", error=f"{type(exc).__name__}: {exc}")

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(10)
        self.sock.close()
        for name in ("uvicorn", "uvicorn.error"):
            logging.getLogger(name).removeHandler(self.handler)
