"""One SSH connection to a machine (paramiko): connect within a bounded wait,
run a command and capture or stream its output, notice when the link drops.

Every call has a deadline. A host that does not answer is retried until the
connect wait runs out; an authentication failure or a changed host key is not
retried, since waiting cannot fix it.
"""

from __future__ import annotations

import codecs
import collections
import logging
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import paramiko

from gpubench.remote.errors import (ConnectionLostError, HostKeyChangedError,
                                    HostUnreachableError, SshError)
from gpubench.remote.hostkeys import PinOnFirstContact, changed_key_message, load_pinned
from gpubench.remote.target import SshTarget

TAIL_LINES = 200

# paramiko logs a dropped socket at ERROR from its transport thread; with no handler
# Python would print that to the terminal. What happened is reported as our own errors.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


@dataclass(frozen=True)
class ConnectOptions:
    connect_timeout: float = 10.0  # one TCP connect + SSH banner + auth attempt
    wait: float = 30.0             # keep retrying an unreachable host this long in all
    keepalive_s: int = 15          # so NAT boxes do not drop a quiet sweep
    dead_link_s: float = 60.0      # sent data unacknowledged this long: the link is dead
    retry_pause: float = 2.0


@dataclass
class StreamResult:
    exit_code: int | None  # None when the command was stopped for time
    tail: list[str] = field(default_factory=list)
    timed_out: bool = False


