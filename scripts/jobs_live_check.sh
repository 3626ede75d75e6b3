#!/usr/bin/env bash
# Opt-in live check on real Hugging Face Jobs (not part of CI; run by hand).
#
# Mirrors a tiny public upstream as a job (`hubpad mirror ... --on hf-jobs`) into a fresh private scratch repo,
# verifies it here byte for byte, runs the same mirror as a job again (up to date: nothing rebuilt), and checks that
# the token appears in no output. What it checks that the emulator-based tests cannot: the real Jobs API, the real
# image installing the pinned hubpad, the real log stream and the job's access to the Hub.
#
#   HF_TOKEN=hf_... scripts/jobs_live_check.sh [UPSTREAM] [TP]
#
# Cost: two jobs on cpu-basic ($0.01/hour on huggingface.co's Jobs pricing page; not checked against a bill), each a
# few minutes (mostly the pip install): well under a cent. The namespace needs Jobs access (a positive credit
# balance). The job installs this exact hubpad: the checkout's HEAD, which must be pushed to GitHub, or
# HUBPAD_JOBS_INSTALL=hubpad==X.Y.Z / OWNER/REPO@<commit>. The token needs to create repos and write to them in your
# namespace and to run Jobs there. The scratch repo is deleted at the end unless HUBPAD_LIVE_KEEP=1.
set -euo pipefail

# shellcheck source=scripts/live_common.sh
. "$(dirname "$0")/live_common.sh"
live_setup "jobs live check" "create and write repos and run Jobs in your namespace" "$@"
flavor="${HUBPAD_LIVE_FLAVOR:-cpu-basic}"

user="$("${python}" -c 'from huggingface_hub import HfApi; print(HfApi().whoami()["name"])')"
target="${HUBPAD_LIVE_TARGET:-${user}/hubpad-jobs-live-check-$(date -u +%Y%m%d-%H%M%S)}"
echo "upstream ${upstream}, tp ${tp}, flavor ${flavor}, scratch target ${target} (private)"

step "hubpad mirror as a job"
run mirror "${upstream}" --tp "${tp}" --to "${target}" --private --on hf-jobs --flavor "${flavor}" --timeout 30m

step "hubpad verify, here (streams both, checks every byte)"
run verify "${upstream}" "${target}"

step "the same mirror as a job again: up to date"
: > "${log}.second"
hubpad mirror "${upstream}" --tp "${tp}" --to "${target}" --on hf-jobs --flavor "${flavor}" --timeout 30m \
  2>&1 | tee -a "${log}" "${log}.second"
if ! grep -q "is up to date" "${log}.second"; then
  fail "the second job was not up to date"
fi

token_scan_and_cleanup
printf '\njobs live check passed: %s -> %s (tp %s) on Hugging Face Jobs (%s)\n' "${upstream}" "${target}" "${tp}" "${flavor}"
