"""`hubpad verify SRC DST`: prove DST is SRC padded losslessly, reading both front to back.

The byte checks do not trust the padder: original bytes must sit in place in DST (or, in a scaled copy, the value
nearest to the original's times the planned factor, checked element by element), padded weight/code
regions must hold the format's zero (codes of int4, GPTQ, AWQ: nibble 0x8; GPTQ v1 zero points: 0x7),
padded scale cells must decode to finite positive numbers, every shard must hash to what `hubpad.json` records, and
the upstream files carried unchanged must be there byte for byte.
"""

from __future__ import annotations

import math
import struct
import sys
from array import array
from collections.abc import Iterator
from fractions import Fraction

from hubpad.errors import HubpadError, IntegrityError
from hubpad.formats.floats import decode as decode_element, is_plain
from hubpad.formats.manifest import parse_manifest
from hubpad.formats.names import INDEX, MANIFEST, folder_of
from hubpad.plan.model import Plan, TensorPlan
from hubpad.plan.planner import make_plan
from hubpad.plan.quant import QuantConfig, pad_cell_zero
from hubpad.source.base import Source, VerifiedReader
from hubpad.source.readers import read_header, read_json


def _e4m3(b: int) -> float:
    sign = -1.0 if b & 0x80 else 1.0
    exp, man = (b >> 3) & 0xF, b & 0x7
    if exp == 0xF and man == 0x7:
        return math.nan
    if exp == 0:
        return sign * man / 8 * 2 ** -6
    return sign * (1 + man / 8) * 2 ** (exp - 7)


def decode(dtype: str, raw: bytes) -> float:
    """One scalar of a float dtype, for checking padded scale cells."""
    if dtype == "F32":
        return struct.unpack("<f", raw)[0]
    if dtype == "F64":
        return struct.unpack("<d", raw)[0]
    if dtype == "F16":
        return struct.unpack("<e", raw)[0]
    if dtype == "BF16":
        return struct.unpack("<f", b"\x00\x00" + raw)[0]
    if dtype == "F8_E4M3":
        return _e4m3(raw[0])
    if dtype in ("F8_E8M0", "U8"):  # a U8 scale is e8m0 stored as bytes (MXFP4)
        return math.nan if raw[0] == 0xFF else 2.0 ** (raw[0] - 127)
    raise HubpadError(f"cannot decode scale dtype {dtype}")


