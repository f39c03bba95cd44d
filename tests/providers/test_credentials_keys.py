import os
import stat

import pytest

from gpubench import paths
from gpubench.lifecycle import keys
from gpubench.providers import credentials, registry
from gpubench.providers.common import MissingKeyError


def api_key(name: str) -> str:
    return credentials.api_key(registry.entry(name))


def test_env_first_then_tool_files_then_config(isolated, monkeypatch):
    home = isolated.home
    (paths.config_dir(create=True) / "config.toml").write_text('[lambda]\napi_key = "from-config"\n')
    assert api_key("lambda") == "from-config"
    (home / ".lambda_cloud").mkdir()
    (home / ".lambda_cloud" / "lambda_keys").write_text("api_key = from-tool\n")
    assert api_key("lambda") == "from-tool"
    monkeypatch.setenv("LAMBDA_API_KEY", "from-env")
    assert api_key("lambda") == "from-env"


def test_vast_and_runpod_tool_files(isolated):
    home = isolated.home
    (home / ".vast_api_key").write_text("vk\n")
    assert api_key("vast") == "vk"
    (home / ".config" / "vastai").mkdir(parents=True)
    (home / ".config" / "vastai" / "vast_api_key").write_text("vk2")
    assert api_key("vast") == "vk2"
    (home / ".runpod").mkdir()
    (home / ".runpod" / "config.toml").write_text('[default]\napi_key = "rk"\n')
    assert api_key("runpod") == "rk"


def test_missing_key_says_where_to_put_one():
    with pytest.raises(MissingKeyError) as e:
        api_key("runpod")
    assert "RUNPOD_API_KEY" in str(e.value) and "\n" not in str(e.value)


def test_keypair_created_once_with_0600(isolated):
    a = keys.ensure_keypair()
    assert a.public_key.startswith("ssh-ed25519 ")
    assert stat.S_IMODE(os.stat(a.private).st_mode) == 0o600
    assert keys.ensure_keypair() == a


def test_host_key_pinned_on_first_contact_and_change_refused(tmp_path):
    import paramiko

    k1, k2 = paramiko.Ed25519Key.from_private_key_file(str(_key(tmp_path, "a"))), \
        paramiko.Ed25519Key.from_private_key_file(str(_key(tmp_path, "b")))
    keys.pin_host_key("127.0.0.1", 2222, k1)
    keys.pin_host_key("127.0.0.1", 2222, k1)
    assert paths.known_hosts_path().read_text().startswith("[127.0.0.1]:2222 ssh-ed25519 ")
    with pytest.raises(keys.HostKeyChangedError, match="has changed"):
        keys.pin_host_key("127.0.0.1", 2222, k2)
    keys.forget_host("127.0.0.1", 2222)
    keys.pin_host_key("127.0.0.1", 2222, k2)


def _key(tmp, name):
    import subprocess

    p = tmp / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(p)], check=True)
    return p


@pytest.mark.parametrize("text", ['default = "x"\n', 'api_key = 5\n', '[default]\napi_key = ["k"]\n'])
def test_runpod_tool_file_of_the_wrong_shape_is_skipped(isolated, text):
    home = isolated.home
    (home / ".runpod").mkdir()
    (home / ".runpod" / "config.toml").write_text(text)
    with pytest.raises(MissingKeyError, match="RUNPOD_API_KEY"):
        api_key("runpod")
    (paths.config_dir(create=True) / "config.toml").write_text('[runpod]\napi_key = "from-config"\n')
    assert api_key("runpod") == "from-config"
