"""Shared Hub plumbing: one HfApi honouring HF_ENDPOINT at call time, and Hub errors as one-line HubpadErrors."""

from __future__ import annotations

import os
import re
from contextlib import contextmanager

from hubpad.errors import ConflictError, GatedError, HubError, HubpadError, NetworkError
from hubpad.util.log import log
from hubpad.util.redact import redact


def endpoint() -> str:
    """HF_ENDPOINT read now (huggingface_hub reads it once at import), so tests and mirrors of the Hub work."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def api_for(token: str | bool | None = None):
    """An HfApi on the current endpoint; the token comes from huggingface_hub's usual sources unless given. `False`:
    no token at all, not even the machine's (a web page acting for a visitor who has not signed in)."""
    from huggingface_hub import HfApi, get_token

    install_retries()
    return HfApi(endpoint=endpoint(), token=False if token is False else token or get_token())


# Answers to a commit whose parent_commit is no longer the branch head: someone else published first.
CONFLICT_STATUS = (409, 412)
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
    """Turn huggingface_hub/httpx/hf_xet exceptions into one clear line (tokens redacted)."""
    from huggingface_hub import errors as e
    from huggingface_hub.utils import httpx

    try:
        yield
    except HubpadError:
        raise
    except e.FileDuplicationError as exc:
        raise HubError(redact(f"{what}: {duplication_failure(exc)}")) from None
    except e.GatedRepoError as exc:  # before RepositoryNotFoundError: huggingface_hub derives it from that
        status = getattr(getattr(exc, "response", None), "status_code", None)
        raise GatedError(f"{what}: gated repository; accept its terms on the Hub with this token's account",
                         status) from None
    except e.RepositoryNotFoundError:
        raise HubError(f"{what}: repository not found, or the token cannot access it", 404) from None
    except e.RevisionNotFoundError:
        raise HubpadError(f"{what}: revision not found") from None
    except e.EntryNotFoundError:
        raise HubpadError(f"{what}: file not found") from None
    except e.HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if status == 401:
            message = (f"{what}: the Hub refused the token (401 Unauthorized); check HF_TOKEN, or log in with "
                       f"`hf auth login`")
        else:  # the Hub's own text usually starts with the status already ("403 Forbidden: ...")
            message = f"{what}: Hub error {first}" if first.startswith(str(status)) else \
                f"{what}: Hub error {status or ''} {first}".replace("  ", " ")
        raise (ConflictError if status in CONFLICT_STATUS else HubError)(redact(message), status) from None
    except (httpx.TransportError, httpx.StreamError, e.OfflineModeIsEnabled) as exc:
        raise NetworkError(redact(f"{what}: {unreachable(exc)}")) from None
    except (ValueError, OSError, RuntimeError) as exc:
        message = copy_without_xet_hash(exc) or xet_failure(exc)
        if message is None:
            raise
        raise HubError(redact(f"{what}: {message}")) from None


def unreachable(exc: BaseException) -> str:
    """A transport failure (httpx), or huggingface_hub's offline mode, as what could not be reached and why:
    "could not reach https://host (...)"."""
    from huggingface_hub import errors as e

    if isinstance(exc, e.OfflineModeIsEnabled):
        return f"could not reach {endpoint()}: offline mode is enabled (HF_HUB_OFFLINE is set; unset it to use the Hub)"
    request = getattr(exc, "_request", None)  # httpx sets it when the error belongs to a request
    if request is not None:
        port = f":{request.url.port}" if request.url.port else ""
        host = f"{request.url.scheme}://{request.url.host}{port}"
    else:
        host = endpoint()
    reason = _first_line(exc)
    for known in ("Name or service not known", "nodename nor servname provided", "Temporary failure in name resolution"):
        if known in reason:
            reason = f"cannot resolve the host name: {known}"
    return f"could not reach {host} ({type(exc).__name__}: {reason}); check the network, or HF_ENDPOINT"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


_NO_XET_HASH = re.compile(r"Cannot duplicate LFS file '(?P<path>.+?)' from (?P<repo>\S+?): file has no xet hash")


