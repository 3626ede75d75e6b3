"""IQuest-Coder, TeleChat3 and Solar Pro in vLLM's CPU build (0.32): their derivatives serve at TP 3 with the
original's greedy tokens; IQuest-Coder's and TeleChat3's labelled MistralForCausalLM (plan/relabel.py).

vLLM's registry builds IQuestCoderForCausalLM and TeleChat3ForCausalLM with its LlamaForCausalLM. Their own config
classes are remote code that transformers 5.19 (the serving lock) lacks, so the original is served through that
registry entry with its config.json labelled llama (LlamaConfig holds the unpadded heads): the same vLLM class, the
same weights. TeleChat3's fixture carries the published `telechat3-yarn` rope scaling, which vLLM rewrites to YaRN
for any config class (vllm/transformers_utils/config.py), the derivative's MistralConfig included.

Solar's config class is its repo's configuration_solar.py (--trust-remote-code): the fixture ships one that, like the
published class, keeps every key config.json gives it and checks no head count. Its 4 layers keep the stream at layers 1
and 2 and blend both in at layer 3, as vLLM's SolarModel does with bskcn_tv[1].
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
    upstreams["solar"] = _solar_upstream(root / "solar" / "upstream")
    served.append(serving.job(upstreams["solar"], 1, trust_remote_code=True))
    run = serving.run_vllm(served, root / "run-originals")
    return {family: (upstreams[family], run.ok(i)) for i, family in enumerate([*sorted(ARCH), "solar"])}


@pytest.mark.parametrize("family", sorted(ARCH))
def test_llama_class_family_derivative_serves_the_originals_outputs(originals, tmp_path, family):
    src, original = originals[family]
    dst = tmp_path / "tp3"
    result = cli("mirror", src, "--tp", 3, "--to", dst)
    assert result.exit_code == 0, result.output
    config = json.loads((dst / "config.json").read_text())
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (6, 3, 32)
    assert (config["model_type"], config["architectures"]) == ("mistral", ["MistralForCausalLM"])
    run = serving.run_vllm([serving.job(dst, 3, **serving.card_engine_args(dst))], tmp_path / "run",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    serving.assert_same_outputs(original, run.ok(0), f"{family} TP=1 vs derivative TP=3")


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


def test_solar_derivative_serves_the_originals_outputs(originals, tmp_path):
    src, original = originals["solar"]
    dst = tmp_path / "tp3"
    result = cli("mirror", src, "--tp", 3, "--to", dst)
    assert result.exit_code == 0, result.output
    config = json.loads((dst / "config.json").read_text())
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (6, 3, 32)
    assert config["model_type"] == "solar" and (dst / "configuration_solar.py").is_file()
    assert "--trust-remote-code" in serving.card_serve_command(dst)
    run = serving.run_vllm([serving.job(dst, 3, trust_remote_code=True, **serving.card_engine_args(dst))],
                           tmp_path / "run", plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    serving.assert_same_outputs(original, run.ok(0), "solar TP=1 vs derivative TP=3")
