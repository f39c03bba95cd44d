"""The machines behind mock instances: one real sshd per instance, on a loopback port
(loopback mode, the default) or on port 22 of a network namespace of its own (namespace mode,
see netns.py: the sshd and everything its sessions start run in that namespace, so traffic
between two instances crosses the mock's bridge).

Each instance gets a directory under <state>/instances/<provider>-<id>/ with its own host key,
sshd_config, authorized_keys and a home/ directory. sshd runs with a ForceCommand wrapper
(session.sh) that sets HOME to that home/, cds there, and puts the bin directory of the Python
running the mock first on PATH, so `python`, `torchrun` and `rsync` resolve as they would on a
PyTorch image; workloads then run on the CPU with gloo. Before it on PATH come the machine's
own stand-ins: `shutdown` and `sudo`, and an `nvidia-smi` that answers from the GPUs the
instance advertises (nvidia_smi.py; the bad-host fault spoils one check of it).

The SSH user is the OS user running the mock (root where the mock runs as root), whatever name
the provider's API would suggest (Lambda's ubuntu): sshd can only log in users that exist.

No sshd may outlive the mock: every sshd is started in its own session with
PR_SET_PDEATHSIG, its pid is recorded in the store, stop() kills its process group and every
process the instance's sessions started, and a restarted mock reaps pids a killed one left.
Start sshd only from one long-lived thread: PDEATHSIG fires when the *thread* that forked the
child exits, so a request thread would take its sshd down with it.
"""

from __future__ import annotations

import ctypes
import getpass
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import logging
import time
from pathlib import Path

from gpubench.launch.process import kill_group
from gpubench.mock.forward import PortForwarder
from gpubench.mock.netns import Network, NetnsError
from gpubench.mock.state import MockInstance, Store
from gpubench.providers.common import VOLUME_MOUNT

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
_PR_SET_PDEATHSIG = 1
READY_TIMEOUT_S = 5.0
NVIDIA_SMI = Path(__file__).with_name("nvidia_smi.py")
log = logging.getLogger("gpubench.mock")


def smi_name(gpu_name: str) -> tuple[str, int]:
    """The name nvidia-smi gives a GPU the provider calls `gpu_name`, and its memory in GB."""
    from gpubench.mock.catalog import GPUS
    from gpubench.providers.gpus import normalize_gpu_name

    wanted = normalize_gpu_name(gpu_name)
    for g in GPUS:
        spellings = (g.lambda_desc, g.vast_name, g.runpod_id, g.runpod_name)
        if any(s and normalize_gpu_name(s) == wanted for s in spellings):
            return (g.runpod_id or f"NVIDIA {g.runpod_name}"), g.memory_gb
    return f"NVIDIA {wanted or gpu_name}", 80


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:   # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def _listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def _processes_tagged(tags: set[str]) -> list[int]:
    """Pids whose environment carries GPUBENCH_MOCK_INSTANCE=<one of tags> (set by session.sh)."""
    wanted = {f"GPUBENCH_MOCK_INSTANCE={t}".encode() for t in tags}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = set(f.read().split(b"\0"))
        except OSError:
            continue
        if env & wanted:
            found.append(int(entry))
    return found


def netns_slot(inst: MockInstance) -> int | None:
    """The instance's place on the mock's bridge (namespace mode), None in loopback mode."""
    slot = inst.extra.get("netns_slot")
    return int(slot) if slot is not None else None


