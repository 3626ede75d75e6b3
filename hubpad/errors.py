"""One exception type for every expected failure, so the CLI can print one clean line and exit non-zero."""


class HubpadError(Exception):
    """An error the user can act on; its message is shown as a single line, without a traceback."""
