"""The upstream on the Hub: revision pinned to one commit sha, bytes read with ranged streaming GETs.

Reads go through huggingface_hub's own HTTP client (`http_stream_backoff`: auth headers, retries on
429/5xx honouring Retry-After). A dropped connection is resumed with `Range` from the last byte received,
a bounded number of times; a server that ignores `Range` is an error, never silently re-read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from hubpad.errors import ConfigError, HubpadError
from hubpad.source.base import CHUNK, FileEntry, Source
from hubpad.source.hub_api import api_for, hub_errors
from hubpad.util.refs import forced_local, is_repo_id

MAX_RESUMES = 8


class HubSource(Source):
    """A model repo on the Hub, pinned to the commit its revision pointed at when the run started."""

    kind = "hub"

    def __init__(self, repo_id: str, revision: str = "main", token: str | bool | None = None) -> None:
        if not is_repo_id(repo_id):
            raise ConfigError(f"{repo_id!r} is neither an existing local directory nor a Hub repo id (org/name); "
                              f"for a local directory write {forced_local(repo_id)}")
        self.label = repo_id
        self.repo_id = repo_id
        self.revision = revision
        self.api = api_for(token)
        with hub_errors(f"upstream {repo_id}@{revision}"):
            info = self.api.model_info(repo_id, revision=revision, files_metadata=True)
        self.commit = info.sha
        self._files: dict[str, FileEntry] = {}
        for s in info.siblings or []:
            lfs = getattr(s, "lfs", None)  # else a file kept in git: its blob id is what it can be checked by
            self._files[s.rfilename] = FileEntry(s.rfilename, int(s.size or 0), lfs.sha256 if lfs else None,
                                                 None if lfs else getattr(s, "blob_id", None))
        self.bytes_requested = 0
        self.range_ignored = 0  # responses that ignored Range (survived by skipping, but worth reporting)

    def files(self) -> dict[str, FileEntry]:
        return self._files

    def url(self, path: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo_id, path, revision=self.commit, endpoint=self.api.endpoint)

    def read_range(self, path: str, start: int, end: int) -> bytes:
        return b"".join(self.stream(path, start, end))

    def stream(self, path: str, start: int, end: int) -> Iterator[bytes]:
        """Bytes [start, end) with one ranged GET, resumed from the last byte after a dropped connection."""
        from huggingface_hub import constants
        from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_stream_backoff, httpx

        if end <= start:
            return
        url = self.url(path)
        pos, resumes = start, 0
        buf = bytearray()
        while pos < end:
            headers = build_hf_headers(token=self.api.token)
            headers.update({"Accept-Encoding": "identity", "Range": f"bytes={pos}-{end - 1}"})
            try:
                with http_stream_backoff("GET", url, headers=headers, timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT,
                                         retry_on_exceptions=(), follow_redirects=True) as r:
                    with hub_errors(f"upstream {self.repo_id}/{path}"):
                        hf_raise_for_status(r)
                    if r.status_code == 206:
                        first = _content_range_start(r.headers.get("Content-Range"))
                        if first != pos:
                            raise HubpadError(f"upstream {self.repo_id}/{path}: asked for byte {pos}, got {first}")
                        skip = 0
                    elif r.status_code == 200:  # Range ignored: the whole file comes; drop what precedes pos
                        skip = pos
                        self.range_ignored += 1
                    else:
                        raise HubpadError(f"upstream {self.repo_id}/{path}: unexpected HTTP {r.status_code}")
                    self.bytes_requested += end - pos
                    # iter_bytes() without a size hands over bytes as they arrive, so a dropped connection loses
                    # none of them; they are batched here into CHUNK-sized pieces for the writer.
                    for piece in r.iter_bytes():
                        if skip:
                            cut = min(skip, len(piece))
                            piece, skip = piece[cut:], skip - cut
                        if not piece:
                            continue
                        buf += piece[:end - pos - len(buf)]
                        if len(buf) >= CHUNK or pos + len(buf) >= end:
                            chunk, buf = bytes(buf), bytearray()
                            pos += len(chunk)
                            resumes = 0
                            yield chunk
                        if pos >= end:
                            break
                if pos + len(buf) < end:
                    raise httpx.RemoteProtocolError("connection closed before the requested range was complete")
            except (httpx.TransportError, httpx.RemoteProtocolError, httpx.StreamError) as exc:
                if buf:  # what did arrive is good: keep it and resume right after it
                    chunk, buf = bytes(buf), bytearray()
                    pos += len(chunk)
                    yield chunk
                resumes += 1
                if resumes > MAX_RESUMES:
                    raise HubpadError(f"upstream {self.repo_id}/{path}: download kept failing at byte {pos} "
                                      f"({type(exc).__name__}); giving up after {MAX_RESUMES} resumes") from None
                time.sleep(min(2 ** (resumes - 1) * _BACKOFF, 30))


_BACKOFF = float(os.environ.get("HUBPAD_RESUME_BACKOFF", "1"))


def _content_range_start(value: str | None) -> int | None:
    if not value or not value.startswith("bytes "):
        return None
    try:
        return int(value[6:].split("-", 1)[0])
    except ValueError:
        return None
