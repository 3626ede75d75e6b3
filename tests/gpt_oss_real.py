"""gpt-oss-120b and -20b (OpenAI, MXFP4 experts): their public config.json values and tensor list, for header-only
plans (tests/test_gpt_oss.py, bench/tp_advice.py)."""

from __future__ import annotations

# name on the Hub -> (layers, routed experts); everything else is shared
GPT_OSS_SIZES = {"openai/gpt-oss-120b": (36, 128), "openai/gpt-oss-20b": (24, 32)}


def gpt_oss_real(layers: int, experts: int) -> tuple[dict, list]:
    """(config, tensors) of a gpt-oss checkpoint with `layers` layers of `experts` MXFP4 experts."""
    cfg = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880,
           "intermediate_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
           "num_hidden_layers": layers, "num_local_experts": experts, "experts_per_token": 4,
           "num_experts_per_tok": 4, "vocab_size": 201088, "sliding_window": 128, "attention_bias": True,
           "layer_types": ["sliding_attention", "full_attention"] * (layers // 2), "max_position_embeddings": 131072,
           "rms_norm_eps": 1e-05, "swiglu_limit": 7.0, "tie_word_embeddings": False,
           "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
               "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}
    t = [("model.embed_tokens.weight", "BF16", (201088, 2880)), ("model.norm.weight", "BF16", (2880,)),
         ("lm_head.weight", "BF16", (201088, 2880))]
    for i in range(layers):
        p = f"model.layers.{i}."
        t += [(p + "input_layernorm.weight", "BF16", (2880,)), (p + "post_attention_layernorm.weight", "BF16", (2880,)),
              (p + "self_attn.sinks", "BF16", (64,)), (p + "mlp.router.weight", "BF16", (experts, 2880)),
              (p + "mlp.router.bias", "BF16", (experts,))]
        for proj, out_f, in_f in (("q_proj", 4096, 2880), ("k_proj", 512, 2880), ("v_proj", 512, 2880),
                                  ("o_proj", 2880, 4096)):
            t += [(p + f"self_attn.{proj}.weight", "BF16", (out_f, in_f)), (p + f"self_attn.{proj}.bias", "BF16", (out_f,))]
        for proj, out_f, in_f in (("gate_up_proj", 5760, 2880), ("down_proj", 2880, 2880)):
            t += [(p + f"mlp.experts.{proj}_blocks", "U8", (experts, out_f, in_f // 32, 16)),
                  (p + f"mlp.experts.{proj}_scales", "U8", (experts, out_f, in_f // 32)),
                  (p + f"mlp.experts.{proj}_bias", "BF16", (experts, out_f))]
    return cfg, t
