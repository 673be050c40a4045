"""The one way our small stdlib HTTP servers (probe sidecar, sim serve) write a response."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


def send(handler: BaseHTTPRequestHandler, code: int, ctype: str, data: bytes) -> None:
    handler.send_response(code)
    handler.send_header("Content-Type", ctype)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    try:
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout): fine
        handler.close_connection = True
