"""A server for the tests that behaves as a test says: it listens on 127.0.0.1 and runs a
behaviour per connection (hostile, late, closing), so the harness meets what real targets do."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

from nats_conformance.harness.servers.specs import RunningServer

INFO = b'INFO {"server_id":"fake","version":"0.0.0","proto":1,"headers":true}\r\n'

Behaviour = Callable[[socket.socket, threading.Event], None]


class FakeServer:
    """Listens on 127.0.0.1 and runs ``behave`` for each connection on a thread of its own."""

    def __init__(self, behave: Behaviour) -> None:
        self._behave = behave
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def running(self) -> RunningServer:
        url = f"nats://127.0.0.1:{self.port}"
        return RunningServer(
            url=url, host="127.0.0.1", port=self.port, version="0.0.0", log_path=None
        )

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._behave(conn, self._stop)
        except OSError:  # the client went away: what the misbehaviour is up against
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        for thread in list(self._threads):
            thread.join(timeout=5)
        assert not any(thread.is_alive() for thread in self._threads)
