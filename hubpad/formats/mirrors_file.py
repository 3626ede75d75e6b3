"""The mirrors file (`hubpad.yaml`): which upstream checkpoints to keep padded mirrors of, and how.

```yaml
defaults:            # optional; any entry key except upstream/target
  tp: 3
  shard_size: 5GB
mirrors:
  - upstream: RedHatAI/Hy3-NVFP4-FP8      # Hub repo id, or a local path starting with / ./ ../ or ~
    target: alice/Hy3-NVFP4-FP8-TP3       # optional; default <namespace>/<upstream name>-TP<tp>
    revision: main                        # optional upstream branch, tag or commit
    max_disk: 60GB                        # optional disk budget for the work directory
    private: false
    serving: {tool_call_parser: hy_v3, extra_args: [--max-model-len, "32768"]}
    recipe: {container: ...}              # merged into the generated sparkrun recipe (not model/model_revision)
  - upstream: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B
    draft_for: meta-llama/Llama-3.1-8B-Instruct   # a speculative-decoding draft for another entry's upstream (same tp)
```

A `draft_for` entry pairs a draft with the entry whose upstream it names at the same tp: the draft's card names that
entry's target, and that target's serve command carries `--speculative-config` with the draft's target (`pairing`).

Entries inherit `defaults`; `serving` and `recipe` are merged key by key (the entry wins). Every problem is one line
naming the file, the line and the entry; a file with several is refused with all of them at once (MirrorsFileError).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from hubpad.errors import HubpadError
from hubpad.util.refs import derive_target, is_local, same_ref, validate_repo_id
from hubpad.util.sizes import format_size, parse_size, parse_size_floor

MIRRORS_FILE = "hubpad.yaml"
DEFAULT_TP = 3
DEFAULT_SHARD_SIZE = 5_000_000_000  # "5GB", the CLI's --shard-size default

TOP_KEYS = ("defaults", "mirrors")
ENTRY_KEYS = ("upstream", "target", "tp", "revision", "shard_size", "max_disk", "private", "serving", "recipe",
              "draft_for")
DEFAULT_KEYS = tuple(k for k in ENTRY_KEYS if k not in ("upstream", "target", "draft_for"))
# Recipe keys that say which weights run: they follow from the derivative itself and are never overridden.
PINNED_RECIPE_KEYS = ("model", "model_revision")
SERVING_KEYS = ("tool_call_parser", "reasoning_parser", "speculative_config", "extra_args", "container_image")



class MirrorsFileError(HubpadError):
    """Every mistake found in a mirrors file, one line each (`problems`); the message is the only one, or all of them."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__(self.problems[0] if len(self.problems) == 1 else
                         f"{len(self.problems)} mistakes: " + "; ".join(self.problems))


def _problems(exc: HubpadError) -> list[str]:
    return list(getattr(exc, "problems", None) or [str(exc)])


