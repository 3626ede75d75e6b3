"""The vLLM flags a route (adapters/base.py VllmRoute) adds to the serve command, in the one form every output shares:
the plan report, the advisor, and the card and recipe (render/serve_command.py) all say it this way."""

from __future__ import annotations

import json


def route_flags(route: dict | None) -> list[str]:
    """`--hf-overrides '<json>'` and/or `--model-impl NAME`, as words of a shell command (JSON single-quoted)."""
    if not route:
        return []
    flags = []
    if route.get("hf_overrides"):
        flags += ["--hf-overrides", f"'{json.dumps(route['hf_overrides'], separators=(', ', ': '))}'"]
    if route.get("model_impl"):
        flags += ["--model-impl", str(route["model_impl"])]
    return flags
