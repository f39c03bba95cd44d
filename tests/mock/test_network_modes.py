"""Loopback mode (the default): which mode the mock says it is in, node-dies refused with the
reason, namespace mode falling back where it cannot work, and extra ports served by a forwarder."""

from __future__ import annotations

import socket
import threading

import pytest

from gpubench.mock import FaultSpecError, MockCloud, NodeDiesError, netns
from gpubench.mock.forward import PortForwarder
from tests.mock.helpers import pub, wait_for


def _serve_once(reply: bytes) -> tuple[socket.socket, threading.Thread]:
    """A listener on a free port of 127.0.0.1 that answers one connection with `reply`."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(10)

    def answer() -> None:
        try:
            conn, _ = srv.accept()
            with conn:
                conn.sendall(reply + conn.recv(64))
        except OSError:
            pass
    t = threading.Thread(target=answer, daemon=True)
    t.start()
    return srv, t


def test_forwarder_relays_both_ways_and_stops():
    srv, t = _serve_once(b"hello ")
    fwd = PortForwarder(0, srv.getsockname()[1])
    try:
        with socket.create_connection(("127.0.0.1", fwd.port), timeout=5) as c:
            c.sendall(b"there")
            c.settimeout(5)
            got = b""
            while len(got) < 11:
                chunk = c.recv(64)
                if not chunk:
                    break
                got += chunk
        assert got == b"hello there"
    finally:
        fwd.stop()
        srv.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", fwd.port), timeout=1)


def test_loopback_mode_says_so_and_refuses_node_dies(cloud):
    assert cloud.mode == "loopback" and cloud.mode_note == ""
    assert cloud.admin("/_mock/health") == {"ok": True, "network": {"mode": "loopback"}}
    with pytest.raises(FaultSpecError, match="needs namespace mode"):
        cloud.set_faults("vast:node-dies=1")
    with pytest.raises(NodeDiesError, match="needs namespace mode"):
        cloud.node_dies("vast", "1")
    import urllib.error
    with pytest.raises(urllib.error.HTTPError) as e:
        cloud.admin("/_mock/node-dies", {"provider": "vast", "id": "1"})
    assert e.value.code == 409


def test_node_dies_in_the_startup_faults_needs_namespaces(tmp_path):
    with pytest.raises(FaultSpecError, match="needs namespace mode"):
        MockCloud.start(state_dir=tmp_path / "s", faults="node-dies")


def test_namespace_mode_falls_back_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(netns, "available", lambda: "network namespaces need root (CAP_NET_ADMIN)")
    with MockCloud.start(state_dir=tmp_path / "s", netns=True) as cloud:
        assert cloud.mode == "loopback" and "need root" in cloud.mode_note
        health = cloud.admin("/_mock/health")["network"]
        assert health["mode"] == "loopback" and "need root" in health["note"]


@pytest.mark.slow
def test_vast_extra_port_is_served_on_loopback(vast, keys):
    srv, t = _serve_once(b"pong ")             # the instance's process on its container port
    port = srv.getsockname()[1]
    try:
        vast("POST", "/ssh/", json={"ssh_key": pub(keys["good"])})
        offer = vast("POST", "/bundles/", json={"num_gpus": {"eq": 1}, "limit": 1}).json()["offers"][0]
        iid = vast("PUT", f"/asks/{offer['id']}/", json={
            "client_id": "me", "image": "img", "disk": 10, "env": {f"-p {port}:{port}": "1"}}).json()["new_contract"]
        row = wait_for(lambda: (vast("GET", f"/instances/{iid}/").json()["instances"] or {}).get("ports"))
        public = int(row[f"{port}/tcp"][0]["HostPort"])
        assert public != port
        with socket.create_connection(("127.0.0.1", public), timeout=5) as c:
            c.sendall(b"x")
            c.settimeout(5)
            assert c.recv(64).startswith(b"pong")
        assert vast("DELETE", f"/instances/{iid}/").json()["success"]
        with pytest.raises(OSError):                # the forwarder went with the instance
            socket.create_connection(("127.0.0.1", public), timeout=1)
    finally:
        srv.close()


@pytest.mark.slow
def test_runpod_extra_port_is_served_on_loopback(rp, keys):
    srv, t = _serve_once(b"pong ")
    port = srv.getsockname()[1]
    try:
        gpu = rp("GET", "/catalog/gpus").json()["gpus"][0]["id"]
        pod = rp("POST", "/pods", json={"name": "p", "image": "img", "gpu": {"id": gpu, "count": 1},
                                        "ports": ["22/tcp", f"{port}/tcp"], "startSsh": True,
                                        "env": {"PUBLIC_KEY": pub(keys["good"])}}).json()
        pod = wait_for(lambda: (p := rp("GET", f"/pods/{pod['id']}").json())["status"] == "RUNNING" and p)
        mapped = {p["private"]: p["public"] for p in pod["runtime"]["ports"]}
        assert set(mapped) == {22, port} and mapped[22] == pod["ssh"]["direct"]["port"]
        with socket.create_connection(("127.0.0.1", mapped[port]), timeout=5) as c:
            c.sendall(b"x")
            c.settimeout(5)
            assert c.recv(64).startswith(b"pong")
    finally:
        srv.close()
