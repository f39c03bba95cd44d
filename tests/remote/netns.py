"""A test host in a network namespace of the test's own, joined by a veth pair:
real TCP over a link that the test can take down without any reset being sent,
as when a rented machine vanishes or a route dies."""

from __future__ import annotations

import os
import random
import subprocess
from dataclasses import dataclass

import pytest


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


@dataclass
class TestHost:
    name: str          # the namespace
    host_link: str     # the veth end in this namespace
    address: str       # the test host's address
    local_address: str

    @property
    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    @classmethod
    def create(cls) -> "TestHost":
        tag = f"{os.getpid() % 100000}{random.randrange(100)}"
        # a /30 of 10.231.0.0/16, a range kept for these tests' own namespaces
        block = random.randrange(16384) * 4
        net = f"10.231.{block // 256}.{block % 256}"
        base = net.rsplit(".", 1)[0]
        last = int(net.rsplit(".", 1)[1])
        host = cls(f"gbtest{tag}", f"gbh{tag}", f"{base}.{last + 2}", f"{base}.{last + 1}")
        try:
            _ip("netns", "add", host.name)
        except (OSError, subprocess.CalledProcessError) as e:
            pytest.skip(f"cannot create a network namespace here: {e}")
        try:
            _ip("link", "add", host.host_link, "type", "veth", "peer", "name", "eth0", "netns", host.name)
            _ip("addr", "add", f"{host.local_address}/30", "dev", host.host_link)
            _ip("link", "set", host.host_link, "up")
            _ip("-n", host.name, "addr", "add", f"{host.address}/30", "dev", "eth0")
            _ip("-n", host.name, "link", "set", "eth0", "up")
            _ip("-n", host.name, "link", "set", "lo", "up")
        except BaseException:
            host.destroy()
            raise
        return host

    def cut(self) -> None:
        """Take the link down inside the namespace: packets vanish, nobody is told."""
        _ip("-n", self.name, "link", "set", "eth0", "down")

    def destroy(self) -> None:
        """Kill what still runs in the namespace (runs orphaned by a cut), then remove it."""
        out = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True,
                             timeout=20).stdout
        for pid in out.split():
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=20)
        subprocess.run(["ip", "link", "del", self.host_link], capture_output=True, timeout=20)
