"""The Hub emulator, driven by the real huggingface_hub client (xet disabled, HTTP via httpx2).

These tests pin down the protocol behaviour hubpad relies on: if one fails after a huggingface_hub upgrade, the
emulator (and maybe hubpad) needs updating, not the test.
"""

from __future__ import annotations

import hashlib
import os
import time

import numpy as np
import pytest
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationCopy,
    CommitOperationDelete,
    HfApi,
    HfFileSystem,
    constants,
    hf_hub_download,
    hf_hub_url,
)
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_stream_backoff, httpx
from safetensors.numpy import save as st_save

# First: sets HF_HUB_DISABLE_XET & co. before huggingface_hub is imported (conftest.py normally did it already and
# provides the ``hub`` / ``hub_api`` fixtures).
from tests.emulator_fixtures import ALICE_TOKEN, ORG, READER_TOKEN  # noqa: I001

REPO = "alice/tiny"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _stream(url: str, token: str | None, range_: str | None = None) -> tuple[int, dict, bytes]:
    """One ranged streaming GET the way hubpad's HubSource does it (no retry on body errors)."""
    headers = {**build_hf_headers(token=token), "Accept-Encoding": "identity"}
    if range_:
        headers["Range"] = range_
    with http_stream_backoff("GET", url, headers=headers, timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT,
                             retry_on_exceptions=()) as r:
        if r.status_code != 416:
            hf_raise_for_status(r)
        return r.status_code, dict(r.headers), b"".join(r.iter_bytes(64 * 1024))


@pytest.fixture
def tiny(hub):
    """A public repo with a regular config and an LFS shard."""
    shard = os.urandom(300_000)
    hub.seed(REPO, {"config.json": b'{"model_type": "tiny"}', "model.safetensors": shard}, message="seed tiny")
    return shard


# ----------------------------------------------------------------------------------------------------------------
# accounts and repos
# ----------------------------------------------------------------------------------------------------------------


def test_whoami_and_tokens(hub, hub_api):
    me = hub_api.whoami()
    assert me["name"] == "alice" and me["auth"]["accessToken"]["role"] == "write"
    assert ORG in [o["name"] for o in me["orgs"]]
    assert HfApi(endpoint=hub.endpoint, token=READER_TOKEN).whoami()["auth"]["accessToken"]["role"] == "read"
    with pytest.raises(HfHubHTTPError) as err:
        HfApi(endpoint=hub.endpoint, token="hf_not_a_real_token").whoami()
    assert err.value.response.status_code == 401 and "Invalid user token" in str(err.value)
    # an unknown token on a repo route is a 401 that is NOT mistaken for RepositoryNotFound
    hub.seed(REPO, {"a.txt": b"a"})
    with pytest.raises(HfHubHTTPError) as err:
        HfApi(endpoint=hub.endpoint, token="hf_not_a_real_token").model_info(REPO)
    assert err.value.response.status_code == 401 and not isinstance(err.value, RepositoryNotFoundError)


def test_create_repo_private_exist_ok_and_permissions(hub, hub_api):
    url = hub_api.create_repo("alice/priv", private=True)
    assert url == f"{hub.endpoint}/alice/priv" and url.repo_id == "alice/priv"
    with pytest.raises(HfHubHTTPError) as err:
        hub_api.create_repo("alice/priv")
    assert err.value.response.status_code == 409
    assert hub_api.create_repo("alice/priv", exist_ok=True).repo_id == "alice/priv"
    info = hub_api.model_info("alice/priv")
    assert info.private is True and info.author == "alice" and len(info.sha) == 40
    # private: invisible to anonymous callers and to other users
    for token in (False, READER_TOKEN):
        with pytest.raises(RepositoryNotFoundError):
            HfApi(endpoint=hub.endpoint, token=token).model_info("alice/priv")
    assert hub_api.repo_exists("alice/priv") and not hub_api.repo_exists("alice/nope")
    # org repos: alice writes, bob (read-only token) reads but cannot write
    hub_api.create_repo(f"{ORG}/shared", private=True)
    bob = HfApi(endpoint=hub.endpoint, token=READER_TOKEN)
    assert bob.model_info(f"{ORG}/shared").private
    with pytest.raises(HfHubHTTPError) as err:
        bob.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=f"{ORG}/shared")
    assert err.value.response.status_code == 403
    with pytest.raises(HfHubHTTPError) as err:
        bob.create_repo("bob/mine")
    assert err.value.response.status_code == 403
    hub_api.delete_repo("alice/priv")
    assert not hub.repo_exists("alice/priv")
    # new repos start with the Hub's "initial commit" holding .gitattributes
    assert [c.title for c in hub.commits(f"{ORG}/shared")] == ["initial commit"]
    assert set(hub.files(f"{ORG}/shared")) == {".gitattributes"}


