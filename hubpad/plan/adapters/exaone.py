"""EXAONE 3.x (`exaone`, ExaoneForCausalLM: EXAONE-3.5-32B-Instruct), EXAONE 4 (`exaone4`, Exaone4ForCausalLM:
EXAONE-4.0-32B) and EXAONE MoE (`exaone_moe`, ExaoneMoEForCausalLM:
K-EXAONE-236B-A23B): Llama attention names with per-head q/k RMSNorms (over one head's head_dim, so a zero head stays
zero), sliding and global layers with the same heads, EXAONE 4's post-LN (`post_attention_layernorm`,
`post_feedforward_layernorm`), EXAONE MoE's dense first layer, routed experts per expert with a sigmoid router and
`mlp.e_score_correction_bias`, one shared expert of moe_intermediate_size x num_shared_experts, and MTP layers under
`mtp.` (a decoder layer with a dense MLP beside `mtp.fc`, which vLLM's ExaoneMoeMTP makes column-parallel over the
hidden size, and its norms).

head_dim: vLLM's Exaone4Attention / ExaoneMoeAttention take `getattr(config, "head_dim", None)` and fall back to
hidden_size // heads; the derivative writes it (5120 // 45 would be 113, not 128). vLLM's MoE block refuses a TP larger
than num_experts; the swiglu clamps (`swiglu_limits`) keep a zero lane zero.

EXAONE 3.x is Llama under GPT-2-style names (`transformer.h.N.attn.attention.{q,k,v,out}_proj`, `mlp.c_fc_0` (gate) /
`c_fc_1` (up) / `c_proj` (down), `ln_1` / `ln_2`, `transformer.wte` / `ln_f`), which vLLM's exaone.py loads into its
Llama-shaped ExaoneAttention (head_dim read the same way). Neither vLLM 0.32 nor its transformers has a config class
for `exaone`: it loads the repo's configuration_exaone.py (--trust-remote-code), which keeps every key, head_dim
included, and checks no head count. transformers' own ExaoneConfig (5.2x, a LlamaConfig) rejects hidden_size % heads
!= 0, but with --trust-remote-code AutoConfig takes the repo's class before it.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import (ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, ROUTERS, SHARED, Adapter,
                                       L, Role, mtp_speculative, under)
from hubpad.plan.adapters.vllm import serving

_MTP = "mtp."
_MTP_OWN = [r"^mtp\.(fc|norm|pre_fc_norm_hidden|pre_fc_norm_embedding|embed_tokens)$"]


class ExaoneAdapter(Adapter):
    """EXAONE's chat template writes Hermes-style `<tool_call>` JSON (vLLM's hermes parser). No reasoning parser: the
    one EXAONE's cards named (deepseek_r1) takes a whole non-reasoning answer for reasoning when no `<think>` tag
    comes (vLLM pull request 22617), and vLLM 0.32 has no exaone parser. EXAONE MoE drafts with its MTP layers
    (ExaoneMoeMTP, method "mtp")."""

    def serving(self, config: dict) -> dict:
        arch = (config.get("architectures") or ["Exaone4ForCausalLM"])[0]
        spec = mtp_speculative(config) if self.name == "exaone_moe" else None
        return serving(tool="hermes", spec=spec,
                       features=(f"arch:{arch}",) + (("spec:mtp", "spec:exaone_moe_mtp") if spec else ()))


EXAONE4 = ExaoneAdapter(
    name="exaone4", model_types=("exaone4",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
    per_head_norms=True,
)

_SHARED = [(p, Role(r.kind, "shared")) for p, r in SHARED]
EXAONE_MOE = ExaoneAdapter(
    name="exaone_moe", model_types=("exaone_moe",),
    linear_patterns=ATTENTION + DENSE_MLP + EXPERTS + _SHARED + under(_MTP, ATTENTION + DENSE_MLP),
    copy_modules=COPY_MODULES + ROUTERS + under(_MTP, COPY_MODULES) + _MTP_OWN, copy_params=COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    shared_experts_key="num_shared_experts", per_head_norms=True, tp_at_most_experts=True, mtp_fc_shards_hidden=True,
    layers=f"^(?:{L[1:]}|{under(_MTP, [L])[0][1:]})",
)


class Exaone3Adapter(Adapter):
    """EXAONE 3.x: no tool-call or reasoning parser in vLLM; --trust-remote-code for the repo's config class."""

    def serving(self, config: dict) -> dict:
        return {**serving(features=("arch:ExaoneForCausalLM",)), "extra_args": ["--trust-remote-code"]}


_H = r"^transformer\.h\.(\d+)\."
EXAONE = Exaone3Adapter(
    name="exaone", model_types=("exaone",),
    linear_patterns=[(_H + r"attn\.attention\.q_proj$", Role("q")), (_H + r"attn\.attention\.[kv]_proj$", Role("kv")),
                     (_H + r"attn\.attention\.out_proj$", Role("o")),
                     (_H + r"mlp\.(c_fc_0|c_fc_1)$", Role("rows", "dense")), (_H + r"mlp\.c_proj$", Role("cols", "dense"))],
    copy_modules=[r"^transformer\.(wte|ln_f)$", r"^lm_head$", _H + r"ln_[12]$"],
    copy_params=[_H + r"attn\.attention\.rotary_emb\.inv_freq$"],
    intermediate_keys={"dense": ("intermediate_size",)}, layers=_H,
)
