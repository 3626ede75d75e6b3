"""Test-wide setup: the Hub emulator fixtures (their module sets the client's env before it is imported), and the
serving tier's session-wide zoo of upstreams, derivatives and original runs."""

from tests.emulator_fixtures import *  # noqa: F401,F403  (fixtures: hub, hub_api)
from tests.serve_fixtures import zoo  # noqa: F401  (one instance per session, shared by every serving test)
from tests.serve_fixtures import (  # noqa: F401  (HUBPAD_SERVE_STRICT: a serving row that skipped fails the run)
    pytest_collectreport, pytest_runtest_logreport, pytest_sessionfinish, pytest_terminal_summary)
