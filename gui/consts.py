"""RocketMQ constants the GUI labels things with (mirrors of engine values, kept here so
views need not reach into engine internals)."""
from __future__ import annotations

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
MESSAGE_MAGIC_V1 = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_V2 = -626843477  # 0xDAA320AB
COMPRESSION_NAMES = {0: "zlib", 1: "lz4", 2: "zstd", 3: "zlib"}


def sys_flag_text(sys_flag: int) -> str:
    """The bits of SYSFLAG spelled out."""
    parts = []
    if sys_flag & COMPRESSED_FLAG:
        parts.append(f"compressed ({COMPRESSION_NAMES.get((sys_flag >> 8) & 0x7, '?')})")
    if sys_flag & MULTI_TAGS_FLAG:
        parts.append("multi tags")
    tx = {0x0: "NOT_TYPE", 0x4: "PREPARED", 0x8: "COMMIT", 0xC: "ROLLBACK"}[sys_flag & 0x0C]
    parts.append(f"tx {tx}")
    parts.append("born host IPv6" if sys_flag & BORNHOST_V6_FLAG else "born host IPv4")
    parts.append("store host IPv6" if sys_flag & STOREHOST_V6_FLAG else "store host IPv4")
    return ", ".join(parts)


def magic_text(magic: int) -> str:
    if magic == MESSAGE_MAGIC_V1:
        return "V1 (0xDAA320A7)"
    if magic == MESSAGE_MAGIC_V2:
        return "V2 (0xDAA320AB)"
    return f"0x{magic & 0xFFFFFFFF:08X}"