def check_pad_region(t: TensorPlan, region: bytes, qcfg: QuantConfig) -> None:
    """A padded region must dequantize to exactly zero: the format's zero codes, finite positive scales."""
    if not region:
        return
    zero = pad_cell_zero(t.name.rpartition(".")[2], t.dtype, qcfg)
    if zero is None:
        s = t.src.itemsize
        for value in {region[i:i + s] for i in range(0, len(region), s)}:
            x = decode(t.dtype, value)
            if not (math.isfinite(x) and x > 0):
                raise IntegrityError(f"tensor {t.name}: padded scale cell {value.hex()} is {x}, not finite and positive")
        return
    if len(region) % len(zero) or region != zero * (len(region) // len(zero)):
        raise IntegrityError(f"tensor {t.name}: padded region is not all {zero.hex()} (the format's zero)")


def check_scaled(t: TensorPlan, want: bytes, got: bytes, factor: float) -> None:
    """Every element of `got` is the dtype's value nearest to the same element of `want` × `factor` (exactly,
    ties to even): checked against its two neighbouring codes, once per distinct (original, stored) pair."""
    s = t.src.itemsize
    if len(want) != len(got):
        raise IntegrityError(f"tensor {t.name}: scaled region has {len(got)} bytes, expected {len(want)}")
    codes = []
    for x in (want, got):
        arr = array({2: "H", 4: "I", 8: "Q"}[s], x)
        if sys.byteorder == "big":
            arr.byteswap()
        codes.append(arr)
    pairs = {(a.to_bytes(s, "little"), b.to_bytes(s, "little")) for a, b in set(zip(*codes))}
    f = Fraction(factor)
    for a, b in pairs:
        x, y = decode_element(t.dtype, a), decode_element(t.dtype, b)
        if not (math.isfinite(x) and math.isfinite(y)) or (y != 0 and (y < 0) != (x < 0)):
            raise IntegrityError(f"tensor {t.name}: scaled element {b.hex()} is {y}, from {x} x {factor}")
        product, code = x * factor, int.from_bytes(b, "little")  # IEEE: the exact product rounded once
        if t.dtype == "F64" and y == product:
            continue
        if is_plain(t.dtype, product) and _nearest(t.dtype, s, code, y, product):
            continue  # off the dtype's midpoints, the float64 product orders the neighbours as the exact one does
        exact = Fraction(x) * f
        err = abs(Fraction(y) - exact)
        for nb in (code - 1, code + 1):
            if nb < 0 or nb >> (8 * s) or (nb ^ code) >> (8 * s - 1):  # out of range, or across the sign bit
                continue
            z = decode_element(t.dtype, nb.to_bytes(s, "little"))
            dz = abs(Fraction(z) - exact) if math.isfinite(z) else None
            if dz is not None and (dz < err or (dz == err and nb % 2 == 0)):
                raise IntegrityError(f"tensor {t.name}: scaled element {y!r} is not {x!r} x {factor!r} rounded "
                                     f"to the nearest {t.dtype} value ({z!r} is nearer, or as near and even)")


def _nearest(dtype: str, size: int, code: int, y: float, p: float) -> bool:
    """`y` (element code `code`) is strictly nearer to `p` than both neighbouring codes (same sign)."""
    for nb in (code - 1, code + 1):
        if nb < 0 or nb >> (8 * size) or (nb ^ code) >> (8 * size - 1):
            continue
        z = decode_element(dtype, nb.to_bytes(size, "little"))
        if math.isfinite(z) and not abs(Fraction(y) - Fraction(p)) < abs(Fraction(z) - Fraction(p)):
            return False
    return True


def verify_derivative(src: Source, dst: Source) -> dict:
    """Check DST against SRC; raises HubpadError naming the first mismatch."""
    dst_files = dst.files()
    if MANIFEST not in dst_files:
        raise HubpadError(f"{dst.label}: no {MANIFEST}; not a hubpad derivative")
    manifest = parse_manifest(dst.read_file(MANIFEST), dst.label)
    tp = int(manifest.get("tp", 0))
    plan = make_plan(src, tp)
    config = read_json(dst, "config.json")
    plan.adapter.check_tp(plan.adapter.dims_config(config), tp)  # DST's own dims serve at its TP (DeepSeek-V4 groups)
    plan.adapter.check_derivative(plan.adapter.dims_config(config), tp)  # (Cohere: heads vLLM divides unchecked)
    if config != plan.new_config:
        diff = sorted(k for k in set(config) | set(plan.new_config) if config.get(k) != plan.new_config.get(k))
        raise HubpadError(f"{dst.label}/config.json differs from the plan at: {', '.join(diff)}")
    bad = [r for r in plan.rank_table if r.get("required", True) and not r["ok"]]
    if bad:
        raise HubpadError(f"{dst.label}: {bad[0]['dim']} fails at tp={tp} ({bad[0]['rule']})")
    for path, padded in plan.folder_configs.items():
        if read_json(dst, path) != padded:
            raise HubpadError(f"{dst.label}/{path} differs from the plan")
    planned = {t.name: t for t in plan.tensors}
    dst_tensors = {}
    for where, index, weight_map in _indexes(plan, dst):
        if set(weight_map) != set(planned) if not plan.folders else not set(weight_map) <= set(planned):
            extra = sorted(set(weight_map) ^ set(planned) if not plan.folders else set(weight_map) - set(planned))
            raise HubpadError(f"{dst.label}/{where}: tensor set differs from upstream (e.g. {extra[0]!r})")
        total = 0
        for name in sorted(set(weight_map.values())):
            if name not in dst_files:
                raise HubpadError(f"{dst.label}: index names missing shard {name}")
            for info in read_header(dst, dst_files[name]).tensors:
                t = planned.get(info.name)
                if t is None or weight_map.get(info.name) != name or info.name in dst_tensors:
                    raise HubpadError(f"{dst.label}/{name}: unexpected tensor {info.name!r}")
                if (info.dtype, info.shape) != (t.dtype, t.shape):
                    raise HubpadError(f"tensor {info.name}: {info.dtype}{list(info.shape)} in DST, plan says "
                                      f"{t.dtype}{list(t.shape)}")
                dst_tensors[info.name] = info
                total += info.nbytes
        if index is not None and index.get("metadata", {}).get("total_size") != total:
            raise HubpadError(f"{dst.label}/{where}: total_size {index.get('metadata', {}).get('total_size')} "
                              f"!= {total}")
    if set(dst_tensors) != set(planned):
        missing = sorted(set(planned) - set(dst_tensors))
        raise HubpadError(f"{dst.label}: tensor set differs from upstream (e.g. {missing[0]!r})")
    shard_names = sorted({info.file for info in dst_tensors.values()})
    for folder in plan.folders:  # a reader that lists a folder's *.safetensors (vLLM does) would load any other one
        stray = [f for f in dst_files if folder_of(f) == folder.path and f.endswith(".safetensors")
                 and f not in shard_names]
        if stray:
            raise HubpadError(f"{dst.label}/{stray[0]}: a weight file the plan does not make")
    _check_copied_files(plan.copied_files, src, dst)

    src_files = src.files()
    src_cur: dict[str, VerifiedReader] = {}
    dst_cur: dict[str, VerifiedReader] = {}
    checked = 0
    for t in sorted(plan.tensors, key=lambda p: (dst_tensors[p.name].file, dst_tensors[p.name].start)):
        d = dst_tensors[t.name]
        sc = src_cur.setdefault(t.src.file, VerifiedReader(src, src_files[t.src.file], rewind=True))
        dc = dst_cur.setdefault(d.file, VerifiedReader(dst, dst_files[d.file], rewind=True))
        checked += _compare(t, sc, dc, d.start, plan.quant)
    report_shards = {}
    recorded = {s["name"]: s["sha256"] for s in manifest.get("shards", [])}
    for name in shard_names:
        digest = dst_cur[name].finish() if name in dst_cur else None
        if recorded.get(name) and digest and digest != recorded[name]:
            raise IntegrityError(f"{dst.label}/{name}: sha256 {digest[:12]}… differs from {MANIFEST} ({recorded[name][:12]}…)")
        report_shards[name] = digest
    return {"ok": True, "tp": tp, "tensors": len(plan.tensors), "padded": sum(t.padded for t in plan.tensors),
            "bytes_checked": checked, "shards": report_shards,
            "dims": [{"name": x.name, "before": x.before, "after": x.after} for x in plan.dims]}


def _indexes(plan: Plan, dst: Source) -> Iterator[tuple[str, dict | None, dict[str, str]]]:
    """(where, its index or None, tensor -> DST shard path) of the root's index, or of each weight folder: its own
    index's map (shard names relative to the folder), else the shards the plan keeps there (their headers say)."""
    if not plan.folders:
        index = read_json(dst, INDEX)
        yield INDEX, index, index.get("weight_map", {})
        return
    for folder in plan.folders:
        if folder.index is not None:
            index = read_json(dst, folder.index)
            yield folder.index, index, {t: f"{folder.path}/{n}" for t, n in index.get("weight_map", {}).items()}
        else:
            yield f"{folder.path}/", None, {t.name: s.name for s in plan.shards if s.name in folder.files
                                            for t in s.tensors}


def _check_copied_files(paths: list[str], src: Source, dst: Source) -> None:
    """The upstream files a derivative carries unchanged (tokenizer, chat template, licence...) are in DST, byte
    for byte: compared by the hashes the sources list where both have one, else by streaming and hashing."""
    src_files, dst_files = src.files(), dst.files()
    for path in paths:
        if path not in dst_files:
            raise HubpadError(f"{dst.label}: {path} from upstream is missing")
        a, b = src_files[path], dst_files[path]
        same_listed = (a.sha256 and a.sha256 == b.sha256) or (a.git_oid and a.git_oid == b.git_oid)
        if a.size != b.size or not (same_listed or _content_sha256(src, a) == _content_sha256(dst, b)):
            raise IntegrityError(f"{dst.label}/{path} differs from upstream's")


def _content_sha256(source: Source, entry) -> str:
    """A file's sha256: listed by the source, or streamed, hashed and checked against what the source lists."""
    return entry.sha256 or VerifiedReader(source, entry).finish()  # finish() reads, hashes and checks it all


def _chunks(total: int, step: int) -> Iterator[tuple[int, int]]:
    pos = 0
    while pos < total:
        yield pos, min(step, total - pos)
        pos += step


def _compare(t: TensorPlan, sc: VerifiedReader, dc: VerifiedReader, dst_start: int, qcfg: QuantConfig) -> int:
    op, src = t.op, t.src

    def same(a: bytes, b: bytes, what: str) -> None:
        if a != b:
            i = next(k for k in range(min(len(a), len(b))) if a[k] != b[k]) if len(a) == len(b) else -1
            raise IntegrityError(f"tensor {t.name}: {what} differs from upstream (first differing byte {i})")

    step = 8 * 1024 * 1024
    if op.kind in ("copy", "append", "replace"):
        if op.kind != "replace":
            for off, n in _chunks(src.nbytes, step):
                same(dc.read(dst_start + off, n), sc.read(src.start + off, n), "data")
        if op.kind == "append":
            same(dc.read(dst_start + src.nbytes, len(op.data)), op.data, "appended g_idx")
        if op.kind == "replace":
            sc.read(src.start, src.nbytes)
            same(dc.read(dst_start, len(op.data)), op.data, "rewritten weight_shape")
        return src.nbytes
    s_pos, d_pos = src.start, dst_start
    for part in op.parts if op.kind == "sections" else (op,):
        _compare_padded(t, part, sc, dc, s_pos, d_pos, qcfg, same)
        s_pos, d_pos = s_pos + part.in_bytes, d_pos + part.out_bytes
    return src.nbytes


def _compare_padded(t: TensorPlan, op, sc: VerifiedReader, dc: VerifiedReader, s_start: int, d_start: int,
                    qcfg: QuantConfig, same) -> None:
    """One "pad" op: each block's original rows in place (widened rows: the original bytes, then pad), then zero
    (or finite-scale) fill rows."""
    step = 8 * 1024 * 1024
    block_in = op.rows * op.row_bytes
    block_out = op.new_rows * op.new_row_bytes
    for b in range(op.batch):
        s0, d0 = s_start + b * block_in, d_start + b * block_out
        if op.scale is not None:  # a scaled copy: each element the nearest value to the original's × scale
            for off, n in _chunks(block_in, step):
                check_scaled(t, sc.read(s0 + off, n), dc.read(d0 + off, n), op.scale)
        elif op.new_row_bytes == op.row_bytes:
            for off, n in _chunks(block_in, step):
                same(dc.read(d0 + off, n), sc.read(s0 + off, n), f"block {b}")
        else:
            rows_per = max(1, step // op.new_row_bytes)
            for r0, k in _chunks(op.rows, rows_per):
                got = dc.read(d0 + r0 * op.new_row_bytes, k * op.new_row_bytes)
                want = sc.read(s0 + r0 * op.row_bytes, k * op.row_bytes)
                rb, nrb = op.row_bytes, op.new_row_bytes
                for i in range(k):
                    if got[i * nrb:i * nrb + rb] != want[i * rb:(i + 1) * rb]:
                        raise IntegrityError(f"tensor {t.name}: row {r0 + i} of block {b} differs from upstream")
                    check_pad_region(t, got[i * nrb + rb:(i + 1) * nrb], qcfg)
        extra = (op.new_rows - op.rows) * op.new_row_bytes
        for off, n in _chunks(extra, step):
            check_pad_region(t, dc.read(d0 + op.rows * op.new_row_bytes + off, n), qcfg)