# ----------------------------------------------------------------------------------------------------------------
# uploads
# ----------------------------------------------------------------------------------------------------------------


def test_upload_regular_and_lfs(hub, hub_api, tmp_path):
    hub_api.create_repo(REPO)
    hub_api.upload_file(path_or_fileobj=b'{"a": 1}', path_in_repo="config.json", repo_id=REPO)
    assert not hub.find_requests("POST", r"lfs/objects/batch")  # regular files go inline in the commit
    shard = os.urandom(200_000)
    path = tmp_path / "model.safetensors"
    path.write_bytes(shard)
    hub.reset_log()
    info = hub_api.upload_file(path_or_fileobj=path, path_in_repo="model.safetensors", repo_id=REPO,
                               commit_message="add shard")
    kinds = [e.kind for e in hub.requests]
    assert kinds == ["preupload", "lfs-batch", "lfs-upload", "lfs-verify", "commit"]
    assert hub.bytes_uploaded(REPO) == len(shard)
    assert info.oid == hub.head(REPO) and hub.commits(REPO)[0].title == "add shard"
    assert hub.is_lfs(REPO, "model.safetensors") and not hub.is_lfs(REPO, "config.json")
    assert hub.file_bytes(REPO, "model.safetensors") == shard
    assert hub.files(REPO)["config.json"] == _sha(b'{"a": 1}')

    tree = {f.path: f for f in hub_api.list_repo_tree(REPO, recursive=True)}
    assert tree["model.safetensors"].lfs.sha256 == _sha(shard) and tree["model.safetensors"].size == len(shard)
    assert tree["config.json"].lfs is None
    info = hub_api.model_info(REPO, files_metadata=True)
    sib = {s.rfilename: s for s in info.siblings}
    assert sib["model.safetensors"].lfs.sha256 == _sha(shard) and sib["model.safetensors"].size == len(shard)
    assert "safetensors" in info.tags

    # same content again: the batch says "already present", preupload's oid makes the client skip the commit
    hub.reset_log()
    hub_api.upload_file(path_or_fileobj=path, path_in_repo="model.safetensors", repo_id=REPO)
    assert [e.kind for e in hub.requests] == ["preupload", "lfs-batch", "info"] and hub.bytes_uploaded() == 0


def test_xet_is_disabled_and_the_emulator_says_so_otherwise(hub, hub_api, monkeypatch):
    from huggingface_hub.utils._runtime import is_xet_available

    assert constants.HF_HUB_DISABLE_XET and not is_xet_available()
    hub_api.create_repo(REPO)
    # with xet enabled the client decides alone to upload via xet (hf_xet asks the xet-write-token route itself);
    # the emulator refuses (400 + "set HF_HUB_DISABLE_XET=1"), which surfaces as an opaque ConnectionError
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)
    if not is_xet_available():
        pytest.skip("hf_xet not installed")
    with pytest.raises((ConnectionError, HfHubHTTPError)):
        hub_api.upload_file(path_or_fileobj=os.urandom(1000), path_in_repo="w.safetensors", repo_id=REPO)
    assert hub.find_requests("GET", r"/xet-write-token/")