def copy_without_xet_hash(exc: BaseException) -> str | None:
    """huggingface_hub's ValueError for a cross-repo copy whose source is classic LFS (no xetHash), as one line."""
    m = _NO_XET_HASH.search(str(exc)) if isinstance(exc, ValueError) else None
    if m is None:
        return None
    return (f"cannot copy {m['path']} server-side from {m['repo']}: it is stored as classic LFS, not in Xet "
            f"(no xetHash), and the Hub copies only Xet files between repos")


def duplication_failures(exc: BaseException) -> dict[str, str]:
    """{sha256: reason} of the files a FileDuplicationError names (its message lists `  - <sha256>: <error>`)."""
    return {m[1]: m[2].strip() for m in re.finditer(r"^\s*-\s*([0-9a-f]{64}):\s*(.*)$", str(exc), re.M)}


def duplication_failure(exc: BaseException) -> str:
    """A FileDuplicationError (server-side cross-repo copy refused per file) as one line."""
    failed = duplication_failures(exc)
    head = _first_line(exc).rstrip(":")
    if not failed:
        return f"server-side copy failed ({head})"
    sha, reason = next(iter(failed.items()))
    more = f" and {len(failed) - 1} more" if len(failed) > 1 else ""
    return f"server-side copy failed for {len(failed)} file(s) ({head}: {sha[:12]}… {reason}{more})"


# hf_xet's error texts start like this (xet-core's error Display), whatever Python class carries them.
_XET_PREFIXES = ("Network error:", "Server error:", "Task error:", "I/O error:", "Internal error:",
                 "Authentication error:", "Runtime error:", "Client error:")
_XET_TOKEN_ROUTE = re.compile(r"\((\d{3})[^)]*\)[^/]*domain: \S*/xet-(write|read)-token/")


def xet_failure(exc: BaseException) -> str | None:
    """An hf_xet exception (Xet storage upload/download) as one actionable line; None if it is not one."""
    try:
        import hf_xet
    except ImportError:  # pragma: no cover - hf_xet ships with huggingface_hub on every supported platform
        hf_xet = None
    first = _first_line(exc)
    if hf_xet is not None and isinstance(exc, hf_xet.XetAuthenticationError):
        return (f"Xet storage refused the access token ({first}); check that HF_TOKEN has write access to "
                f"the repo, then re-run")
    if hf_xet is not None and isinstance(exc, hf_xet.XetObjectNotFoundError):
        return f"Xet storage has no data for a file this run needs ({first}); re-run to upload it again"
    route = _XET_TOKEN_ROUTE.search(str(exc))
    if route and isinstance(exc, OSError):
        status, kind = route.groups()
        need = "write access to" if kind == "write" else "read access to"
        return (f"the Hub refused a Xet {kind} token (HTTP {status} from xet-{kind}-token); check that HF_TOKEN "
                f"has {need} the repo, then re-run")
    if type(exc) in (OSError, ConnectionError, TimeoutError, RuntimeError) and first.startswith(_XET_PREFIXES):
        return f"Xet transfer failed ({type(exc).__name__}: {first}); re-run to resume"
    return None


def whoami_name(api) -> str:
    """The token's user name: what default targets (`<user>/<name>-TP<N>`) are derived from."""
    from huggingface_hub import errors as e

    try:
        with hub_errors("whoami (is HF_TOKEN set?)"):
            return api.whoami()["name"]
    except e.LocalTokenNotFoundError:
        raise HubpadError("no Hugging Face token: set HF_TOKEN or run `hf auth login` (the default target is "
                          "<your user>/<name>-TP<N>; --to names another)") from None


# Roles in an org that may create repos there (the Hub's roleInOrg values; "read" may not).
WRITE_ROLES = ("admin", "write", "contributor")


def write_namespaces(api) -> set[str]:
    """The namespaces the token's account may create repos in: its own, and each org where its role may write
    (none for a read-only token)."""
    with hub_errors("whoami"):
        me = api.whoami()
    if ((me.get("auth") or {}).get("accessToken") or {}).get("role") == "read":
        return set()
    orgs = {o["name"] for o in me.get("orgs") or [] if o.get("roleInOrg") in WRITE_ROLES}
    return {me["name"], *orgs}


def search_models(api, text: str, limit: int = 10) -> list[str]:
    """Model repo ids whose name contains `text` (the Hub's own search, most downloaded first)."""
    with hub_errors(f"search {text!r}"):
        return [m.id for m in api.list_models(search=text, sort="downloads", limit=limit)]


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


