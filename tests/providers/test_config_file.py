"""Whatever is wrong with config.toml or a key in it is one line naming the file, from
the lookup and from a command, never a traceback."""

from __future__ import annotations

import pytest

from gpubench import paths
from gpubench.providers import credentials, registry
from gpubench.providers.credentials import ConfigError


def _config(content: bytes | str):
    path = paths.config_dir(create=True) / "config.toml"
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


def _lambda_key() -> str:
    return credentials.api_key(registry.entry("lambda"))


@pytest.mark.parametrize("content, words", [
    ('[lambda]\napi_key = "café"\n'.encode("latin-1"), "not UTF-8"),
    (b"\xff\xfe[lambda]\n", "not UTF-8"),
    ("[lambda\napi_key = 1\n", "not valid TOML"),
    ("[lambda]\napi_key = 12345\n", "must be a string"),
    ('lambda = "abc"\n', "must be a section"),
    ('[lambda]\napi_key = "caf\u00e9"\n', "characters an API key cannot hold"),
])
def test_a_bad_config_is_one_error_naming_the_file(content, words):
    path = _config(content)
    with pytest.raises(ConfigError) as e:
        _lambda_key()
    assert str(path) in str(e.value) and words in str(e.value) and "\n" not in str(e.value)


def test_a_directory_in_place_of_the_config():
    (paths.config_dir(create=True) / "config.toml").mkdir()
    with pytest.raises(ConfigError, match="is a directory"):
        _lambda_key()


def test_an_unreadable_config(monkeypatch):
    path = _config('[lambda]\napi_key = "k"\n')

    def refuse(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(type(path), "read_bytes", refuse)
    with pytest.raises(ConfigError, match="cannot read: Permission denied"):
        _lambda_key()


def test_a_good_key_and_no_section_still_work():
    _config('[vast]\napi_key = " vk "\n')
    assert credentials.api_key(registry.entry("vast")) == "vk"
    with pytest.raises(credentials.MissingKeyError):
        _lambda_key()


def test_an_environment_key_with_a_space_is_refused(monkeypatch):
    monkeypatch.setenv("LAMBDA_API_KEY", "secret part2")
    with pytest.raises(ConfigError, match=r"\$LAMBDA_API_KEY"):
        _lambda_key()


def test_a_command_says_it_in_one_line(cli):
    path = _config('[lambda]\napi_key = "café"\n'.encode("latin-1"))
    code, _, err = cli("offers", "lambda")
    assert code != 0
    assert "Traceback" not in err and str(path) in err and len(err.strip().splitlines()) == 1