def test_multipart_upload_and_already_present(hub, hub_api):
    hub.multipart_threshold, hub.multipart_chunk_size = 1_000, 400
    hub_api.create_repo(REPO)
    data = os.urandom(2_500)
    hub.faults.status(500, r"/part/3$")  # a transient S3 error on one part: the client re-sends that part
    hub_api.upload_file(path_or_fileobj=data, path_in_repo="w.safetensors", repo_id=REPO)
    parts = hub.find_requests("PUT", r"/part/")
    assert [p.path.rsplit("/", 1)[-1] for p in parts] == ["1", "2", "3", "3", "4", "5", "6", "7"]
    assert [p.status for p in parts].count(500) == 1 and sum(e.bytes_received for e in parts) == 2_500 + 400
    assert len(hub.find_requests("POST", kind="lfs-complete")) == 1
    assert hub.file_bytes(REPO, "w.safetensors") == data
    # the same object under another name: the batch answers "already present", nothing is re-uploaded
    hub.reset_log()
    hub_api.upload_file(path_or_fileobj=data, path_in_repo="copy.safetensors", repo_id=REPO)
    assert hub.bytes_uploaded() == 0 and hub.file_bytes(REPO, "copy.safetensors") == data


def test_lfs_upload_content_must_match_oid(hub, hub_api):
    hub_api.create_repo(REPO)
    good, bad = b"a" * 100, b"b" * 100
    headers = {**build_hf_headers(token=ALICE_TOKEN), "Accept": "application/vnd.git-lfs+json",
               "Content-Type": "application/vnd.git-lfs+json"}
    batch = httpx.post(f"{hub.endpoint}/{REPO}.git/info/lfs/objects/batch", headers=headers,
                       json={"operation": "upload", "transfers": ["basic"], "hash_algo": "sha256",
                             "objects": [{"oid": _sha(good), "size": 100}]}).json()
    href = batch["objects"][0]["actions"]["upload"]["href"]
    r = httpx.put(href, content=bad)
    assert r.status_code == 400 and "does not match" in r.headers["X-Error-Message"]
    # the commit cannot reference an object that never arrived
    with pytest.raises(HfHubHTTPError):
        hub_api.create_commit(REPO, [_ghost_lfs_op("w.safetensors", good)], commit_message="ghost")
    assert httpx.put(href, content=good).status_code == 200
    hub_api.create_commit(REPO, [_ghost_lfs_op("w.safetensors", good)], commit_message="ghost")
    assert hub.file_bytes(REPO, "w.safetensors") == good


def _ghost_lfs_op(path: str, content: bytes) -> CommitOperationAdd:
    """A pre-uploaded LFS file referenced by sha256 only (reference §4.4)."""
    from huggingface_hub.lfs import UploadInfo

    op = CommitOperationAdd(path_in_repo=path, path_or_fileobj=b"")
    op.upload_info = UploadInfo(size=len(content), sample=b"", sha256=hashlib.sha256(content).digest())
    op._upload_mode, op._is_uploaded, op._should_ignore = "lfs", True, False
    return op


# ----------------------------------------------------------------------------------------------------------------
# commits, copies, branches
# ----------------------------------------------------------------------------------------------------------------


