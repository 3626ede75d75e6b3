"""Rendering the derivative's card, sparkrun recipe and vLLM patch from hubpad.json with jinja2 templates."""

from .card import RenderResult, render_derivative
from .upstream_card import extract_owner_section, parse_card_metadata

__all__ = ["RenderResult", "extract_owner_section", "parse_card_metadata", "render_derivative"]
