"""Test-wide setup: the Hub emulator fixtures (their module sets the client's env before it is imported)."""

from tests.emulator_fixtures import *  # noqa: F401,F403  (fixtures: hub, hub_api)