def test_staging_branch_copy_commit_and_stale_parent(hub, hub_api):
    hub.seed(REPO, {"config.json": b"{}", "old.safetensors": os.urandom(1000), "sub/a.txt": b"a"})
    base = hub_api.model_info(REPO).sha
    hub_api.create_branch(REPO, branch="hubpad-staging", revision=base)
    hub_api.create_branch(REPO, branch="hubpad-staging", exist_ok=True)
    with pytest.raises(HfHubHTTPError) as err:
        hub_api.create_branch(REPO, branch="hubpad-staging")
    assert err.value.response.status_code == 409
    shard = os.urandom(5000)
    hub_api.create_commit(REPO, [CommitOperationAdd("model.safetensors", shard)], commit_message="staging shard",
                          revision="hubpad-staging")
    assert hub.head(REPO) == base  # main untouched

    hub.reset_log()
    ops = [
        CommitOperationCopy("model.safetensors", "model.safetensors", src_revision="hubpad-staging"),
        CommitOperationDelete("old.safetensors"),
        CommitOperationDelete("sub/", is_folder=True),
        CommitOperationAdd("README.md", b"---\nlicense: apache-2.0\ntags: [hubpad]\n---\n# tiny\n"),
    ]
    info = hub_api.create_commit(REPO, ops, commit_message="publish", parent_commit=base)
    assert [e.kind for e in hub.requests] == ["validate-yaml", "preupload", "paths-info", "paths-info", "commit"]
    assert [e.path.rsplit("/", 1)[-1] for e in hub.find_requests(kind="paths-info")] == ["main", "hubpad-staging"]
    assert hub.bytes_uploaded() == 0  # the copy is server-side
    assert set(hub.files(REPO)) == {".gitattributes", "config.json", "model.safetensors", "README.md"}
    assert hub.file_bytes(REPO, "model.safetensors") == shard and info.oid == hub.head(REPO)
    assert hub.commits(REPO)[0].parent == base
    card = hub_api.model_info(REPO)
    assert card.card_data["license"] == "apache-2.0" and "hubpad" in card.tags

    # a second publish guarded by the (now stale) base commit is refused with 412
    with pytest.raises(HfHubHTTPError) as err:
        hub_api.create_commit(REPO, [CommitOperationAdd("x.txt", b"x")], commit_message="late", parent_commit=base)
    assert err.value.response.status_code == 412 and "A commit has happened since" in str(err.value)

    hub_api.delete_branch(REPO, branch="hubpad-staging")
    assert set(hub.branches(REPO)) == {"main"}
    refs = hub_api.list_repo_refs(REPO)
    assert [(b.name, b.target_commit) for b in refs.branches] == [("main", hub.head(REPO))]


def test_cross_repo_copy_is_server_side(hub, hub_api):
    src = f"{ORG}/upstream"
    blob = os.urandom(4000)
    hub.seed(src, {"model.safetensors": blob, "tokenizer_config.json": b'{"x": 1}'})
    hub_api.create_repo(REPO)
    hub_api.create_commit(REPO, [
        CommitOperationCopy("model.safetensors", "model.safetensors", src_repo_id=src, src_repo_type="model"),
        CommitOperationCopy("tokenizer_config.json", "tokenizer_config.json", src_repo_id=src,
                            src_repo_type="model"),
    ], commit_message="carry upstream files")
    assert hub.file_bytes(REPO, "model.safetensors") == blob and hub.bytes_uploaded() == 0
    assert len(hub.find_requests("POST", kind="lfs-duplicate")) == 1


def test_commit_history_revisions_and_errors(hub, hub_api, tmp_path):
    first = hub.seed(REPO, {"config.json": b"v1"}, message="one")
    second = hub.seed(REPO, {"config.json": b"v2"}, message="two")
    commits = hub_api.list_repo_commits(REPO)
    assert [c.commit_id for c in commits[:2]] == [second, first]
    assert [c.title for c in commits] == ["two", "one", "initial commit"]
    assert hub_api.model_info(REPO, revision=first).sha == first
    # pinning: downloads by commit sha see the old content
    old = hf_hub_download(REPO, "config.json", revision=first, endpoint=hub.endpoint, cache_dir=tmp_path)
    assert open(old, "rb").read() == b"v1"
    assert hub_api.file_exists(REPO, "config.json") and not hub_api.file_exists(REPO, "missing.json")
    with pytest.raises(RevisionNotFoundError):
        hub_api.model_info(REPO, revision="no-such-branch")
    with pytest.raises(RepositoryNotFoundError):
        hub_api.list_repo_tree(REPO + "-nope").__next__()
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(REPO, "missing.json", endpoint=hub.endpoint, cache_dir=tmp_path)
    with pytest.raises(EntryNotFoundError):
        list(hub_api.list_repo_tree(REPO, path_in_repo="nodir"))
    with pytest.raises(ValueError, match="Invalid metadata in README.md"):
        hub_api.upload_file(path_or_fileobj=b"---\nlicense: [unclosed\n---\n", path_in_repo="README.md",
                            repo_id=REPO)