class _Collect:
    """Runs checks one after another and keeps every HubpadError they raise, so one run reports all mistakes."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def run(self, check, *args, default=None, **kw):
        try:
            return check(*args, **kw)
        except HubpadError as exc:
            self.problems += _problems(exc)
            return default

    def raise_any(self) -> None:
        if self.problems:
            raise MirrorsFileError(self.problems)


@dataclass(frozen=True)
class MirrorSpec:
    """One mirror: pad `upstream` for tensor-parallel size `tp` and publish it to `target`."""

    upstream: str
    target: str | None = None
    tp: int = DEFAULT_TP
    revision: str | None = None
    shard_size: int = DEFAULT_SHARD_SIZE
    max_disk: int | None = None
    private: bool = False
    serving: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    recipe: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    draft_for: str | None = None  # the upstream of the entry this one is a speculative-decoding draft for
    where: str = field(default="", compare=False, repr=False)  # "hubpad.yaml:7: mirrors[0]", for messages

    @property
    def upstream_kind(self) -> str:
        """"local" when `upstream` is a path, else "hub"."""
        return "local" if is_local(self.upstream) else "hub"

    @property
    def target_kind(self) -> str:
        """"local" when an explicit `target` is a path, else "hub" (derived targets are Hub repos)."""
        return "local" if self.target is not None and is_local(self.target) else "hub"

    def resolved_target(self, namespace: str | None = None) -> str:
        """The explicit target, or the derived one (`<namespace>/<upstream name>-TP<tp>`).

        A bare explicit Hub name ("X-TP3") is put under `namespace` when one is given.
        """
        if self.target is None:
            return derive_target(self.upstream, self.tp, namespace)
        if namespace and self.target_kind == "hub" and "/" not in self.target:
            return f"{namespace}/{self.target}"
        return self.target

    def serving_overrides(self) -> dict[str, Any]:
        """The `serving` overrides as plain, mutable, JSON-ready data (only the keys the file set)."""
        return _thaw(self.serving)

    def recipe_overrides(self) -> dict[str, Any]:
        """The `recipe` overrides as plain, mutable, JSON-ready data."""
        return _thaw(self.recipe)

    def to_dict(self, namespace: str | None = None) -> dict[str, Any]:
        """JSON-ready view (sizes as strings like "5GB"); `target` resolved when possible."""
        target = self.resolved_target(namespace) if (self.target is not None or namespace) else None
        return {
            "upstream": self.upstream,
            "target": target,
            "tp": self.tp,
            "revision": self.revision,
            "shard_size": format_size(self.shard_size),
            "max_disk": format_size(self.max_disk) if self.max_disk is not None else None,
            "private": self.private,
            "serving": self.serving_overrides(),
            "recipe": self.recipe_overrides(),
            "draft_for": self.draft_for,
        }






def pairing(specs: Sequence[MirrorSpec], spec: MirrorSpec,
            namespace: str | None = None) -> tuple[str | None, list[MirrorSpec]]:
    """The speculative-decoding pairs of `spec` in the file: the target its draft pairs with (the resolved target of
    the entry at the same tp whose upstream its `draft_for` names; None when it is no draft), and the draft entries
    at the same tp whose `draft_for` names its upstream. HubpadError when a `draft_for` names no entry."""
    paired = None
    if spec.draft_for is not None:
        found = [s for s in specs if s is not spec and s.tp == spec.tp and same_ref(s.upstream, spec.draft_for)]
        if len(found) != 1:
            raise HubpadError(f"{spec.where}: draft_for {spec.draft_for!r} names "
                              f"{'no' if not found else len(found)} mirror entr{'y' if len(found) < 2 else 'ies'} "
                              f"with tp {spec.tp}; a draft runs at its target's TP")
        paired = found[0].resolved_target(namespace)
    drafts = [s for s in specs if s is not spec and s.draft_for is not None and s.tp == spec.tp
              and same_ref(s.draft_for, spec.upstream)]
    return paired, drafts


def find_mirror(
    specs: Sequence[MirrorSpec],
    upstream: str,
    *,
    target: str | None = None,
    tp: int | None = None,
    namespace: str | None = None,
    source: str = MIRRORS_FILE,
) -> MirrorSpec:
    """The one entry matching `upstream` (and `target` / `tp` when given); HubpadError if none or several."""
    want_target = target.casefold() if target else None
    found = [
        s
        for s in specs
        if same_ref(s.upstream, upstream)
        and (tp is None or s.tp == tp)
        and (want_target is None or s.resolved_target(namespace).casefold() == want_target)
    ]
    if len(found) == 1:
        return found[0]
    what = upstream + (f" -> {target}" if target else "") + (f" at tp {tp}" if tp is not None else "")
    if not found:
        raise HubpadError(f"{source}: no mirror entry for {what}")
    raise HubpadError(f"{source}: {len(found)} mirror entries match {what}; pass --to to pick one")


def load_mirrors(path: str | Path, *, namespace: str | None = None) -> list[MirrorSpec]:
    """Read and validate a mirrors file; `namespace` (the token's user/org) lets bare targets be compared."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HubpadError(f"{path}: mirrors file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HubpadError(f"{path}: cannot read mirrors file: {exc}") from None
    return parse_mirrors(text, source=str(path), base_dir=path.resolve().parent, namespace=namespace)


def parse_mirrors(
    text: str,
    *,
    source: str = MIRRORS_FILE,
    base_dir: str | Path | None = None,
    namespace: str | None = None,
) -> list[MirrorSpec]:
    """Validate mirrors-file text; relative local paths are resolved against `base_dir` (default: cwd).

    Raises HubpadError naming the file, line and entry of the first problem.
    """
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    doc = _load_yaml(text, source)
    if doc is None:
        raise HubpadError(f"{source}: the file is empty; expected a 'mirrors:' list")
    if not isinstance(doc, dict):
        raise HubpadError(f"{source}: expected a mapping with a 'mirrors:' list, got {_type_name(doc)}")
    top = _Where(source, _line(doc), "")
    found = _Collect()
    found.run(_check_keys, doc, TOP_KEYS, top)
    if found.problems and "mirrors" not in doc:  # a misspelt 'mirrors:' is the one mistake to report
        found.raise_any()
    defaults = found.run(_parse_defaults, doc, top, default={})
    specs: list[MirrorSpec] = []
    seen: dict[tuple[str, str], str] = {}
    for index, entry in enumerate(found.run(_entries, doc, top, default=[])):
        parsed = found.run(_parse_entry, entry, index, defaults, top, base)
        # An entry with mistakes still claims its target when they leave it known: a duplicate is reported too.
        spec, where = parsed if parsed is not None else (_known_target(entry, defaults, base), _entry_where(entry,
                                                                                                          index, top))
        if spec is None:
            continue
        key, shown = _target_key(spec, namespace)
        if key in seen:
            how = "derived " if spec.target is None else ""
            found.problems.append(str(where.error(f"duplicate {how}target '{shown}', already used by {seen[key]}")))
            continue
        seen[key] = where.label
        if parsed is not None:
            specs.append(spec)
    found.raise_any()
    return specs


def _entry_where(entry: object, index: int, top: _Where) -> _Where:
    """Where an entry sits, named by its upstream when it has one: `hubpad.yaml:7: mirrors[1] (org/model)`."""
    upstream = entry.get("upstream") if isinstance(entry, dict) else None
    label = f"mirrors[{index}]" + (f" ({upstream.strip()})" if isinstance(upstream, str) and upstream.strip() else "")
    return _Where(top.source, _line(entry, top.line), label)


def _known_target(entry: object, defaults: dict[str, Any], base: Path) -> MirrorSpec | None:
    """The target of an entry that has mistakes, when they leave it known: an explicit valid target, or one derived
    from a valid upstream and a valid tp (its own or the defaults'); None otherwise."""
    if not isinstance(entry, dict):
        return None
    where, quiet = _Where("", None, ""), _Collect()
    ref = lambda key: (quiet.run(_validate_ref, entry[key], key, where, base, allow_bare=True)  # noqa: E731
                       if entry.get(key) is not None else None)
    upstream, target = ref("upstream"), ref("target")
    tp = quiet.run(_validate_fields, {"tp": entry["tp"]}, where, default={}).get("tp") if "tp" in entry \
        else defaults.get("tp", DEFAULT_TP)
    if target is None and (upstream is None or tp is None):
        return None
    return MirrorSpec(upstream=upstream or "", target=target, tp=tp or DEFAULT_TP)


def _parse_defaults(doc: dict, top: _Where) -> dict[str, Any]:
    defaults_raw = doc.get("defaults")
    if defaults_raw is None:
        defaults_raw = {}
    dwhere = _Where(top.source, _line(defaults_raw, top.line), "defaults")
    if not isinstance(defaults_raw, dict):
        raise dwhere.error(f"'defaults' must be a mapping, got {_type_name(defaults_raw)}")
    found = _Collect()
    for key in ("upstream", "target"):
        if key in defaults_raw:
            found.problems.append(str(dwhere.at(defaults_raw, key).error(f"'{key}' cannot be set in defaults; set it "
                                                                        f"on each mirror")))
    found.run(_check_keys, {k: v for k, v in defaults_raw.items() if k not in ("upstream", "target")}, DEFAULT_KEYS,
              dwhere)
    out = found.run(_validate_fields, defaults_raw, dwhere, default={})
    found.raise_any()
    return out


def _entries(doc: dict, top: _Where) -> list:
    if "mirrors" not in doc:
        raise top.error("missing the 'mirrors:' list")
    entries = doc["mirrors"]
    if not isinstance(entries, list):
        raise top.error(f"'mirrors' must be a list, got {_type_name(entries)}")
    if not entries:
        raise top.error("'mirrors' is empty; list at least one mirror")
    return entries


def _parse_entry(entry: object, index: int, defaults: dict[str, Any], top: _Where,
                 base: Path) -> tuple[MirrorSpec, _Where]:
    """One `mirrors:` entry, with the defaults merged in (`serving` and `recipe` key by key)."""
    where = _entry_where(entry, index, top)
    if not isinstance(entry, dict):
        raise where.error(f"each mirror must be a mapping with an 'upstream' key, got {_type_name(entry)}")
    upstream_raw = entry.get("upstream")
    found = _Collect()
    found.run(_check_keys, entry, ENTRY_KEYS, where)
    upstream = None
    if "upstream" not in entry or upstream_raw is None:
        found.problems.append(str(where.error("missing required key 'upstream' (a Hub repo id like org/model, or "
                                              "./local/path)")))
    else:
        upstream = found.run(_validate_ref, upstream_raw, "upstream", where.at(entry, "upstream"), base,
                             allow_bare=True)
    target = None
    if entry.get("target") is not None:
        target = found.run(_validate_ref, entry["target"], "target", where.at(entry, "target"), base, allow_bare=True)
    draft_for = None
    if entry.get("draft_for") is not None:
        draft_for = found.run(_validate_ref, entry["draft_for"], "draft_for", where.at(entry, "draft_for"), base,
                              allow_bare=True)
    values = found.run(_validate_fields, entry, where, default={})  # (draft_for is none of its keys)
    found.raise_any()
    merged: dict[str, Any] = {**defaults, **values}
    for key in ("serving", "recipe"):
        merged[key] = {**defaults.get(key, {}), **values.get(key, {})}
    for key in PINNED_RECIPE_KEYS:
        if key in merged["recipe"]:
            raise where.error(f"recipe.{key} cannot be overridden: hubpad pins it to the derivative it publishes")
    spec = MirrorSpec(
        upstream=upstream, target=target, tp=merged.get("tp", DEFAULT_TP), revision=merged.get("revision"),
        shard_size=merged.get("shard_size", DEFAULT_SHARD_SIZE), max_disk=merged.get("max_disk"),
        private=merged.get("private", False), serving=_freeze(merged["serving"]), recipe=_freeze(merged["recipe"]),
        draft_for=draft_for, where=where.prefix(),
    )
    if spec.max_disk is not None and spec.max_disk < spec.shard_size:
        raise where.error(f"max_disk ({format_size(spec.max_disk)}) is smaller than shard_size "
                          f"({format_size(spec.shard_size)}); hubpad needs room for at least one output shard")
    if target is None:
        try:
            validate_repo_id(derive_target(upstream, spec.tp), allow_bare=True)
        except ValueError as exc:
            raise where.error(f"cannot derive a target from upstream ({exc}); set 'target' explicitly") from None
    return spec, where


# --- validation helpers -----------------------------------------------------------------------------------


class _Where:
    """Where a value sits, for one-line errors: `hubpad.yaml:12: mirrors[1] (org/model): problem`."""

    def __init__(self, source: str, line: int | None, label: str) -> None:
        self.source, self.line, self.label = source, line, label

    def prefix(self) -> str:
        loc = f"{self.source}:{self.line}" if self.line else self.source
        return f"{loc}: {self.label}" if self.label else loc

    def error(self, problem: str) -> HubpadError:
        return HubpadError(f"{self.prefix()}: {problem}")

    def at(self, mapping: object, key: object) -> "_Where":
        """The same place, on the line of `key` in `mapping` (a problem with a key names its own line)."""
        lines = getattr(mapping, "key_lines", None) or {}
        try:
            line = lines.get(key)
        except TypeError:  # an unhashable key: the mapping's line
            line = None
        return _Where(self.source, line or self.line, self.label)


def _check_keys(mapping: dict, allowed: Sequence[str], where: _Where, section: str = "") -> None:
    found = _Collect()
    for key in mapping:
        found.run(_check_key, key, allowed, where.at(mapping, key), section)
    found.raise_any()


def _check_key(key: object, allowed: Sequence[str], where: _Where, section: str) -> None:
    if not isinstance(key, str):
        raise where.error(f"keys must be strings, got {key!r} ({_type_name(key)})")
    if key not in allowed:
        name = f"{section}.{key}" if section else key
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        if not close:
            close = [k for k in allowed if k.replace("_", "") == key.replace("-", "").replace("_", "").lower()]
        hint = f"; did you mean '{close[0]}'?" if close else f"; valid keys: {', '.join(allowed)}"
        raise where.error(f"unknown key '{name}'{hint}")


def _validate_fields(raw: dict, where: _Where) -> dict[str, Any]:
    """Validate the keys shared by entries and defaults; returns only the keys present, normalized. Every bad value is
    reported (MirrorsFileError), not just the first."""
    out: dict[str, Any] = {}
    found = _Collect()
    for check in (_field_tp, _field_revision, _field_sizes, _field_private, _field_serving, _field_recipe):
        found.run(check, raw, where, out)
    found.raise_any()
    return out


def _field_tp(raw: dict, where: _Where, out: dict[str, Any]) -> None:
    if "tp" in raw:
        tp = raw["tp"]
        where = where.at(raw, "tp")
        if isinstance(tp, bool) or not isinstance(tp, int):
            raise where.error(f"tp must be an integer >= 2, got {tp!r} ({_type_name(tp)})")
        if tp < 2:
            raise where.error(f"tp must be an integer >= 2, got {tp} (tp 1 needs no padding)")
        out["tp"] = tp


def _field_revision(raw: dict, where: _Where, out: dict[str, Any]) -> None:
    if raw.get("revision") is not None:
        rev, where = raw["revision"], where.at(raw, "revision")
        if not isinstance(rev, str):
            raise where.error(f"revision must be a string, got {rev!r} ({_type_name(rev)}); quote it in YAML")
        if not rev.strip() or any(c.isspace() or ord(c) < 32 for c in rev):
            raise where.error(f"revision must be a branch, tag or commit without spaces, got {rev!r}")
        out["revision"] = rev


def _field_sizes(raw: dict, where: _Where, out: dict[str, Any]) -> None:
    found = _Collect()
    for key in ("shard_size", "max_disk"):
        found.run(_field_size, raw, key, where, out)
    found.raise_any()


def _field_size(raw: dict, key: str, where: _Where, out: dict[str, Any]) -> None:
    if raw.get(key) is None:
        return
    value, where = raw[key], where.at(raw, key)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise where.error(f"{key} must be a size like '5GB', got {value!r} ({_type_name(value)})")
    try:
        size = parse_size(value)
        if size > 0:
            size = parse_size_floor(value, key)
    except ValueError as exc:
        raise where.error(f"{key}: {exc}") from None
    if size <= 0:
        raise where.error(f"{key} must be greater than zero, got {value!r}")
    out[key] = size


def _field_private(raw: dict, where: _Where, out: dict[str, Any]) -> None:
    if raw.get("private") is not None:
        private, where = raw["private"], where.at(raw, "private")
        if not isinstance(private, bool):
            raise where.error(f"private must be true or false, got {private!r} ({_type_name(private)})")
        out["private"] = private


def _field_serving(raw: dict, where: _Where, out: dict[str, Any]) -> None:
    if raw.get("serving") is not None:
        out["serving"] = _validate_serving(raw["serving"], where.at(raw, "serving"))


def _field_recipe(raw: dict, where: _Where, out: dict[str, Any]) -> None:
    if raw.get("recipe") is not None:
        recipe, where = raw["recipe"], where.at(raw, "recipe")
        if not isinstance(recipe, dict):
            raise where.error(f"recipe must be a mapping of recipe overrides, got {_type_name(recipe)}")
        out["recipe"] = {k: _plain(v, f"recipe.{k}", where.at(recipe, k))
                         for k, v in _str_keys(recipe, "recipe", where).items()}


def _validate_serving(serving: object, where: _Where) -> dict[str, Any]:
    if not isinstance(serving, dict):
        raise where.error(f"serving must be a mapping ({', '.join(SERVING_KEYS)}), got {_type_name(serving)}")
    _check_keys(serving, SERVING_KEYS, where, section="serving")
    out: dict[str, Any] = {}
    for key, value in serving.items():
        name, where = f"serving.{key}", where.at(serving, key)
        if key in ("tool_call_parser", "reasoning_parser", "container_image"):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise where.error(f"{name} must be a non-empty string or null, got {value!r} ({_type_name(value)})")
            out[key] = value
        elif key == "speculative_config":
            if value is not None and not isinstance(value, dict):
                raise where.error(f"{name} must be a mapping (e.g. {{method: mtp, num_speculative_tokens: 1}}) or null")
            out[key] = None if value is None else _plain(value, name, where)
        elif key == "extra_args":
            if value is None:
                value = []
            if not isinstance(value, list):
                raise where.error(f"{name} must be a list of command-line arguments, got {_type_name(value)}")
            args = []
            for i, arg in enumerate(value):
                if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
                    raise where.error(f"{name}[{i}] must be a string, got {arg!r} ({_type_name(arg)})")
                args.append(str(arg))
            out[key] = args
    return out


def _validate_ref(value: object, key: str, where: _Where, base: Path, *, allow_bare: bool) -> str:
    if not isinstance(value, str) or not value.strip():
        raise where.error(f"{key} must be a Hub repo id (org/model) or a local path, got {value!r} ({_type_name(value)})")
    ref = value.strip()
    if is_local(ref, base):  # the one rule, with paths relative to the mirrors file's folder
        return str((base / Path(ref).expanduser()).resolve())
    try:
        validate_repo_id(ref, allow_bare=allow_bare)
    except ValueError as exc:
        raise where.error(f"{key} {ref!r} is not a valid Hub repo id ({exc}); local paths start with / ./ ../ or ~") from None
    return ref




def _target_key(spec: MirrorSpec, namespace: str | None) -> tuple[tuple[str, str], str]:
    """A comparable key for the target (case-insensitive, as the Hub) and how to show it."""
    if spec.target_kind == "local" and spec.target is not None:
        return ("local", spec.target), spec.target
    shown = spec.resolved_target(namespace)
    kind = "hub" if "/" in shown else "hub-own"  # bare names all land in the token owner's namespace
    return (kind, shown.casefold()), shown




def _str_keys(mapping: dict, name: str, where: _Where) -> dict[str, Any]:
    for key in mapping:
        if not isinstance(key, str):
            raise where.at(mapping, key).error(f"{name} keys must be strings, got {key!r} ({_type_name(key)})")
    return mapping


def _plain(value: object, name: str, where: _Where) -> Any:
    """Check that a free-form value is JSON-like (YAML dates, sets, etc. are refused) and copy it."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, list):
        return [_plain(v, f"{name}[{i}]", where) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _plain(v, f"{name}.{k}", where) for k, v in _str_keys(value, name, where).items()}
    raise where.error(f"{name}: unsupported value {value!r} ({_type_name(value)}); quote it in YAML")


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _type_name(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list", type(None): "null"}
    if isinstance(value, dict):
        return "a mapping"
    return names.get(type(value), type(value).__name__)


# --- YAML with line numbers and duplicate-key detection -----------------------------------------------------


class _LineDict(dict):
    """A dict that remembers the line its YAML mapping started on, and each key's own line."""

    line: int | None = None
    key_lines: dict | None = None


def _line(value: object, fallback: int | None = None) -> int | None:
    return getattr(value, "line", None) or fallback


class _Loader(yaml.SafeLoader):
    pass


class _DuplicateKey(Exception):
    def __init__(self, key: object, line: int) -> None:
        super().__init__(key, line)
        self.key, self.line = key, line


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> _LineDict:
    loader.flatten_mapping(node)
    mapping = _LineDict()
    mapping.line = node.start_mark.line + 1
    mapping.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in mapping
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, f"unhashable key {key!r}", key_node.start_mark
            ) from None
        if duplicate:
            raise _DuplicateKey(key, key_node.start_mark.line + 1)
        mapping[key] = loader.construct_object(value_node, deep=True)
        mapping.key_lines[key] = key_node.start_mark.line + 1
    return mapping


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _load_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except _DuplicateKey as exc:
        raise HubpadError(f"{source}:{exc.line}: duplicate key '{exc.key}'") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise HubpadError(f"{loc}: invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise HubpadError(f"{source}: invalid YAML: {' '.join(str(exc).split())}") from None
