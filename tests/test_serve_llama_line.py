"""IQuest-Coder, TeleChat3, Solar Pro and EXAONE 3.x in vLLM's CPU build (0.32): their derivatives serve at TP 3 with the
original's greedy tokens; IQuest-Coder's and TeleChat3's labelled MistralForCausalLM (plan/relabel.py).

vLLM's registry builds IQuestCoderForCausalLM and TeleChat3ForCausalLM with its LlamaForCausalLM. Their own config
classes are remote code that transformers 5.19 (the serving lock) lacks, so the original is served through that
registry entry with its config.json labelled llama (LlamaConfig holds the unpadded heads): the same vLLM class, the
same weights. TeleChat3's fixture carries the published `telechat3-yarn` rope scaling, which vLLM rewrites to YaRN
for any config class (vllm/transformers_utils/config.py), the derivative's MistralConfig included.

Solar's config class is its repo's configuration_solar.py (--trust-remote-code): the fixture ships one that, like the
published class, keeps every key config.json gives it and checks no head count. Its 4 layers keep the stream at layers 1
and 2 and blend both in at layer 3, as vLLM's SolarModel does with bskcn_tv[1]. EXAONE 3.x likewise loads through its
repo's configuration_exaone.py; the fixture's keeps every key and maps num_hidden_layers to num_layers as the published
class does, and the checkpoint has the published GPT-2-style names.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests import serving

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch  # noqa: E402
import transformers  # noqa: E402

from tests import serve_models  # noqa: E402
from tests.helpers import cli  # noqa: E402
from tests.llama_line_real import exaone_name  # noqa: E402
from tests.tiny_moe import randomize  # noqa: E402

pytestmark = pytest.mark.serve

ARCH = {"iquestcoder": "IQuestCoderForCausalLM", "telechat3": "TeleChat3ForCausalLM"}
EXTRA = {"telechat3": {"rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 4.0,
                                        "original_max_position_embeddings": 64, "rope_type": "telechat3-yarn",
                                        "type": "telechat3-yarn"}}}


def _relabel(path, **keys):
    config = json.loads((path / "config.json").read_text())
    config.pop("rope_parameters", None) if "rope_scaling" in keys else None
    (path / "config.json").write_text(json.dumps({**config, **keys}, indent=2))


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """family -> (its tiny upstream under the family's label, the original's outputs at TP 1), all served in one
    vLLM process."""
    root = tmp_path_factory.mktemp("llama-line")
    upstreams, served = {}, []
    for family, arch in sorted(ARCH.items()):
        src = serve_models.build("llama", root / family / "upstream")
        as_llama = root / family / "as-llama"
        shutil.copytree(src, as_llama)
        _relabel(src, model_type=family, architectures=[arch], **EXTRA.get(family, {}))
        _relabel(as_llama, architectures=[arch], **EXTRA.get(family, {}))
        upstreams[family] = src
        served.append(serving.job(as_llama, 1))
    for family, build in zip(REMOTE_CONFIG, (_solar_upstream, _exaone_upstream)):
        upstreams[family] = build(root / family / "upstream")
        served.append(serving.job(upstreams[family], 1, trust_remote_code=True))
    run = serving.run_vllm(served, root / "run-originals")
    return {family: (upstreams[family], run.ok(i)) for i, family in enumerate([*sorted(ARCH), *REMOTE_CONFIG])}


SOLAR_CONFIG_CODE = '''from transformers import PretrainedConfig


class SolarConfig(PretrainedConfig):
    model_type = "solar"
'''
SOLAR_KEYS = dict(bskcn_1=[1], bskcn_2=[2], bskcn_3=[3], bskcn_4=[3], bskcn_tv=[0.9, 0.8],
                  architectures=["SolarForCausalLM"], model_type="solar",
                  auto_map={"AutoConfig": "configuration_solar.SolarConfig"})


def _solar_upstream(path):
    """A 4-layer BF16 Solar: Llama's tensors, the skip lists, configuration_solar.py, no head_dim (as published)."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(**{**serve_models.COMMON, **serve_models.GQA, "intermediate_size": 256,
                                      "num_hidden_layers": 4})
    model = transformers.LlamaForCausalLM(cfg).eval()
    randomize(model)
    model.to(torch.bfloat16).save_pretrained(path)
    serve_models.add_tokenizer(path)
    (path / "configuration_solar.py").write_text(SOLAR_CONFIG_CODE)
    config = json.loads((path / "config.json").read_text())
    config.pop("head_dim")
    (path / "config.json").write_text(json.dumps({**config, **SOLAR_KEYS}, indent=2))
    return path


EXAONE_CONFIG_CODE = '''from transformers import PretrainedConfig


class ExaoneConfig(PretrainedConfig):
    model_type = "exaone"
    attribute_map = {"num_hidden_layers": "num_layers"}
'''


def _exaone_upstream(path):
    """The tiny serving Llama in BF16 under EXAONE 3.x's published names and config keys, with configuration_exaone.py."""
    from safetensors.torch import load_file, save_file

    serve_models.build("llama", path)
    weights = path / "model.safetensors"
    save_file({exaone_name(n): t for n, t in load_file(weights).items()}, weights, metadata={"format": "pt"})
    (path / "configuration_exaone.py").write_text(EXAONE_CONFIG_CODE)
    config = json.loads((path / "config.json").read_text())
    keep = ("hidden_size", "intermediate_size", "max_position_embeddings", "num_attention_heads", "num_key_value_heads",
            "tie_word_embeddings", "vocab_size", "bos_token_id", "eos_token_id", "pad_token_id")
    config = {k: config[k] for k in keep if k in config}
    common = serve_models.COMMON
    config.update(architectures=["ExaoneForCausalLM"], model_type="exaone", activation_function="silu",
                  layer_norm_epsilon=common["rms_norm_eps"], num_layers=common["num_hidden_layers"],
                  rope_theta=10000.0, rope_scaling=None, torch_dtype="bfloat16",
                  auto_map={"AutoConfig": "configuration_exaone.ExaoneConfig"})
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return path


# the families that keep their labels and their repos' config classes (--trust-remote-code, as the upstream)
REMOTE_CONFIG = {"solar": "configuration_solar.py", "exaone": "configuration_exaone.py"}


@pytest.mark.parametrize("family", [*sorted(ARCH), *REMOTE_CONFIG])
def test_derivative_serves_the_originals_outputs(originals, tmp_path, family):
    """IQuest-Coder and TeleChat3 written as MistralForCausalLM; Solar and EXAONE under their own labels."""
    src, original = originals[family]
    dst = tmp_path / "tp3"
    result = cli("mirror", src, "--tp", 3, "--to", dst)
    assert result.exit_code == 0, result.output
    config = json.loads((dst / "config.json").read_text())
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (6, 3, 32)
    remote = REMOTE_CONFIG.get(family)
    if remote:
        assert config["model_type"] == family and (dst / remote).is_file()
        assert "--trust-remote-code" in serving.card_serve_command(dst)
    else:
        assert (config["model_type"], config["architectures"]) == ("mistral", ["MistralForCausalLM"])
    engine = {"trust_remote_code": True} if remote else {}
    run = serving.run_vllm([serving.job(dst, 3, **engine, **serving.card_engine_args(dst))], tmp_path / "run",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    serving.assert_same_outputs(original, run.ok(0), f"{family} TP=1 vs derivative TP=3")
    if family == "telechat3":  # vLLM rewrote the derivative's rope scaling, under MistralConfig, as it does TeleChat3's
        assert "Replacing rope_type 'telechat3-yarn' with 'yarn'" in run.log