def test_tree_pagination_expand_and_paths_info(hub, hub_api):
    hub.tree_page_size = 3
    hub.seed(REPO, {f"dir/f{i}.txt": str(i) for i in range(5)} | {"top.txt": b"t"}, message="many")
    files = [f.path for f in hub_api.list_repo_tree(REPO, recursive=True)]
    assert sorted(files) == sorted([".gitattributes", "dir", "top.txt", *[f"dir/f{i}.txt" for i in range(5)]])
    assert len(hub.find_requests("GET", kind="tree")) == 3  # 8 entries, pages of 3
    top = {f.path: f for f in hub_api.list_repo_tree(REPO, expand=True)}
    assert set(top) == {".gitattributes", "dir", "top.txt"} and top["top.txt"].last_commit.title == "many"
    info = hub_api.get_paths_info(REPO, ["top.txt", "dir", "missing"])
    assert [type(i).__name__ for i in info] == ["RepoFile", "RepoFolder"]


def test_datasets_and_hf_file_system(hub):
    api = HfApi(endpoint=hub.endpoint, token=ALICE_TOKEN)
    api.create_repo("alice/data", repo_type="dataset")
    payload = os.urandom(20_000)
    api.upload_file(path_or_fileobj=payload, path_in_repo="x.parquet", repo_id="alice/data", repo_type="dataset")
    assert hub.is_lfs("alice/data", "x.parquet", repo_type="dataset")
    assert api.dataset_info("alice/data", files_metadata=True).siblings[-1].lfs.sha256 == _sha(payload)
    fs = HfFileSystem(endpoint=hub.endpoint, token=ALICE_TOKEN, skip_instance_cache=True)
    with fs.open("datasets/alice/data/x.parquet", "rb") as f:
        f.seek(1000)
        assert f.read(500) == payload[1000:1500]


# ----------------------------------------------------------------------------------------------------------------
# reads
# ----------------------------------------------------------------------------------------------------------------


def test_hf_hub_download_redirects_to_cdn(hub, tiny, tmp_path):
    path = hf_hub_download(REPO, "model.safetensors", endpoint=hub.endpoint, cache_dir=tmp_path)
    assert open(path, "rb").read() == tiny
    head, get = hub.find_requests(path="model.safetensors")
    assert (head.method, head.origin, head.status) == ("HEAD", "api", 302)
    assert (get.method, get.origin, get.status) == ("GET", "cdn", 200) and not get.authorization
    assert hub.bytes_served(REPO, "model.safetensors") == len(tiny)


def test_get_safetensors_metadata(hub, hub_api):
    tensors = {"w": np.zeros((4, 6), dtype=np.float16), "b": np.arange(6, dtype=np.int32)}
    hub.seed(REPO, {"model.safetensors": st_save(tensors, metadata={"format": "pt"})})
    meta = hub_api.get_safetensors_metadata(REPO)
    st = meta.files_metadata["model.safetensors"]
    assert st.tensors["w"].dtype == "F16" and st.tensors["w"].shape == [4, 6]
    assert st.tensors["b"].dtype == "I32" and st.metadata == {"format": "pt"}
    cdn = hub.find_requests("GET", origin="cdn")
    assert cdn and cdn[0].range == "bytes=0-100000" and cdn[0].status == 206


def test_ranged_streaming_read(hub, hub_api, tiny):
    sha = hub_api.model_info(REPO).sha
    url = hf_hub_url(REPO, "model.safetensors", revision=sha, endpoint=hub.endpoint)
    status, headers, body = _stream(url, ALICE_TOKEN, "bytes=100-1099")
    assert status == 206 and body == tiny[100:1100]
    assert headers["content-range"] == f"bytes 100-1099/{len(tiny)}"
    status, _, body = _stream(url, ALICE_TOKEN, f"bytes={len(tiny) - 10}-")
    assert status == 206 and body == tiny[-10:]
    status, headers, _ = _stream(url, ALICE_TOKEN, f"bytes={len(tiny)}-")
    assert status == 416 and headers["content-range"] == f"bytes */{len(tiny)}"
    # regular files support ranges too, served directly by the API origin
    status, _, body = _stream(hf_hub_url(REPO, "config.json", endpoint=hub.endpoint), ALICE_TOKEN, "bytes=2-5")
    assert status == 206 and body == b'{"model_type": "tiny"}'[2:6]


