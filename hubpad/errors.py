"""Every expected failure is a HubpadError, so the CLI can print one clean line and exit non-zero.

The subclasses let callers act on a kind of failure without reading messages: a lost publish race
(ConflictError), a bad config or input (ConfigError), bytes that do not match their hash (IntegrityError),
and a Hub answer hubpad cannot act on (HubError), or no answer at all (NetworkError).
"""


class HubpadError(Exception):
    """An error the user can act on; its message is shown as a single line, without a traceback."""


class ConfigError(HubpadError):
    """The input (config.json, headers, mirrors file, command-line values) cannot be planned as given."""


class IntegrityError(HubpadError):
    """Bytes read or found do not match the hash or size recorded for them."""


class HubError(HubpadError):
    """The Hub refused or failed a request; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NetworkError(HubError):
    """A host (the Hub, its storage) could not be reached at all: DNS, refused or dropped connections, timeouts."""


class ConflictError(HubError):
    """Someone else changed the target while this run worked (409/412): nothing of this run was published."""


class GatedError(HubError):
    """A gated repo whose terms the token's account has not accepted (or was not granted): the Hub refuses its files."""


class TargetTakenError(HubpadError):
    """The target holds what this run would replace, which only --force allows: files hubpad did not create, or a
    derivative of another upstream or TP. `holds` says what, in a few words ("files hubpad did not create")."""

    def __init__(self, message: str, holds: str) -> None:
        super().__init__(message)
        self.holds = holds