class InstanceHost:
    def __init__(self, root: Path, store: Store, network: Network | None = None) -> None:
        self.root = root
        self.store = store
        self.network = network       # namespace mode when set
        self.user = getpass.getuser()
        self._procs: dict[tuple[str, str], subprocess.Popen] = {}
        self._forwarders: dict[tuple[str, str], list[PortForwarder]] = {}
        # python, torchrun and pip of the interpreter running the mock (a venv's bin keeps torch)
        self.python_bin = str(Path(sys.executable).parent)

    def instance_dir(self, inst: MockInstance) -> Path:
        return self.root / "instances" / f"{inst.provider}-{inst.id}"

    def process_tag(self, provider: str, iid: str) -> str:
        """What marks the processes of one instance of this mock (and of no other mock)."""
        return f"{self.store.mock_id}-{provider}-{iid}"

    def home(self, inst: MockInstance) -> Path:
        return self.instance_dir(inst) / "home"

    def volume_dir(self, provider: str, vid: str) -> Path:
        """Where a mock volume's files live: outside every instance, so they outlive each."""
        return self.root / "volumes" / f"{provider}-{vid}"

    def _mount(self, inst: MockInstance, env: dict) -> None:
        """The instance's volume (inst.extra["volume"]: its id) at VOLUME_MOUNT under the
        instance's root directory, which its sessions are told of (GPUBENCH_MOCK_ROOT): a
        machine's / is the host's here, so the mount lives under a root of its own."""
        vid = inst.extra.get("volume")
        if not vid:
            return
        root = self.instance_dir(inst) / "root"
        mount = root / VOLUME_MOUNT.lstrip("/")
        target = self.volume_dir(inst.provider, str(vid))
        target.mkdir(parents=True, exist_ok=True)
        mount.parent.mkdir(parents=True, exist_ok=True)
        if not mount.is_symlink():
            mount.symlink_to(target, target_is_directory=True)
        env["GPUBENCH_MOCK_ROOT"] = str(root)

    def _prepare(self, inst: MockInstance) -> Path:
        d = self.instance_dir(inst)
        sshd_dir = d / "sshd"
        sshd_dir.mkdir(parents=True, exist_ok=True)
        self.home(inst).mkdir(parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)   # sshd's privilege-separation dir
        hostkey = sshd_dir / "ssh_host_ed25519_key"
        if not hostkey.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"mock-{inst.id}",
                            "-f", str(hostkey)], check=True, stdin=subprocess.DEVNULL, timeout=30)
        (sshd_dir / "authorized_keys").write_text("".join(k.strip() + "\n" for k in inst.authorized_keys))
        tag = self.process_tag(inst.provider, inst.id)
        bin_dir = self._halt_shims(inst)
        self._nvidia_smi(inst, bin_dir)
        env = dict(inst.extra.get("machine_env") or {})
        self._mount(inst, env)
        if inst.extra.get("bad_host"):
            env["GPUBENCH_MOCK_BAD_HOST"] = inst.extra["bad_host"]   # read by the preflight probe
        machine_env = "".join(f"export {k}={shlex.quote(str(v))}\n" for k, v in sorted(env.items()))
        session = sshd_dir / "session.sh"
        session.write_text(f"""#!/bin/sh
# ForceCommand of a mock {inst.provider} instance: its own HOME, the mock's Python first on PATH
# (after the machine's own shutdown and nvidia-smi), the variables the provider gives its machines.
export HOME={shlex.quote(str(self.home(inst)))}
export PATH={shlex.quote(str(bin_dir))}:{shlex.quote(self.python_bin)}:"$PATH"
export GPUBENCH_MOCK_INSTANCE={shlex.quote(tag)}
{machine_env}export GPUBENCH_MOCK_GPU_COUNT={inst.gpu_count}
export GPUBENCH_MOCK_GPU_NAME={shlex.quote(inst.gpu_name)}
cd "$HOME" || exit 1
if [ -n "$SSH_ORIGINAL_COMMAND" ]; then
  case "$SSH_ORIGINAL_COMMAND" in
    *sftp-server*|internal-sftp) exec {SFTP_SERVER} ;;
  esac
  exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
fi
exec /bin/bash -i
""")
        session.chmod(0o755)
        config = sshd_dir / "sshd_config"
        listen = "0.0.0.0" if self._slot(inst) is not None else "127.0.0.1"   # a namespace's own
        config.write_text(f"""Port {inst.ssh_port}
ListenAddress {listen}
HostKey {hostkey}
PidFile none
AuthorizedKeysFile {sshd_dir / 'authorized_keys'}
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
AllowUsers {self.user}
ForceCommand {session}
Subsystem sftp {SFTP_SERVER}
X11Forwarding no
PrintMotd no
PrintLastLog no
UseDNS no
MaxStartups 64:30:128
LogLevel ERROR
""")
        return config

    def halted_flag(self, inst: MockInstance) -> Path:
        return self.instance_dir(inst) / "halted"

    def halted(self, inst: MockInstance) -> bool:
        """Whether the instance ran `shutdown` (or `sudo shutdown`) since it booted."""
        return self.halted_flag(inst).exists()

    def _halt_shims(self, inst: MockInstance) -> Path:
        """`shutdown` and `sudo` first on the instance's PATH: a mock machine that halts
        itself must never halt the machine the mock runs on. `shutdown` leaves a flag
        that the engine's ticker turns into a stopped instance; `sudo` runs its command
        as the mock's user (the only user a mock instance has)."""
        bin_dir = self.instance_dir(inst) / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        flag = shlex.quote(str(self.halted_flag(inst)))
        shims = {"shutdown": f"#!/bin/sh\n# a mock machine halts by telling the mock\ntouch {flag}\n",
                 "sudo": "#!/bin/sh\nwhile [ \"${1#-}\" != \"$1\" ]; do shift; done\nexec \"$@\"\n"}
        for name, text in shims.items():
            path = bin_dir / name
            path.write_text(text)
            path.chmod(0o755)
        return bin_dir

    def _nvidia_smi(self, inst: MockInstance, bin_dir: Path) -> None:
        """A stand-in `nvidia-smi` first on the instance's PATH, answering from the GPUs
        the instance advertises (and its bad-host fault): see nvidia_smi.py."""
        name, memory_gb = smi_name(inst.gpu_name)
        config = self.instance_dir(inst) / "nvidia-smi.json"
        config.write_text(json.dumps({"name": name, "count": inst.gpu_count, "memory_mib":
                                      memory_gb * 1024 - 361, "seed": self.process_tag(inst.provider, inst.id),
                                      "bad": inst.extra.get("bad_host") or ""}))
        tool = bin_dir / "nvidia-smi"
        tool.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(NVIDIA_SMI))} "
                        f"{shlex.quote(str(config))} \"$@\"\n")
        tool.chmod(0o755)

    def _slot(self, inst: MockInstance) -> int | None:
        return netns_slot(inst) if self.network is not None else None

    def address(self, inst: MockInstance) -> str:
        """Where the instance's sshd (and every port it serves) is reached from this machine."""
        slot = self._slot(inst)
        return self.network.addresses(slot).public_ip if slot is not None else "127.0.0.1"

    def private_address(self, inst: MockInstance) -> str:
        slot = self._slot(inst)
        return self.network.addresses(slot).private_ip if slot is not None else "127.0.0.1"

    def start(self, inst: MockInstance) -> bool:
        """Start the instance's sshd and wait until it accepts connections.

        Loopback mode picks a new port if the recorded one is taken (after a restart); namespace
        mode makes the instance's namespace afresh and listens on port 22 there. Returns False
        if sshd would not come up; the caller keeps the instance booting."""
        key = (inst.provider, inst.id)
        proc = self._procs.get(key)
        if proc is not None and proc.poll() is None:
            return True
        slot = self._slot(inst)
        for attempt in range(2):
            if slot is not None:
                inst.ssh_port = 22
                try:
                    self.network.add_host(slot, self.hostname(inst))
                except NetnsError as e:
                    log.warning("mock instance %s-%s: %s", inst.provider, inst.id, e)
                    return False
            # a port someone else took meanwhile would make the readiness check below lie
            elif not inst.ssh_port or attempt or _listening(inst.ssh_port):
                inst.ssh_port = free_port()
            config = self._prepare(inst)
            proc = self._spawn_sshd(inst, config, slot)
            self.store.set_pid(inst.provider, inst.id, proc.pid)
            deadline = time.monotonic() + READY_TIMEOUT_S
            while time.monotonic() < deadline and proc.poll() is None:
                if _listening(inst.ssh_port, self.address(inst)):
                    self._procs[key] = proc
                    self._forward_ports(inst)
                    return True
                time.sleep(0.01)
            self._kill(proc)
            self.store.set_pid(inst.provider, inst.id, None)
        return False

    def hostname(self, inst: MockInstance) -> str:
        """The machine's name (namespace mode gives it one of its own; Lambda answers it)."""
        return inst.extra.get("hostname") or f"mock-{inst.id[:8]}"

    def _spawn_sshd(self, inst: MockInstance, config: Path, slot: int | None) -> subprocess.Popen:
        prefix = [] if slot is None else self.network.exec_prefix(slot, self.hostname(inst))
        return subprocess.Popen([*prefix, SSHD, "-D", "-e", "-f", str(config)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_die_with_parent, close_fds=True)

    def _forward_ports(self, inst: MockInstance) -> None:
        """Loopback mode: serve each extra public port the API answers (extra["port_map"],
        "29500/tcp" -> public port) by relaying it to the instance's own port. A public port
        taken meanwhile is replaced by a free one (the API then answers the new one)."""
        if self._slot(inst) is not None:
            return                       # namespace mode: public port = container port
        port_map = dict(inst.extra.get("port_map") or {})
        forwarders = []
        for name, public in port_map.items():
            container = int(str(name).split("/")[0])
            if not str(name).endswith("/tcp") or int(public) == container:
                continue
            try:
                fwd = PortForwarder(int(public), container)
            except OSError:
                fwd = PortForwarder(0, container)
                port_map[name] = fwd.port
            forwarders.append(fwd)
        inst.extra["port_map"] = port_map
        self._stop_forwarders(inst.provider, inst.id)
        self._forwarders[(inst.provider, inst.id)] = forwarders

    def _stop_forwarders(self, provider: str, iid: str) -> None:
        for fwd in self._forwarders.pop((provider, iid), []):
            fwd.stop()

    def plug(self, inst: MockInstance) -> bool:
        """An instance whose SSH refuses: in namespace mode its namespace exists (so its
        address answers, refusing), with no sshd in it. True once it is ready."""
        slot = self._slot(inst)
        if slot is not None and not self.network.exists(slot):
            try:
                self.network.add_host(slot, self.hostname(inst))
            except NetnsError as e:
                log.warning("mock instance %s-%s: %s", inst.provider, inst.id, e)
                return False
        return True

    def cut(self, inst: MockInstance) -> bool:
        """Namespace mode: take the instance's link down (node-dies). False in loopback mode."""
        slot = self._slot(inst)
        if slot is None or not self.network.exists(slot):
            return False
        self.network.cut(slot)
        return True

    def running(self, inst: MockInstance) -> bool:
        proc = self._procs.get((inst.provider, inst.id))
        return proc is not None and proc.poll() is None

    def update_keys(self, inst: MockInstance) -> None:
        p = self.instance_dir(inst) / "sshd" / "authorized_keys"
        if p.parent.exists():
            p.write_text("".join(k.strip() + "\n" for k in inst.authorized_keys))

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        kill_group(proc, grace=3)

    def stop(self, inst: MockInstance) -> None:
        """Stop the sshd and everything its sessions started (workloads run in their own sessions)."""
        proc = self._procs.pop((inst.provider, inst.id), None)
        if proc is not None:
            self._kill(proc)
        self.store.set_pid(inst.provider, inst.id, None)
        self._kill_tagged({self.process_tag(inst.provider, inst.id)})
        self._stop_forwarders(inst.provider, inst.id)
        slot = self._slot(inst)
        if slot is not None:
            self.network.remove_host(slot)               # its processes, namespace and veth
        self.halted_flag(inst).unlink(missing_ok=True)   # it boots afresh, if ever

    def stop_all(self) -> None:
        tags = {self.process_tag(p, i) for (p, i) in self._procs}
        for (provider, iid), proc in list(self._procs.items()):
            self._kill(proc)
            self.store.set_pid(provider, iid, None)
        self._procs.clear()
        if tags:
            self._kill_tagged(tags)
        for provider, iid in list(self._forwarders):
            self._stop_forwarders(provider, iid)

    @staticmethod
    def _kill_tagged(tags: set[str]) -> None:
        for pid in _processes_tagged(tags):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def reap_stale(self) -> int:
        """Kill sshd processes recorded by a mock that died without cleaning up."""
        reaped = 0
        for provider, iid, pid in self.store.pids():
            config = str(self.root / "instances" / f"{provider}-{iid}" / "sshd" / "sshd_config")
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read().decode(errors="replace")
            except OSError:
                cmdline = ""
            if config in cmdline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                    reaped += 1
                except (ProcessLookupError, PermissionError):
                    pass
            self.store.set_pid(provider, iid, None)
        return reaped