# ----------------------------------------------------------------------------------------------------------------
# faults and throttling
# ----------------------------------------------------------------------------------------------------------------


def test_fault_status_is_retried_by_backoff(hub, hub_api, tiny):
    fault = hub.faults.status(503, r"/tree/", times=1)
    assert {f.path for f in hub_api.list_repo_tree(REPO)} >= {"model.safetensors"}
    assert [e.status for e in hub.find_requests("GET", r"/tree/")] == [503, 200]
    assert fault.fired == 1 and fault.remaining == 0
    # 429 carries Retry-After (the client sleeps Retry-After + 1 s; checked without the client's backoff here)
    hub.faults.status(429, r"/api/whoami")
    r = httpx.get(f"{hub.endpoint}/api/whoami-v2", headers=build_hf_headers(token=ALICE_TOKEN))
    assert r.status_code == 429 and r.headers["Retry-After"] == "1"
    assert httpx.get(f"{hub.endpoint}/api/whoami-v2", headers=build_hf_headers(token=ALICE_TOKEN)).status_code == 200


def test_fault_drop_gives_short_body_and_client_resumes(hub, tiny, tmp_path):
    url = hf_hub_url(REPO, "model.safetensors", endpoint=hub.endpoint)
    hub.faults.drop(r"model\.safetensors", after=1000)
    with pytest.raises(httpx.RemoteProtocolError):
        _stream(url, ALICE_TOKEN, "bytes=0-")
    dropped = hub.find_requests("GET", origin="cdn")[-1]
    assert dropped.bytes_sent == 1000 and dropped.faults == ("drop",)
    # hf_hub_download's http_get retries after the cut. It reads with iter_bytes(chunk_size=10 MiB), which
    # buffers: bytes of an unfinished 10 MiB chunk are lost, so here it restarts from 0 (no Range).
    hub.reset_log()
    hub.faults.drop(r"model\.safetensors", after=50_000)
    path = hf_hub_download(REPO, "model.safetensors", endpoint=hub.endpoint, cache_dir=tmp_path)
    assert open(path, "rb").read() == tiny
    gets = hub.find_requests("GET", origin="cdn")
    assert [(g.status, g.range, g.bytes_sent) for g in gets] == [(200, None, 50_000), (200, None, len(tiny))]
    # a resume loop that keeps every byte it got (iter_raw / iter_bytes() without a size) resumes with Range
    hub.reset_log()
    hub.faults.drop(r"model\.safetensors", after=70_000)
    got = bytearray()
    with pytest.raises(httpx.RemoteProtocolError):
        with http_stream_backoff("GET", url, headers=build_hf_headers(token=ALICE_TOKEN),
                                 retry_on_exceptions=()) as r:
            for chunk in r.iter_raw():
                got += chunk
    assert len(got) == 70_000
    _, _, rest = _stream(url, ALICE_TOKEN, f"bytes={len(got)}-")
    assert bytes(got) + rest == tiny
    assert [(g.status, g.range) for g in hub.find_requests("GET", origin="cdn")] == [
        (200, None), (206, "bytes=70000-")]


def test_fault_ignore_range_corrupt_and_slow(hub, tiny):
    url = hf_hub_url(REPO, "model.safetensors", endpoint=hub.endpoint)
    hub.faults.ignore_range(r"model\.safetensors")
    status, _, body = _stream(url, ALICE_TOKEN, "bytes=10-19")
    assert status == 200 and body == tiny  # a resumer must treat this as an error
    hub.faults.corrupt(r"model\.safetensors", at=5)
    _, _, body = _stream(url, ALICE_TOKEN, "bytes=0-99")
    assert body != tiny[:100] and body[5] == tiny[5] ^ 0xFF and body[:5] + body[6:] == tiny[:5] + tiny[6:100]
    hub.faults.slow(r"model\.safetensors", bytes_per_s=200_000)
    t0 = time.monotonic()
    _, _, body = _stream(url, ALICE_TOKEN, "bytes=0-59999")
    assert body == tiny[:60_000] and time.monotonic() - t0 >= 0.25
    assert [e.faults for e in hub.find_requests("GET", origin="cdn")] == [("ignore_range",), ("corrupt",), ("slow",)]


