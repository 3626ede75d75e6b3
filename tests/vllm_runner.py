"""Run jobs in vLLM (the serving tier): `python vllm_runner.py JOBS.json RESULTS.json`, with the serving venv's python.

This file runs inside the vLLM environment (requirements/serve.txt), never in the test environment, and imports
nothing of hubpad or the tests. Each job builds one `vllm.LLM` (offline engine, spawned workers: hence the
`__main__` guard), generates greedily from prompts given as token ids, and records every generated token with its
logprob and the top two candidates (the margin that makes "same greedy tokens" meaningful). Jobs run one after the
other in this process; the first job that raises stops the run and its error is recorded, so a caller that expects
a failure runs that job alone and reads vLLM's own message from stderr.
"""

from __future__ import annotations

import gc
import json
import sys
import time
import traceback


def _engine(job: dict):
    from vllm import LLM

    kwargs = dict(model=job["model"], tensor_parallel_size=job["tp"], skip_tokenizer_init=job.get("skip_tokenizer", True),
                  dtype=job.get("dtype", "float32"), max_model_len=job.get("max_model_len", 128), enforce_eager=True,
                  distributed_executor_backend="mp", seed=0, disable_log_stats=not job.get("metrics", False))
    for key in ("hf_overrides", "speculative_config", "mm_encoder_tp_mode", "limit_mm_per_prompt", "trust_remote_code",
                "max_num_seqs", "attention_backend", "model_impl", "enable_prefix_caching"):
        if job.get(key) is not None:
            kwargs[key] = job[key]
    return LLM(**kwargs)


def _prompt(p):
    """A prompt as token ids, or (for multimodal jobs) a text prompt or token ids with an image given as nested pixel
    lists. `"modality": "vision_chunk"` hands the image over as Kimi-K2.5 takes it (a vision chunk of type image)."""
    if isinstance(p, list):
        return {"prompt_token_ids": p}
    out = {"prompt": p["text"]} if "text" in p else {"prompt_token_ids": p["ids"]}
    if "image" in p:
        from PIL import Image
        import numpy as np

        image = Image.fromarray(np.asarray(p["image"], dtype=np.uint8))
        if p.get("modality") == "vision_chunk":
            out["multi_modal_data"] = {"vision_chunk": [{"type": "image", "image": image, "uuid": None}]}
        else:
            out["multi_modal_data"] = {"image": image}
    return out


def _spec_counts(llm) -> dict:
    """Speculative decoding counters from vLLM's metrics: drafts, draft tokens, accepted tokens (and per position)."""
    counts: dict = {}
    for metric in llm.get_metrics():
        if metric.name.startswith("vllm:spec_decode_num_"):
            key = metric.name.removeprefix("vllm:spec_decode_")
            counts[key] = list(metric.values) if hasattr(metric, "values") else metric.value
    return counts


def run_job(job: dict) -> dict:
    from vllm import SamplingParams

    t0 = time.monotonic()
    llm = _engine(job)
    t1 = time.monotonic()
    params = SamplingParams(temperature=0.0, max_tokens=job.get("max_tokens", 8), logprobs=2, detokenize=False,
                            ignore_eos=True)
    outputs = []
    for out in llm.generate([_prompt(p) for p in job["prompts"]], params, use_tqdm=False):
        c = out.outputs[0]
        steps = []
        for token, candidates in zip(c.token_ids, c.logprobs):
            ranked = sorted(candidates.items(), key=lambda kv: -kv[1].logprob)
            steps.append({"token": token, "logprob": candidates[token].logprob,
                          "top": [[t, lp.logprob] for t, lp in ranked[:2]]})
        outputs.append(steps)
    result = {"ok": True, "outputs": outputs, "start_s": round(t1 - t0, 2), "gen_s": round(time.monotonic() - t1, 2)}
    if job.get("metrics"):
        result["spec"] = _spec_counts(llm)
    llm.llm_engine.engine_core.shutdown()
    del llm
    gc.collect()
    return result


def kernels(names: list[str]) -> dict:
    """Which of vLLM's CPU ops the kernel library it loads on this CPU has (AVX2, AVX-512 and AVX-512-BF16 builds
    differ: the AVX2 one has no cpu_gemm_wna16 and no fp8_scaled_mm_cpu), and that library's name. The name "amx"
    stands for the CPU's AMX tiles, which vLLM's MXFP4 experts need besides their ops (cpu_moe.CPUExpertsMxfp4)."""
    import torch
    from vllm.platforms import current_platform

    current_platform.import_kernels()
    if not torch.cpu._is_avx512_supported():
        library = "vllm._C_AVX2"
    else:
        library = "vllm._C" if torch.cpu._is_avx512_bf16_supported() else "vllm._C_AVX512"
    ops = {name: hasattr(torch.ops._C, name) for name in names}
    if "amx" in ops:
        ops["amx"] = torch.cpu._is_amx_tile_supported()
    return {"library": library, "ops": ops}


def main() -> int:
    if sys.argv[1] == "--kernels":  # vllm_runner.py --kernels OUT.json NAME...
        with open(sys.argv[2], "w") as f:
            json.dump(kernels(sys.argv[3:]), f)
        return 0
    jobs_file, results_file = sys.argv[1], sys.argv[2]
    with open(jobs_file) as f:
        jobs = json.load(f)
    results = []
    for job in jobs:
        try:
            results.append(run_job(job))
        except BaseException as exc:  # noqa: BLE001 - the caller reads the error, and vLLM's log on stderr
            traceback.print_exc()
            results.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
            break
        finally:
            with open(results_file, "w") as f:
                json.dump(results, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
