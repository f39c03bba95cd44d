"""The provider tests' scripted HTTP server, for adapter launches in lifecycle tests."""

from tests.providers.conftest import fake_api  # noqa: F401
