"""Shared Hub plumbing: one HfApi honouring HF_ENDPOINT at call time, and Hub errors as one-line HubpadErrors."""

from __future__ import annotations

import os
from contextlib import contextmanager

from hubpad.errors import HubpadError
from hubpad.util.log import log
from hubpad.util.redact import redact


def endpoint() -> str:
    """HF_ENDPOINT read now (huggingface_hub reads it once at import), so tests and mirrors of the Hub work."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def api_for(token: str | None = None):
    """An HfApi on the current endpoint; the token comes from huggingface_hub's usual sources unless given."""
    from huggingface_hub import HfApi, get_token

    install_retries()
    return HfApi(endpoint=endpoint(), token=token or get_token())


# Answers the Hub gives for a request it did not carry out (rate limit, overload, gateway): worth trying again.
RETRY_STATUS = (429, 500, 502, 503, 504)
RETRIES = 4
_retries_installed = False


def install_retries() -> None:
    """Make huggingface_hub's shared HTTP client retry 429 (after Retry-After) and 5xx answers.

    huggingface_hub retries those for file transfers and a few listings, but not for most API calls (repo info,
    refs, branch, tag and commit POSTs), so one transient answer anywhere in a multi-hour mirror would end it.
    Only requests whose body is in memory are re-sent (file uploads are retried by huggingface_hub itself). A
    re-sent commit that had in fact landed fails its parent_commit guard, so nothing is published twice.
    """
    global _retries_installed
    if _retries_installed:
        return
    from huggingface_hub import set_client_factory

    set_client_factory(_retrying_client_factory)
    _retries_installed = True


def _retrying_client_factory():
    import time

    from huggingface_hub.utils import _http, httpx

    class RetryingClient(httpx.Client):
        def send(self, request, **kwargs):
            attempt = 0
            while True:
                response = super().send(request, **kwargs)
                if (response.status_code not in RETRY_STATUS or attempt >= RETRIES
                        or not isinstance(request.stream, httpx.ByteStream)):
                    return response
                attempt += 1
                wait = _retry_after(response.headers.get("Retry-After"))
                if wait is None:
                    wait = min(2 ** (attempt - 1), 8) * float(os.environ.get("HUBPAD_RESUME_BACKOFF", "1"))
                response.close()
                log(f"Hub answered {response.status_code} to {request.method} {request.url.path}; "
                    f"retry {attempt}/{RETRIES} in {wait:.1f}s")
                time.sleep(wait)

    try:
        base = _http.default_client_factory()  # same hooks and settings as huggingface_hub's own client
    except AttributeError:  # a huggingface_hub without it: its documented defaults
        return RetryingClient(follow_redirects=True, timeout=None)
    try:
        return RetryingClient(event_hooks=base.event_hooks, follow_redirects=base.follow_redirects,
                              timeout=base.timeout)
    finally:
        base.close()


def _retry_after(value: str | None) -> float | None:
    try:
        return min(max(float(value), 0.0), 60.0) if value is not None else None
    except ValueError:
        return None


@contextmanager
def hub_errors(what: str):
    """Turn huggingface_hub/httpx exceptions into one clear line (tokens redacted)."""
    from huggingface_hub import errors as e
    from huggingface_hub.utils import httpx

    try:
        yield
    except HubpadError:
        raise
    except e.RepositoryNotFoundError:
        raise HubpadError(f"{what}: repository not found, or the token cannot access it") from None
    except e.RevisionNotFoundError:
        raise HubpadError(f"{what}: revision not found") from None
    except e.EntryNotFoundError:
        raise HubpadError(f"{what}: file not found") from None
    except e.GatedRepoError:
        raise HubpadError(f"{what}: gated repository; accept its terms on the Hub with this token's account") from None
    except e.HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise HubpadError(redact(f"{what}: Hub error {status or ''} {first}".replace("  ", " "))) from None
    except (httpx.TransportError, httpx.StreamError) as exc:
        raise HubpadError(redact(f"{what}: network error ({type(exc).__name__}: {exc})")) from None


def whoami_name(api) -> str:
    with hub_errors("whoami (is HF_TOKEN set?)"):
        return api.whoami()["name"]


def read_repo_file(api, repo_id: str, path: str, revision: str | None = None) -> bytes | None:
    """A small file of a Hub repo, or None when the repo, revision or file does not exist."""
    from huggingface_hub import errors as e
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    url = hf_hub_url(repo_id, path, revision=revision or "main", endpoint=api.endpoint)
    try:
        r = get_session().get(url, headers=build_hf_headers(token=api.token), follow_redirects=True)
        hf_raise_for_status(r)
    except (e.RepositoryNotFoundError, e.RevisionNotFoundError, e.EntryNotFoundError):
        return None
    except e.HfHubHTTPError:
        with hub_errors(f"{repo_id}/{path}"):
            raise
    return r.content


