"""dk.search's in-memory choices live in devicekit.lru.LRU like every other memo (issue 35): bounded, the oldest
evicted first, and an evicted choice read back from the compile cache (where every choice is also stored)."""

from __future__ import annotations

import devicekit as dk
from devicekit import tile_search as search
from devicekit.lru import LRU


def test_the_choice_memo_is_the_shared_bounded_lru():
    assert type(search._CHOSEN) is LRU, "dk.search keeps its choices in its own memo instead of devicekit.lru"
    assert search._CHOSEN.size == search.CHOSEN_MEMO_SIZE


def test_choices_past_the_bound_are_evicted_oldest_first_and_read_back_from_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(search, "_CHOSEN", LRU(3))
    cpu = dk.device("CPU")
    keys = [search._key(type("K", (), {"key": bytes([i])})(), cpu, cpu.compiler, [24]) for i in range(5)]
    for i, key in enumerate(keys):
        search._remember(key, cpu.compiler, [search.ROWS[i], 4])
    assert len(search._CHOSEN) == 3
    assert [k in search._CHOSEN for k in keys] == [False, False, True, True, True]
    assert search._recall(keys[0], cpu.compiler) == [search.ROWS[0], 4]  # from the compile cache, kept again
    assert keys[0] in search._CHOSEN and keys[2] not in search._CHOSEN  # it evicted the oldest
