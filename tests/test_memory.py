"""Freed heap pages go back to the system before each batch of rollouts (slca.rollout.memory)."""

from __future__ import annotations

import ctypes.util
import platform

import pytest

from slca.rollout.memory import release_freed_memory, resident_bytes

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
