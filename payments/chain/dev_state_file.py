"""The file that keeps ``svc-server dev``'s in-process chain between runs (``var/chain-state``).

py-evm keeps a chain as key-value pairs (its ``MemoryDB``); this file holds those pairs,
nothing about what they mean. Its layout, format version 1:

- ``MAGIC``, then the version (2 bytes, big-endian);
- records, each its payload's length and CRC-32 (4 bytes each, big-endian), then the
  payload. The first record is the header (JSON, :class:`StateHeader`); every other one is
  a batch of changes: entries of an op byte (1 set, 0 delete), the key's length and the key,
  and for a set the value's length and the value.

A new file is written whole, to a temporary file renamed over the old one (:func:`write_state`);
then every mined block appends one record of what it changed (:class:`StateJournal`), flushed
to disk before the block's transactions are reported mined. A record cut short at the end
(the process stopped in the middle of an append) is a block nobody was told about, and is
dropped when the file is read; a bad record anywhere else makes the whole file unreadable.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

MAGIC = b"svc-dev-chain\n"
VERSION = 1
_FRAME = struct.Struct(">II")  # payload length, CRC-32 of the payload
_LENGTH = struct.Struct(">I")
_SET, _DELETE = 1, 0


class StateFileError(Exception):
    """The file is not a state file this code can read; the message says why."""


@dataclass(frozen=True)
class StateHeader:
    """What the pairs are a chain of, checked before they are used."""

    chain_id: int
    genesis: str  # 0x hash of block 0: a new chain has a new one (its timestamp differs)
    token: str
    spender: str
    contracts: str  # sha256 of the artifacts the contracts were deployed from
    py_evm: str  # versions whose storage layout the pairs are in
    eth_tester: str

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, payload: bytes) -> StateHeader:
        try:
            fields = json.loads(payload)
            return cls(**{name: fields[name] for name in cls.__dataclass_fields__})
        except (ValueError, TypeError, KeyError) as exc:
            raise StateFileError(f"its header is not one this version writes ({exc})") from None


@dataclass
class StateFile:
    header: StateHeader
    pairs: dict[bytes, bytes]
    dropped_tail: bool  # a last record was cut short and left out


Changes = Mapping[bytes, bytes | None]  # None: the key was deleted


def encode_changes(changes: Changes | Iterable[tuple[bytes, bytes | None]]) -> bytes:
    items = changes.items() if isinstance(changes, Mapping) else changes
    parts: list[bytes] = []
    for key, value in items:
        if value is None:
            parts += (bytes((_DELETE,)), _LENGTH.pack(len(key)), key)
        else:
            parts += (bytes((_SET,)), _LENGTH.pack(len(key)), key, _LENGTH.pack(len(value)),
                      value)
    return b"".join(parts)


def frame(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def read_state(path: Path) -> StateFile:
    """The header and the pairs, every record applied in order. FileNotFoundError when
    there is no file; StateFileError when it is not one this code reads."""
    data = path.read_bytes()
    start = len(MAGIC) + 2
    if data[:len(MAGIC)] != MAGIC or len(data) < start:
        raise StateFileError("it is not a chain state file")
    (version,) = struct.unpack(">H", data[len(MAGIC):start])
    if version != VERSION:
        raise StateFileError(f"it is in format version {version}; this code reads {VERSION}")
    records, dropped_tail = _records(data, start)
    if not records:
        raise StateFileError("it has no header")
    header = StateHeader.decode(records[0])
    pairs: dict[bytes, bytes] = {}
    for payload in records[1:]:
        _apply(payload, pairs)
    return StateFile(header, pairs, dropped_tail)


def _records(data: bytes, offset: int) -> tuple[list[bytes], bool]:
    records: list[bytes] = []
    view = memoryview(data)
    while offset < len(data):
        end = offset + _FRAME.size
        if end > len(data):
            return records, True  # the frame itself was cut short
        length, crc = _FRAME.unpack_from(data, offset)
        if end + length > len(data):
            return records, True
        payload = bytes(view[end:end + length])
        if zlib.crc32(payload) != crc:
            if end + length == len(data):
                return records, True  # the last record, not wholly on disk
            raise StateFileError(f"a record at byte {offset} is damaged")
        records.append(payload)
        offset = end + length
    return records, False


def _apply(payload: bytes, pairs: dict[bytes, bytes]) -> None:
    offset, size = 0, len(payload)
    try:
        while offset < size:
            op = payload[offset]
            (key_length,) = _LENGTH.unpack_from(payload, offset + 1)
            offset += 1 + _LENGTH.size
            key = payload[offset:offset + key_length]
            offset += key_length
            if op == _DELETE:
                pairs.pop(key, None)
                continue
            if op != _SET:
                raise StateFileError(f"a record holds an unknown operation {op}")
            (value_length,) = _LENGTH.unpack_from(payload, offset)
            offset += _LENGTH.size
            pairs[key] = payload[offset:offset + value_length]
            offset += value_length
    except struct.error:
        raise StateFileError("a record ends inside an entry") from None
    if offset != size:
        raise StateFileError("a record ends inside an entry")


def write_state(path: Path, header: StateHeader, pairs: Mapping[bytes, bytes]) -> None:
    """The whole file anew: written to ``<path>.tmp``, flushed, renamed over ``path``. A
    reader finds the old file or the new one, never a mixture."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("wb") as handle:
        handle.write(MAGIC + struct.pack(">H", VERSION))
        handle.write(frame(header.encode()))
        handle.write(frame(encode_changes(pairs)))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """The rename itself reaches the disk (POSIX); some systems cannot open a directory."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class StateJournal:
    """Appends one record per batch of changes to a file :func:`write_state` made."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, changes: Changes) -> None:
        """On disk when this returns (flushed and fsynced), so a block reported mined
        survives the process and the machine."""
        if not changes:
            return
        record = frame(encode_changes(changes))
        with self.path.open("ab") as handle:
            start = handle.tell()
            try:
                handle.write(record)
                handle.flush()
                os.fsync(handle.fileno())
            except OSError:
                # A part written (a full disk) would put the next record behind damage,
                # which makes the whole file unreadable: cut it back to what it was.
                with contextlib.suppress(OSError):
                    handle.truncate(start)
                raise
