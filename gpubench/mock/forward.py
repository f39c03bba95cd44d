"""Serve a port mapping in loopback mode: a public port on 127.0.0.1 forwarded to the
instance's own port.

A rented machine's provider maps a container port to a public port (Vast.ai's `-p 29500:29500`
in a create's env, RunPod's `ports`); a client connects to the public one. In loopback mode every
mock instance shares this machine's loopback, so the mock listens on the public port it answered
and relays each connection to 127.0.0.1:<container port>, where the instance's process listens.
(In namespace mode the public address is the instance's own and the public port is the container
port: nothing to forward.)

Bounded: at most MAX_CONNECTIONS relayed at once (more are closed at once), a connect timeout to
the target, and stop() closes the listener and every relayed connection.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading

log = logging.getLogger("gpubench.mock")
MAX_CONNECTIONS = 32
CONNECT_TIMEOUT_S = 5.0
POLL_S = 0.2
CHUNK = 65536


class PortForwarder:
    """127.0.0.1:listen_port -> target_host:target_port, on one daemon thread per connection."""

    def __init__(self, listen_port: int, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", listen_port))     # OSError if taken: the caller picks another
        self._listener.listen(16)
        self._listener.settimeout(POLL_S)
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept_loop, name=f"mock-forward-{self.port}",
                                        daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                return                                     # listener closed by stop()
            with self._lock:
                full = len(self._open) >= 2 * MAX_CONNECTIONS     # two sockets per relayed connection
            if full:
                client.close()
                continue
            threading.Thread(target=self._relay, args=(client,), daemon=True,
                             name=f"mock-relay-{self.port}").start()

    def _relay(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=CONNECT_TIMEOUT_S)
        except OSError:
            client.close()                                 # nothing listens there: refuse, as a host would
            return
        pair = (client, upstream)
        with self._lock:
            self._open.update(pair)
        sel = selectors.DefaultSelector()
        try:
            for s in pair:
                s.setblocking(False)
                sel.register(s, selectors.EVENT_READ)
            while not self._stop.is_set():
                for key, _ in sel.select(POLL_S):
                    src = key.fileobj
                    dst = upstream if src is client else client
                    data = src.recv(CHUNK)
                    if not data:
                        return
                    dst.setblocking(True)
                    dst.sendall(data)
                    dst.setblocking(False)
        except OSError:
            pass
        finally:
            sel.close()
            with self._lock:
                self._open.difference_update(pair)
            for s in pair:
                s.close()

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            relayed = list(self._open)
        for s in relayed:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=2)
