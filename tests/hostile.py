"""Hand-made hostile inputs for tests: zip archives whose members' headers lie (declared size, CRC), with
duplicate and odd names, decompression bombs made in milliseconds (a bzip2 stream of N identical blocks
of zeros), and a YAML alias bomb beside a minimal SWE-agent 0.x trajectory."""

from __future__ import annotations

import bz2
import json
import lzma
import struct
import zlib
from pathlib import Path

STORED, DEFLATED, BZIP2, LZMA = 0, 8, 12, 14
_BZ_BLOCK_ZEROS = 45_000_000  # zeros that fill one bzip2 block at level 9 (after its run-length step)


def _bzip2_block() -> tuple[int, int, int]:
    """(bits, length in bits, CRC) of the one compressed block of ``_BZ_BLOCK_ZEROS`` zeros."""
    stream = bz2.compress(bytes(_BZ_BLOCK_ZEROS), 9)
    total = len(stream) * 8
    value = int.from_bytes(stream, "big")
    crc = (value >> (total - 32 - 48 - 32)) & 0xFFFFFFFF  # right after the header and the block magic
    for pad in range(8):  # the end-of-stream marker and combined CRC, then 0-7 bits of padding
        end = total - pad - 80
        if (value >> (total - end - 48)) & ((1 << 48) - 1) == 0x177245385090:
            length = end - 32
            return (value >> (total - end)) & ((1 << length) - 1), length, crc
    raise AssertionError("no end-of-stream marker found")


def bzip2_zeros(blocks: int) -> bytes:
    """One bzip2 stream that decompresses to ``blocks`` x 45,000,000 zero bytes, a few hundred bytes long:
    the same block repeated (bit-aligned) and the combined CRC recomputed."""
    block, length, crc = _bzip2_block()
    value, bits, combined = int.from_bytes(b"BZh9", "big"), 32, 0
    for _ in range(blocks):
        value, bits = (value << length) | block, bits + length
        combined = (((combined << 1) | (combined >> 31)) & 0xFFFFFFFF) ^ crc
    value, bits = (value << 80) | (0x177245385090 << 32) | combined, bits + 80
    pad = -bits % 8
    return (value << pad).to_bytes((bits + pad) // 8, "big")


def _lzma() -> tuple[bytes, lzma.LZMACompressor]:
    """The header of a zip LZMA member (LZMA SDK version, properties) and a raw LZMA1 compressor."""
    props = lzma._encode_filter_properties({"id": lzma.FILTER_LZMA1, "preset": 0})
    filters = [lzma._decode_filter_properties(lzma.FILTER_LZMA1, props)]
    head = struct.pack("<BBH", 9, 4, len(props)) + props
    return head, lzma.LZMACompressor(lzma.FORMAT_RAW, filters=filters)


def lzma_zeros(n: int) -> bytes:
    """A zip LZMA member's data for ``n`` zeros (LZMA1 tops out near 7,000:1, so this takes a while)."""
    head, c = _lzma()
    chunk = bytes(1 << 24)
    out = [head]
    for _ in range(n // len(chunk)):
        out.append(c.compress(chunk))
    out += [c.compress(bytes(n % len(chunk))), c.flush()]
    return b"".join(out)


def compress(data: bytes, method: int) -> bytes:
    if method == STORED:
        return data
    if method == DEFLATED:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    if method == BZIP2:
        return bz2.compress(data)
    head, c = _lzma()
    return head + c.compress(data) + c.flush()


def member(name: str, data: bytes, method: int = DEFLATED, **lies) -> dict:
    """A member from its real content; ``size=``, ``crc=`` or ``payload=`` (compressed bytes) override."""
    return {
        "name": name,
        "payload": lies.get("payload", compress(data, method)),
        "method": method,
        "size": lies.get("size", len(data)),
        "crc": lies.get("crc", zlib.crc32(data)),
    }


def zip_bytes(members: list[dict]) -> bytes:
    """A zip of exactly these members, in order, headers as given (duplicates and odd names kept)."""
    out, central = bytearray(), bytearray()
    for m in members:
        name = m["name"].encode()
        flags = 0x02 if m["method"] == LZMA else 0  # zip LZMA with an end-of-stream marker
        version = {STORED: 10, DEFLATED: 20, BZIP2: 46, LZMA: 63}.get(m["method"], 20)
        offset = len(out)
        fields = (version, flags, m["method"], 0, 0x21, m["crc"], len(m["payload"]), m["size"], len(name))
        out += struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", version, 0, *fields[1:], 0) + name + m["payload"]
        central += (
            struct.pack(
                "<4s4B4HL2L5H2L",
                b"PK\x01\x02",
                version,
                3,
                version,
                0,
                flags,
                m["method"],
                0,
                0x21,
                m["crc"],
                len(m["payload"]),
                m["size"],
                len(name),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
            + name
        )
    cd_offset = len(out)
    out += central
    n = len(members)
    out += struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n, n, len(central), cd_offset, 0)
    return bytes(out)


def inspect_eval_members() -> tuple[dict, dict]:
    """The header and one sample member of a minimal Inspect ``.eval`` (one model call with usage)."""
    user = {"id": "u1", "role": "user", "content": "List the files."}
    reply = {"id": "a1", "role": "assistant", "content": "Two files."}
    event = {
        "event": "model",
        "timestamp": "2025-05-12T20:27:38-04:00",
        "input": [user],
        "output": {"choices": [{"message": reply}], "usage": {"input_tokens": 50, "output_tokens": 5}},
    }
    header = {"version": 2, "status": "success", "eval": {"task": "demo", "model": "openai/gpt-4o-mini"}}
    sample = {"id": "s", "epoch": 1, "messages": [user, reply], "events": [event]}
    return (
        member("header.json", json.dumps(header).encode()),
        member("samples/s_epoch_1.json", json.dumps(sample).encode()),
    )


def swe_agent_0x(folder: Path) -> Path:
    """A minimal SWE-agent 0.x trajectory (environment first, history and trajectory, model stats)."""
    folder.mkdir()
    traj = {
        "environment": "swe_main",
        "trajectory": [{"action": "ls\n", "observation": "a.py\n", "response": "ls", "thought": "Look."}],
        "history": [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "assistant", "content": "Look.\n```\nls\n```", "action": "ls\n"},
            {"role": "user", "content": "a.py\n"},
        ],
        "info": {"model_stats": {"tokens_sent": 100, "tokens_received": 10, "api_calls": 1}},
    }
    path = folder / "run.traj"
    path.write_text(json.dumps(traj))
    return path


def alias_bomb() -> str:
    """About 450 bytes that stand for 10^10 nodes, the last level where the recorded policy is read."""
    lines = ["a: &a [x,x,x,x,x,x,x,x,x,x]"]
    for p, q in zip("bcdefghij", "abcdefghi", strict=True):
        lines.append(f"{p}: &{p} [" + ",".join([f"*{q}"] * 10) + "]")
    lines.append("agent: {config: {history_processors: [{type: x, n: *j}]}, model: {model_name: gpt4}}")
    return "\n".join(lines) + "\n"
