"""MiniMax-M2 (`minimax_m2`): refused, because no exact zero padding of its heads exists.

Its q and k RMSNorms are per layer (`qk_norm_type: per_layer`): one norm over all heads × head_dim (vLLM's
MiniMaxText01RMSNormTP all-reduces each rank's mean of squares and divides by the TP size, so it is the same
global mean at any TP). Zero heads leave the sum of squares alone but grow the count, so the mean shrinks by
r = H'/H. Dividing the norm weight by sqrt(r) compensates the mean, but then the norm's epsilon acts as r·eps;
an exact fix also needs the q/k norms' eps divided by r, and `rms_norm_eps` is one config key shared with every
other norm of the model (in transformers and in vLLM). Measured on a tiny MiniMax-M2 in float64
(tests/test_minimax_m2.py): naive zero padding changes the logits by ~0.7 relative; the best expressible
approximation (weights / sqrt(r)) by ~1e-7 relative; weights / sqrt(r) with the q/k eps / r (not expressible in a
config) by ~1e-15, which confirms the analysis. MiniMax-M2 (48 heads, 8 kv heads) needs head padding at every TP
hubpad would be used for (3, 5, 6, 7), so the whole model type is refused.
"""

from __future__ import annotations

MINIMAX_M2_REFUSAL = (
    "MiniMax-M2 (model_type 'minimax_m2') cannot be padded exactly: its q/k RMSNorm spans all heads (per layer, "
    "not per head), so zero heads change the norm's mean square; rescaling the norm weight by sqrt(H/H') fixes "
    "that but leaves an eps error because rms_norm_eps is shared with every other norm (measured on a tiny float64 "
    "model: ~1e-7 relative in the logits, not exact); hubpad refuses rather than approximate")
