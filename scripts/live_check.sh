#!/usr/bin/env bash
# Opt-in live check against the real Hugging Face Hub, with Xet on (not part of CI).
#
# Mirrors a tiny public upstream for real into a fresh private scratch repo, then checks what the emulator-based
# tests can only model: the upload went through Xet (the shards carry a xetHash), untouched upstream files were
# copied server-side, the derivative verifies byte for byte against the upstream, a second run is up to date, and
# the token appears in no output. Costs a few MB of traffic.
#
#   HF_TOKEN=hf_... scripts/live_check.sh [UPSTREAM] [TP]
#
# The token needs write access to your namespace and the right to create repos (a fine-grained token with
# "create repos" + "write to repos you create" is enough). The scratch repo is <you>/hubpad-live-check-<time>;
# it is deleted at the end unless HUBPAD_LIVE_KEEP=1 (deletion needs a token allowed to delete; if it fails the
# script says so and still succeeds). Also run by .github/workflows/live-check.yml (workflow_dispatch only).
set -euo pipefail

# shellcheck source=scripts/live_common.sh
. "$(dirname "$0")/live_common.sh"
live_setup "live check" "create and write repos in your namespace" "$@"
unset HF_HUB_DISABLE_XET HF_HUB_OFFLINE
export HF_HUB_DISABLE_PROGRESS_BARS=1

step "client: huggingface_hub with Xet"
"${python}" - <<'PY'
from importlib.metadata import version

from huggingface_hub.utils._runtime import is_xet_available

assert is_xet_available(), "Xet is not available to huggingface_hub (HF_HUB_DISABLE_XET set, or hf_xet missing)"
print(f"huggingface_hub {version('huggingface_hub')}, hf_xet {version('hf_xet')}: Xet uploads on")
PY
user="$("${python}" -c 'from huggingface_hub import HfApi; print(HfApi().whoami()["name"])')"
target="${HUBPAD_LIVE_TARGET:-${user}/hubpad-live-check-$(date -u +%Y%m%d-%H%M%S)}"
echo "upstream ${upstream}, tp ${tp}, scratch target ${target} (private)"

step "hubpad plan"
run plan "${upstream}" --tp "${tp}"

step "hubpad mirror (Xet upload, server-side copies)"
run mirror "${upstream}" --tp "${tp}" --to "${target}" --private --workdir "${work}/w" --json

step "the target's shards went through Xet; its copies kept the upstream's hashes"
"${python}" - "${upstream}" "${target}" <<'PY'
import json, sys
from huggingface_hub import HfApi

upstream, target = sys.argv[1:]
api = HfApi()
manifest = json.loads(open(api.hf_hub_download(target, "hubpad.json"), "rb").read())
shards = [s["name"] for s in manifest["shards"]]
infos = {i.path: i for i in api.get_paths_info(target, shards)}
missing = [s for s in shards if not getattr(infos.get(s), "xet_hash", None)]
assert not missing, f"shards without a xetHash (not uploaded through Xet?): {missing}"
for s in manifest["shards"]:
    assert infos[s["name"]].lfs.sha256 == s["sha256"], f"{s['name']}: LFS oid differs from hubpad.json"
copied = manifest["files"]["copied"]
up = {i.path: i for i in api.get_paths_info(upstream, copied, revision=manifest["upstream"]["commit"])}
tg = {i.path: i for i in api.get_paths_info(target, copied)}
for path in copied:
    a, b = up[path], tg[path]
    same = (a.lfs.sha256 == b.lfs.sha256) if a.lfs else (a.blob_id == b.blob_id)
    assert same, f"{path}: copied file differs from the upstream"
lfs = [p for p in copied if up[p].lfs]
print(f"{len(shards)} shard(s) Xet-backed; {len(copied)} upstream file(s) copied ({len(lfs)} LFS/Xet: {lfs})")
PY

step "hubpad verify (streams both, checks every byte)"
run verify "${upstream}" "${target}"

step "hubpad check and a second mirror: up to date, no commit"
run check "${upstream}" --tp "${tp}" --to "${target}"
run mirror "${upstream}" --tp "${tp}" --to "${target}" --workdir "${work}/w2" --json
if ! grep -q '"up_to_date": true' "${log}"; then
  fail "the second mirror was not up to date"
fi

token_scan_and_cleanup
printf '\nlive check passed: %s -> %s (tp %s) through Xet\n' "${upstream}" "${target}" "${tp}"
