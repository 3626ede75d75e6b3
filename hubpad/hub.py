"""Shared Hub plumbing: one HfApi honouring HF_ENDPOINT at call time, and Hub errors as one-line HubpadErrors."""

from __future__ import annotations

import os
from contextlib import contextmanager

from .errors import HubpadError
from .redact import redact


def endpoint() -> str:
    """HF_ENDPOINT read now (huggingface_hub reads it once at import), so tests and mirrors of the Hub work."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def api_for(token: str | None = None):
    """An HfApi on the current endpoint; the token comes from huggingface_hub's usual sources unless given."""
    from huggingface_hub import HfApi, get_token

    return HfApi(endpoint=endpoint(), token=token or get_token())


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


def base_model_card(api, upstream_card: str | None) -> str | None:
    """The README of the upstream's first `base_model` (to notice a license that differs), if reachable."""
    from .card import parse_card_metadata

    meta, _ = parse_card_metadata(upstream_card)
    base = meta.get("base_model")
    if isinstance(base, list):
        base = base[0] if base else None
    if not isinstance(base, str) or base.count("/") != 1:
        return None
    try:
        data = read_repo_file(api, base, "README.md")
    except HubpadError:
        return None
    return data.decode("utf-8", errors="replace") if data else None
