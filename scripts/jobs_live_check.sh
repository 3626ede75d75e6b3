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

upstream="${1:-${HUBPAD_LIVE_UPSTREAM:-trl-internal-testing/tiny-Qwen3ForCausalLM}}"
tp="${2:-${HUBPAD_LIVE_TP:-3}}"
flavor="${HUBPAD_LIVE_FLAVOR:-cpu-basic}"
python="${PYTHON:-python3}"
if [[ -z "${HF_TOKEN:-}" ]]; then
  echo "error: set HF_TOKEN to a token that may create and write repos and run Jobs in your namespace" >&2
  exit 2
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/hubpad-jobs-live-check.XXXXXX")"
log="${work}/log.txt"
trap 'rm -rf "${work}"' EXIT

step() { printf '\n== %s\n' "$*"; }
run() {  # run hubpad, keep its output for the checks, stop on failure
  local rc=0
  hubpad "$@" 2>&1 | tee -a "${log}" || rc=${PIPESTATUS[0]}
  if ((rc != 0)); then
    echo "jobs live check FAILED: hubpad $1 exited ${rc}" >&2
    exit 1
  fi
}

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
  echo "jobs live check FAILED: the second job was not up to date" >&2
  exit 1
fi

step "the token appears in no output"
if grep -qF "${HF_TOKEN}" "${log}"; then
  echo "jobs live check FAILED: the token appeared in hubpad's output" >&2
  exit 1
fi
echo "ok"

if [[ "${HUBPAD_LIVE_KEEP:-0}" == 1 ]]; then
  echo "kept https://huggingface.co/${target}"
else
  step "delete the scratch repo"
  if ! "${python}" -c 'import sys; from huggingface_hub import HfApi; HfApi().delete_repo(sys.argv[1])' "${target}"; then
    echo "could not delete ${target} (token without delete rights?); delete it by hand" >&2
  fi
fi
printf '\njobs live check passed: %s -> %s (tp %s) on Hugging Face Jobs (%s)\n' "${upstream}" "${target}" "${tp}" "${flavor}"
