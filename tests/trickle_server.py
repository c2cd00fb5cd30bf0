"""A local socket server that answers any HTTP request with a valid chat completion, one byte every
`interval_s` seconds (status line and headers included), for at most `give_up_s` seconds per
connection. httpx's per-read timeouts never fire against it; only a total deadline does."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator


def _answer(content: str) -> bytes:
    body = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def _trickle(conn: socket.socket, data: bytes, interval_s: float, give_up_s: float) -> None:
    start = time.monotonic()
    with conn:
        try:
            conn.recv(65536)  # the request; its content does not matter
            for byte in data:
                if time.monotonic() - start > give_up_s:
                    return
                conn.sendall(bytes([byte]))
                time.sleep(interval_s)
        except OSError:  # the client hung up
            return


@contextlib.contextmanager
def trickling_server(content: str = "Score: 5", interval_s: float = 0.2, give_up_s: float = 4.0) -> Iterator[str]:
    """Yields the base URL (`http://127.0.0.1:<port>/v1`) of a server that trickles `content`."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    data = _answer(content)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed at the end of the test
                return
            threading.Thread(target=_trickle, args=(conn, data, interval_s, give_up_s), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
        listener.close()
