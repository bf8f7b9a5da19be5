"""The dev chain's state file (payments/chain/dev_state_file.py): written whole, appended
to, read back; a last record cut short is dropped, damage anywhere else refuses the file;
an append the disk refuses leaves the file as it was."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from payments.chain.dev_state_file import (
    MAGIC,
    StateFileError,
    StateHeader,
    StateJournal,
    read_state,
    write_state,
)

REPO = Path(__file__).resolve().parents[2]
HEADER = StateHeader(chain_id=1, genesis="0x" + "11" * 32, token="0xT", spender="0xS",
                     contracts="c" * 64, py_evm="1", eth_tester="2")


def kept(tmp_path: Path) -> Path:
    path = tmp_path / "chain-state"
    write_state(path, HEADER, {b"a": b"1", b"b": b"2"})
    journal = StateJournal(path)
    journal.append({b"b": None, b"c": b"3"})
    journal.append({b"a": b"4", b"\x00" * 32: b"\xff" * 600})
    return path


def test_written_and_appended_records_read_back_in_order(tmp_path: Path) -> None:
    state = read_state(kept(tmp_path))
    assert state.header == HEADER
    assert state.pairs == {b"a": b"4", b"c": b"3", b"\x00" * 32: b"\xff" * 600}
    assert not state.dropped_tail
    assert not (tmp_path / "chain-state.tmp").exists()


@pytest.mark.parametrize("cut", [1, 5, 9, 20])
def test_a_last_record_cut_short_is_dropped(tmp_path: Path, cut: int) -> None:
    path = kept(tmp_path)
    whole = path.read_bytes()
    StateJournal(path).append({b"d": b"5" * 40})
    path.write_bytes(path.read_bytes()[:len(whole) + cut])
    state = read_state(path)
    assert state.dropped_tail
    assert b"d" not in state.pairs and state.pairs[b"a"] == b"4"


def test_a_last_record_whose_bytes_are_wrong_is_dropped(tmp_path: Path) -> None:
    """Its length on disk, its payload not (zeros where the write never landed)."""
    path = kept(tmp_path)
    data = bytearray(path.read_bytes())
    data[-10:] = bytes(10)
    path.write_bytes(bytes(data))
    state = read_state(path)
    assert state.dropped_tail and state.pairs[b"a"] == b"1"


def test_damage_before_the_last_record_refuses_the_file(tmp_path: Path) -> None:
    path = kept(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(MAGIC) + 12] ^= 0x01  # inside the header's payload
    path.write_bytes(bytes(data))
    with pytest.raises(StateFileError, match="a record at byte 16 is damaged"):
        read_state(path)


@pytest.mark.parametrize(("content", "reason"), [
    (b"", "not a chain state file"),
    (b"SQLite format 3\x00", "not a chain state file"),
    (MAGIC + b"\x00\x02", "format version 2; this code reads 1"),
    (MAGIC + b"\x00\x01", "no header"),
])
def test_what_is_not_a_state_file_is_refused(tmp_path: Path, content: bytes,
                                             reason: str) -> None:
    path = tmp_path / "chain-state"
    path.write_bytes(content)
    with pytest.raises(StateFileError, match=reason):
        read_state(path)


def test_an_append_the_disk_refuses_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    """A file size limit (RLIMIT_FSIZE) refuses the write part way, as a full disk would;
    the next append must not land behind a half record, which would damage the file."""
    path = kept(tmp_path)
    before = path.read_bytes()
    script = textwrap.dedent(f"""
        import resource, signal
        from pathlib import Path
        from payments.chain.dev_state_file import StateJournal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        path = Path({str(path)!r})
        resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + 100, -1))
        try:
            StateJournal(path).append({{b"big": b"x" * 5000}})
        except OSError as exc:
            print("refused", exc.errno)
        StateJournal(path).append({{b"e": b"6"}})
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.startswith("refused")
    state = read_state(path)
    assert path.read_bytes().startswith(before)
    assert not state.dropped_tail
    assert b"big" not in state.pairs and state.pairs[b"e"] == b"6"
