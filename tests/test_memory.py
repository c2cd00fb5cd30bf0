"""Freed heap pages go back to the system before each batch of rollouts (slca.rollout.memory)."""

from __future__ import annotations

import ctypes.util
import platform

import pytest

from slca.rollout.memory import peak_resident_bytes, release_freed_memory, reset_peak_resident, resident_bytes

MB = 2**20


@pytest.mark.skipif(
    platform.system() != "Linux" or "glibc" not in " ".join(platform.libc_ver()),
    reason="malloc_trim is glibc's",
)
def test_freed_heap_blocks_are_given_back_to_the_system():
    assert ctypes.util.find_library("c")
    # 64 KB blocks (under malloc's mmap threshold: they live in the heap), a block kept after them so the
    # heap's top cannot shrink on its own: what a training step's tensors of varying shapes leave behind
    blocks = [bytearray(64 * 1024) for _ in range(4000)]  # ~256 MB, every page touched
    keep = bytearray(64 * 1024)
    held = resident_bytes()
    del blocks
    freed = resident_bytes()
    assert held - freed < 64 * MB  # freed, but still resident: the heap does not give it back by itself
    assert release_freed_memory() is True
    assert freed - resident_bytes() > 200 * MB
    assert keep  # alive until here


def test_resident_bytes_reads_this_process():
    assert resident_bytes() > 10 * MB


@pytest.mark.skipif(platform.system() != "Linux", reason="VmHWM and clear_refs are Linux's")
def test_the_peak_covers_what_was_freed_since_and_a_reset_starts_it_again():
    assert reset_peak_resident() is True
    base = peak_resident_bytes()
    block = bytearray(300 * MB)
    block[::4096] = b"\1" * len(range(0, 300 * MB, 4096))  # every page touched
    del block
    release_freed_memory()
    assert peak_resident_bytes() - base > 250 * MB  # the block is gone, its peak is not
    assert resident_bytes() < peak_resident_bytes() - 250 * MB
    assert reset_peak_resident() is True
    assert peak_resident_bytes() < base + 100 * MB  # a new high-water mark: today's size, not the old peak
