"""DeepSeek-V4's MTP layer (`mtp.k.*`) in float64, for tests/mtp_harness.py (registered there as `deepseek_v4`).

V4's MTP layer does not fit the harness's MtpLayout: its residual is `hc_mult` hyper-connection streams, it projects
the token embedding and the hidden streams with two separate linears instead of one over their concatenation, and its
logits go through its own `hc_head` (the stream collapse) first. After vLLM 0.32's DeepSeekV4MTP
(vllm/models/deepseek_v4/nvidia/mtp.py; the CPU model drops `mtp.*`: "No MTP support on CPU yet"):

    e = embed(ids) (the main model's `embed`), zeroed at position 0;  e = enorm(e);  h = hnorm(hidden) per stream
    x = h_proj(h) + e_proj(e) broadcast over the streams            [batch, seq, hc_mult, hidden]
    streams = block(x)        (a V4 decoder layer: sliding-window attention, score-routed MoE, hyper-connections)
    logits = head(norm(hc_head(streams)))   (`mtp.k.hc_head_*`, `mtp.k.norm`, the main model's `head`)

The block is transformers' own DeepseekV4DecoderLayer: the layer's tensors (`mtp.k.attn.*`, `mtp.k.ffn.*`,
`mtp.k.hc_attn_*`, ...) become `layers.0.*` of a one-layer published-layout checkpoint (with `mtp.k.norm`,
`mtp.k.hc_head_*` as its final norm and hc_head, the main `embed` and `head`), loaded by `from_pretrained` through
transformers' conversion mapping, every weight accounted for (tests/dsv4_models.load).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

REMAINDER = ("e_proj.", "h_proj.", "enorm.", "hnorm.", "norm.", "hc_head_", "emb.", "head.")


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors import safe_open

    out = {}
    for file in sorted(Path(path).glob("*.safetensors")):
        with safe_open(file, "pt") as f:
            for name in f.keys():
                if name.startswith(("mtp.", "embed.", "head.")):
                    t = f.get_tensor(name)
                    out[name] = t.to(torch.float64) if t.is_floating_point() else t
    return out


class DsV4Mtp:
    """MTP layer k of a DeepSeek-V4 checkpoint, in float64."""

    def __init__(self, path: Path, k: int = 0):
        from safetensors.torch import save_file

        from tests.dsv4_models import load

        config = json.loads((Path(path) / "config.json").read_text())
        tensors, p = _tensors(path), f"mtp.{k}."
        block = {"layers.0." + n.removeprefix(p): t for n, t in tensors.items()
                 if n.startswith(p) and not n.removeprefix(p).startswith(REMAINDER)}
        assert block, f"{path}: no MTP block under {p}"
        state = {**block, "embed.weight": tensors["embed.weight"], "head.weight": tensors["head.weight"],
                 "norm.weight": tensors[p + "norm.weight"],
                 **{f"hc_head_{s}": tensors[f"{p}hc_head_{s}"] for s in ("fn", "base", "scale")}}
        one = {key: v for key, v in config.items() if key not in ("quantization_config", "layer_types",
                                                                  "mlp_layer_types")}
        one.update(num_hidden_layers=1, compress_ratios=[0], num_hash_layers=0, num_nextn_predict_layers=0)
        with tempfile.TemporaryDirectory(prefix="hubpad-dsv4-mtp-") as tmp:
            (Path(tmp) / "config.json").write_text(json.dumps(one))
            save_file({n: t.contiguous() for n, t in state.items()}, f"{tmp}/model.safetensors",
                      metadata={"format": "pt"})
            self.model = load(Path(tmp))
        self.e_proj, self.h_proj = tensors[p + "e_proj.weight"], tensors[p + "h_proj.weight"]
        self.enorm, self.hnorm = tensors[p + "enorm.weight"], tensors[p + "hnorm.weight"]
        self.eps = config["rms_norm_eps"]

    def _norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    @torch.no_grad()
    def __call__(self, hidden: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the output hidden state after the final norm, logits) for `hidden` [batch, seq, hc_mult, H]."""
        e = self.model.model.embed_tokens(ids).clone()
        e[:, 0] = 0
        x = self._norm(hidden.to(torch.float64), self.hnorm) @ self.h_proj.T
        x = x + (self._norm(e, self.enorm) @ self.e_proj.T).unsqueeze(-2)
        layer = self.model.model.layers[0]
        swap = layer.register_forward_pre_hook(lambda m, args: (x, *args[1:]))  # the streams x, not expanded embeds
        normed = {}
        grab = self.model.model.norm.register_forward_hook(lambda m, i, o: normed.__setitem__("h", o))
        try:
            logits = self.model(input_ids=ids, use_cache=False).logits
        finally:
            swap.remove()
            grab.remove()
        return normed["h"], logits


def forward(path: Path, hidden: torch.Tensor, ids: torch.Tensor, k: int = 0):
    return DsV4Mtp(path, k)(hidden, ids)


def inputs(path: Path, batch: int = 2, seq: int = 10, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """O(1) random hidden streams [batch, seq, hc_mult, H] and token ids."""
    config = json.loads((Path(path) / "config.json").read_text())
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(batch, seq, config["hc_mult"], config["hidden_size"], generator=gen, dtype=torch.float64)
    return hidden, torch.randint(0, config["vocab_size"], (batch, seq), generator=gen)
