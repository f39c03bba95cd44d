"""What a cluster member says of its own network and interconnect, before its first run.

Standard library only: the same source runs here (imported, for tests) and on a
member (`python -c SOURCE HEAD_ADDRESS`), where it prints one JSON object:

    interface       the interface that carries traffic to the head's address (the
                    kernel's route: a UDP socket connected there, no packet sent), or
                    None when no route was found
    source_address  this member's address on that route
    comm_env        the NCCL_* / GLOO_* / TORCH_NCCL_* variables already set in the
                    member's environment (they win over what gpubench would choose)
    nvidia_smi_topo `nvidia-smi topo -m` as the machine prints it; None when absent
    ibstat          `ibstat` likewise; None when absent
"""

import fcntl
import json
import os
import socket
import struct
import subprocess
import sys

COMM_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL_")
SIOCGIFADDR = 0x8915  # <linux/sockios.h>: an interface's IPv4 address
TOOL_TIMEOUT_S = 20
TOOL_CHARS = 8000  # enough for an 8-GPU topo matrix; a record is not a log


def source_address(head):
    """This machine's address on the route to `head` (the head itself: that address)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((head, 9))  # UDP connect: a route lookup, nothing is sent
            return s.getsockname()[0]
    except OSError:
        return None


def interface_of(address):
    """The interface holding `address`, from each interface's IPv4 address."""
    if not address:
        return None
    for _, name in socket.if_nameindex():
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                packed = fcntl.ioctl(s.fileno(), SIOCGIFADDR,
                                     struct.pack("256s", name[:15].encode()))
        except OSError:
            continue  # no IPv4 address on it
        if socket.inet_ntoa(packed[20:24]) == address:
            return name
    return None


def tool_output(argv):
    """What a tool prints, or None when it is not there or fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip()[:TOOL_CHARS] or None


def probe(head):
    address = source_address(head)
    return {
        "interface": interface_of(address),
        "source_address": address,
        "comm_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(COMM_PREFIXES)},
        "nvidia_smi_topo": tool_output(["nvidia-smi", "topo", "-m"]),
        "ibstat": tool_output(["ibstat"]),
    }


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1])))