class SshConnection:
    def __init__(self, target: SshTarget, known_hosts: Path,
                 options: ConnectOptions = ConnectOptions()) -> None:
        self.target = target
        self.known_hosts = known_hosts
        self.options = options
        self._client: paramiko.SSHClient | None = None
        self._held: list[paramiko.Channel] = []  # hold()'s channels: one closes when collected

    # ------------------------------------------------------------------ connect
    def open(self, wait: float | None = None) -> None:
        """Connect, retrying a host that does not answer until `wait` seconds have passed."""
        self.close()
        wait = self.options.wait if wait is None else wait
        deadline = time.monotonic() + wait
        attempts, last = 0, "no attempt made"
        while True:
            attempts += 1
            remaining = deadline - time.monotonic()
            try:
                self._client = self._connect_once(max(1.0, min(self.options.connect_timeout, remaining)))
                return
            except (OSError, EOFError, paramiko.SSHException) as e:
                last = _describe(e)  # not answering (yet): worth another try
            if time.monotonic() + self.options.retry_pause >= deadline:
                raise HostUnreachableError(f"cannot reach {self.target} after {attempts} attempt(s) "
                                           f"in {wait:.0f}s: {last}")
            time.sleep(self.options.retry_pause)

    def _connect_once(self, timeout: float) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        load_pinned(client, self.known_hosts)
        client.set_missing_host_key_policy(PinOnFirstContact(self.known_hosts))
        try:
            client.connect(self.target.host, port=self.target.port, username=self.target.user,
                           key_filename=str(self.target.key_file), timeout=timeout,
                           banner_timeout=timeout, auth_timeout=timeout, channel_timeout=timeout,
                           look_for_keys=False, allow_agent=False)
        except paramiko.BadHostKeyException:
            client.close()
            raise HostKeyChangedError(changed_key_message(self.target.known_hosts_name,
                                                          self.known_hosts)) from None
        except paramiko.PasswordRequiredException:
            client.close()
            raise SshError(f"SSH key {self.target.key_file} is protected by a passphrase; "
                           "give a key without one (or load it into an agent-free copy)") from None
        except paramiko.AuthenticationException:
            client.close()
            raise SshError(f"{self.target} refused the key {self.target.key_file} "
                           "(is its public key in the machine's authorized_keys?)") from None
        except BaseException:
            client.close()
            raise
        transport = client.get_transport()
        assert transport is not None
        transport.set_keepalive(self.options.keepalive_s)
        notice_dead_link(transport.sock, self.options.dead_link_s)
        return client

    def close(self) -> None:
        self._held.clear()  # their channels close with the client
        if self._client is not None:
            self._client.close()
            self._client = None

    @property
    def alive(self) -> bool:
        transport = self._client.get_transport() if self._client else None
        return bool(transport and transport.is_active())

    def _dies_soon(self, within: float = 2.0) -> bool:
        """Whether the transport is dead or dies within a moment: a channel can close
        a little before its transport notices the socket is gone."""
        deadline = time.monotonic() + within
        while self.alive:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def __enter__(self) -> "SshConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ commands
    def _channel(self, command: str) -> paramiko.Channel:
        if not self.alive:
            raise ConnectionLostError(f"the SSH connection to {self.target} is closed")
        transport = self._client.get_transport()  # type: ignore[union-attr]
        try:
            chan = transport.open_session(timeout=self.options.connect_timeout)
            chan.set_combine_stderr(True)
            chan.exec_command(command)
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise ConnectionLostError(f"lost the SSH connection to {self.target}: {_describe(e)}") from None
        return chan

    def capture(self, command: str, timeout: float = 60.0) -> tuple[int, str]:
        """Run `command`, return its exit code and its output (stdout and stderr)."""
        chunks: list[str] = []
        result = self._pump(command, chunks.append, timeout, split_lines=False)
        if result.timed_out:
            raise SshError(f"a command on {self.target} did not finish in {timeout:.0f}s")
        return (result.exit_code if result.exit_code is not None else -1), "".join(chunks)

    def hold(self, command: str, ready: str, timeout: float = 30.0) -> str:
        """Start `command` on a channel of its own and leave it running for as long as
        this connection lives; returns what it printed before the line `ready`."""
        chan = self._channel(command)
        chan.settimeout(0.5)
        seen = ""
        deadline = time.monotonic() + timeout
        try:
            while ready not in seen.splitlines():
                if time.monotonic() > deadline:
                    raise SshError(f"a command on {self.target} did not start in {timeout:.0f}s")
                try:
                    data = chan.recv(4096)
                except socket.timeout:
                    continue
                if not data:
                    last = (seen.strip().splitlines() or ["no output"])[-1]
                    raise SshError(f"a command on {self.target} ended at once: {last}")
                seen += data.decode("utf-8", "replace")
        except BaseException:
            chan.close()
            raise
        self._held.append(chan)
        return seen.split(ready, 1)[0]

    def stream(self, command: str, on_line: Callable[[str], None], timeout: float,
               untailed: Callable[[str], bool] | None = None) -> StreamResult:
        """Run `command`, pass each output line to `on_line` as it arrives; the result's
        tail keeps the last ones, less those `untailed` says are not the command's own
        (what runs beside it says, which must not crowd out its last words).

        Raises ConnectionLostError when the link drops before the command's exit
        status arrives; the caller decides whether the remote process must be killed.
        """
        return self._pump(command, on_line, timeout, split_lines=True, untailed=untailed)

    def _pump(self, command: str, sink: Callable[[str], None], timeout: float,
              split_lines: bool, untailed: Callable[[str], bool] | None = None) -> StreamResult:
        chan = self._channel(command)
        chan.settimeout(0.5)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        pending = ""
        deadline = time.monotonic() + timeout

        def emit(text: str) -> None:
            nonlocal pending
            if not split_lines:
                sink(text)
                return
            pending += text
            *lines, pending = pending.split("\n")
            for line in lines:
                line = line.rstrip("\r")
                if untailed is None or not untailed(line):
                    tail.append(line)
                sink(line)

        try:
            while True:
                # checked on every pass: a command that keeps printing must stop at its deadline too
                if time.monotonic() > deadline:
                    return StreamResult(None, list(tail), timed_out=True)
                try:
                    data = chan.recv(65536)
                except socket.timeout:
                    if not self.alive:
                        break
                    continue
                if not data:
                    break
                emit(decoder.decode(data))
            emit(decoder.decode(b"", final=True))
            if split_lines and pending:
                emit("\n")
            # The exit status follows the end of output; a dropped link never sends it
            # (paramiko then closes the channel with exit_status -1).
            chan.status_event.wait(min(10.0, max(0.5, deadline - time.monotonic())))
            if chan.exit_status == -1:
                if self._dies_soon():
                    raise ConnectionLostError(f"lost the SSH connection to {self.target}")
                return StreamResult(-1, list(tail))  # killed by a signal: exit-signal, no status
            return StreamResult(chan.exit_status, list(tail))
        finally:
            chan.close()


def notice_dead_link(sock: socket.socket, seconds: float) -> None:
    """Have the kernel drop the connection once sent data stays unacknowledged for
    `seconds` (TCP_USER_TIMEOUT). With a keepalive packet sent every few seconds, a
    link that went silent (a machine gone, a cable pulled, no reset ever sent) is
    noticed within about that time, instead of at the run's own timeout."""
    if not isinstance(sock, socket.socket):
        return  # a proxy command's pipe: nothing to set
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_USER_TIMEOUT"):  # Linux
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(seconds * 1000))


def _describe(e: BaseException) -> str:
    if isinstance(e, socket.timeout):
        return "timed out"
    if isinstance(e, paramiko.ssh_exception.NoValidConnectionsError):
        return "connection refused"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]