def test_stale_parent_fault_and_global_throttle(hub, hub_api):
    hub.seed(REPO, {"a.txt": b"a"})
    head = hub.head(REPO)
    hub.faults.stale_parent(REPO)
    with pytest.raises(HfHubHTTPError) as err:
        hub_api.create_commit(REPO, [CommitOperationAdd("b.txt", b"b")], commit_message="guarded",
                              parent_commit=head)
    assert err.value.response.status_code == 412
    assert hub.commits(REPO)[0].title == "concurrent commit" and hub.commits(REPO)[0].parent == head
    hub_api.create_commit(REPO, [CommitOperationAdd("b.txt", b"b")], commit_message="retry",
                          parent_commit=hub.head(REPO))
    assert hub.file_bytes(REPO, "b.txt") == b"b"

    hub.set_throttle(down_bytes_per_s=1_000_000, up_bytes_per_s=1_000_000)
    data = os.urandom(300_000)
    t0 = time.monotonic()
    hub_api.upload_file(path_or_fileobj=data, path_in_repo="w.safetensors", repo_id=REPO)
    t_up = time.monotonic() - t0
    t0 = time.monotonic()
    _, _, body = _stream(hf_hub_url(REPO, "w.safetensors", endpoint=hub.endpoint), ALICE_TOKEN)
    t_down = time.monotonic() - t0
    assert body == data and t_up >= 0.25 and t_down >= 0.25


def test_no_server_errors_left_behind(hub, hub_api, tiny):
    """Any uncaught emulator exception is recorded; the whole flow above must leave none."""
    hub_api.list_repo_tree(REPO, recursive=True, expand=True).__next__()
    assert hub.server_errors == []


def test_gated_repo_serves_its_info_to_all_and_its_files_to_the_granted(hub, hub_api):
    from huggingface_hub.errors import GatedRepoError

    hub.seed("acme/gated", {"config.json": "{}"})
    hub.set_gated("acme/gated", "manual", granted=["bob"])
    assert hub_api.model_info("acme/gated").gated == "manual"  # the Hub shows a gated repo's page to anyone
    with pytest.raises(GatedRepoError, match="not in the authorized list"):
        hf_hub_download("acme/gated", "config.json", token=ALICE_TOKEN, cache_dir=hub.root / "c1")
    with pytest.raises(GatedRepoError, match="must have access to it and be authenticated"):
        hf_hub_download("acme/gated", "config.json", token=False, cache_dir=hub.root / "c2")
    assert open(hf_hub_download("acme/gated", "config.json", token=READER_TOKEN, cache_dir=hub.root / "c3")).read() == "{}"


def test_model_search_by_name_most_downloaded_first(hub, hub_api):
    for name, downloads in (("org/Tiny-A", 5), ("org/tiny-b", 50), ("other/Big", 500)):
        hub.seed(name, {"README.md": "x"})
        hub.set_downloads(name, downloads)
    hub.seed(f"{ORG}/tiny-private", {"README.md": "x"}, private=True)
    assert [m.id for m in hub_api.list_models(search="tiny", sort="downloads")] == ["org/tiny-b", "org/Tiny-A",
                                                                                    f"{ORG}/tiny-private"]
    anonymous = HfApi(endpoint=hub.endpoint, token=False)
    assert [m.id for m in anonymous.list_models(search="TINY", limit=1)] == ["org/tiny-b"]
    assert [m.id for m in anonymous.list_models(search="tiny", author="org")] == ["org/tiny-b", "org/Tiny-A"]
