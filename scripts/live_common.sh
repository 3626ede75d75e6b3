# Sourced by scripts/live_check.sh and scripts/jobs_live_check.sh: the start both share (arguments, token, scratch
# folder), the step banner, running hubpad with its output kept in ${log}, and the end (the token scan, then deleting
# the scratch repo unless HUBPAD_LIVE_KEEP=1). The sourcing script sets target.
# shellcheck shell=bash

live_setup() {  # live_setup NAME WHAT-THE-TOKEN-MAY-DO [UPSTREAM] [TP]: sets check_name upstream tp python work log
  check_name="$1"
  local may="$2"
  shift 2
  upstream="${1:-${HUBPAD_LIVE_UPSTREAM:-trl-internal-testing/tiny-Qwen3ForCausalLM}}"
  tp="${2:-${HUBPAD_LIVE_TP:-3}}"
  python="${PYTHON:-python3}"
  if [[ -z "${HF_TOKEN:-}" ]]; then
    echo "error: set HF_TOKEN to a token that may ${may}" >&2
    exit 2
  fi
  work="$(mktemp -d "${TMPDIR:-/tmp}/hubpad-${check_name// /-}.XXXXXX")"
  log="${work}/log.txt"
  trap 'rm -rf "${work}"' EXIT
}

step() { printf '\n== %s\n' "$*"; }

fail() {
  echo "${check_name} FAILED: $*" >&2
  exit 1
}

run() {  # run hubpad, keep its output for the token scan, stop on failure
  local rc=0
  hubpad "$@" 2>&1 | tee -a "${log}" || rc=${PIPESTATUS[0]}
  if ((rc != 0)); then
    fail "hubpad $1 exited ${rc}"
  fi
}

token_scan_and_cleanup() {
  step "the token appears in no output"
  if grep -qF "${HF_TOKEN}" "${log}"; then
    fail "the token appeared in hubpad's output"
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
}
