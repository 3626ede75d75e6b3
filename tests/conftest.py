"""Test-wide setup: the Hub emulator fixtures (their module sets the client's env before it is imported), and the
serving tier's session-wide zoo of upstreams, derivatives and original runs."""

from tests.emulator_fixtures import *  # noqa: F401,F403  (fixtures: hub, hub_api)
from tests.serve_fixtures import zoo  # noqa: F401  (one instance per session, shared by every serving test)
