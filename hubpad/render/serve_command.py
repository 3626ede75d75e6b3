"""The `vllm serve` command line of a derivative: its flags, shared by the card (as values) and the sparkrun recipe
(as `{key}` placeholders filled from its defaults), and the minimum vLLM version the card states for them.

Values from hubpad.json are spliced into a shell command and a YAML block: plain tokens only where unquoted, no
control characters, no braces (sparkrun reads them as placeholders) outside the quoted JSON values.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from hubpad.errors import HubpadError
from hubpad.render.upstream_card import str_list

_SIMPLE_TOKEN = re.compile(r"[A-Za-z0-9][\w.:/-]*")


def _simple_token(value: Any, what: str) -> str:
    """A value spliced unquoted into a shell or recipe command (parser names, sizes): one plain token or an error."""
    text = str(value)
    if not _SIMPLE_TOKEN.fullmatch(text):
        raise HubpadError(f"serving.{what} {text!r} is not a plain token; refusing to put it in a command")
    return text


def _no_control(value: str, what: str) -> str:
    """Reject control characters (newlines break the recipe's YAML block and the shell command)."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise HubpadError(f"serving.{what} contains a control character")
    return value


def _json_object(value: Any, what: str) -> str:
    """A JSON object (or its text) as one line of JSON that can sit in single quotes."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise HubpadError(f"serving.{what} is a string but not JSON") from exc
    if not isinstance(value, dict):
        raise HubpadError(f"serving.{what} must be a JSON object")
    text = _no_control(json.dumps(value), what)
    if "'" in text:
        raise HubpadError(f"serving.{what} must not contain single quotes (it is quoted with them)")
    return text


def serving_flags(serving: dict[str, Any], tp: int) -> list[dict[str, Any]]:
    """The vLLM flags of the serve command, shared by the recipe (as `{key}` placeholders) and the card (as values).

    Each entry: flag, key (the recipe `defaults` key, None for a literal flag), value, quote (wrap in '...' in the
    recipe).
    """
    flags: list[dict[str, Any]] = []

    def add(flag: str, key: str | None = None, value: Any = None, quote_it: bool = False) -> None:
        flags.append({"flag": flag, "key": key, "value": value, "quote": quote_it})

    add("--tensor-parallel-size", "tensor_parallel", tp)
    tool_parser = serving.get("tool_call_parser")
    if tool_parser:
        if serving.get("enable_auto_tool_choice", True):
            add("--enable-auto-tool-choice")
        add("--tool-call-parser", "tool_call_parser", _simple_token(tool_parser, "tool_call_parser"))
    if serving.get("reasoning_parser"):
        add("--reasoning-parser", "reasoning_parser", _simple_token(serving["reasoning_parser"], "reasoning_parser"))
    for key in ("speculative_config", "hf_overrides"):  # JSON objects, single-quoted in the recipe and the card
        if serving.get(key):
            add("--" + key.replace("_", "-"), key, _json_object(serving[key], key), quote_it=True)
    for key in ("model_impl", "mm_encoder_tp_mode"):
        if serving.get(key):
            add("--" + key.replace("_", "-"), key, _simple_token(serving[key], key))
    if serving.get("trust_remote_code"):
        add("--trust-remote-code")
    if serving.get("max_model_len"):
        add("--max-model-len", "max_model_len", int(serving["max_model_len"]))
    extra = serving.get("extra_args") or []
    if isinstance(extra, str):
        extra = shlex.split(extra)
    extra = [_no_control(str(arg), "extra_args") for arg in extra]
    if any("{" in arg or "}" in arg for arg in extra):
        raise HubpadError("serving.extra_args must not contain braces (sparkrun reads them as placeholders)")
    i = 0
    while i < len(extra):  # one line per option, with its value when the next token is not an option
        words = [extra[i]]
        if extra[i].startswith("-") and i + 1 < len(extra) and not extra[i + 1].startswith("-"):
            words.append(extra[i + 1])
        add(" ".join(shlex.quote(w) for w in words))
        i += len(words)
    return flags


def min_vllm_info(serving: dict) -> dict[str, Any] | None:
    """serving.min_vllm ({version, because}) as the card states it, or None when hubpad.json has none."""
    info = serving.get("min_vllm") or {}
    version = str(info.get("version") or "")
    if not version:
        return None
    if not re.fullmatch(r"\d+(\.\d+){1,3}", version):
        raise HubpadError(f"serving.min_vllm.version {version!r} is not a version number")
    return {"version": version, "because": str_list(info.get("because"))}
