"""EvictionSchedule: the one place budget/buffer/window are checked; when a row compresses, to how many
columns, and the memory bound in bytes, from hand-computed cases."""

import pytest
import torch

from kvrescue_eval.eviction import AdaKV, CacheView, EvictionSchedule, PyramidKV, SnapKV


@pytest.mark.parametrize("change, error, message", [
    (dict(budget=8, window=8), ValueError, r"budget must be larger than window, got budget=8 <= window=8"),
    (dict(window=0), ValueError, r"window must be >= 1"),
    (dict(buffer=0), ValueError, r"buffer must be >= 1 \(slots added between compressions; default 128\), got 0"),
    (dict(budget=16.0), TypeError, r"budget must be an int, got 16.0"),
    (dict(buffer=True), TypeError, r"buffer must be an int, got True"),
    (dict(compress_prompt="yes"), TypeError, r"compress_prompt must be True or False, got 'yes'"),
    (dict(evictor="lru"), ValueError, r"unknown eviction method 'lru'; valid methods: adakv, "),
    (dict(evictor=object()), TypeError, r"has neither score\(view\) nor select\(view, budget\)"),
])
def test_bad_settings_are_named(change, error, message):
    with pytest.raises(error, match=message):
        EvictionSchedule(**(dict(evictor="rkv", budget=16) | change))


def test_uniform_schedule_compresses_at_budget_plus_buffer_and_prompts_over_the_budget():
    schedule = EvictionSchedule("rkv", 64, buffer=128, window=8)
    assert schedule.slots() == 192 and schedule.layer_budget(3, 24) == 64
    assert not schedule.compresses(191, 150) and schedule.compresses(192, 191)
    assert schedule.compresses(65, 0) and not schedule.compresses(64, 0)      # a first chunk over the budget
    assert not EvictionSchedule("rkv", 64, compress_prompt=False).compresses(100, 0)
    assert schedule.kept_width(192) == 64 and schedule.kept_width(40) == 40


def test_equal_schedules_evict_alike():
    assert EvictionSchedule(SnapKV(), 64) == EvictionSchedule(SnapKV(), 64)
    assert EvictionSchedule(SnapKV(), 64) != EvictionSchedule(SnapKV(pool_kernel=5), 64)
    assert len({EvictionSchedule(SnapKV(), 64), EvictionSchedule("snapkv", 64)}) == 1


def test_pyramid_layer_budgets_and_slots():
    # budget 64, window 8: k = 56, min = 56 // 20 = 2, max = 112 - 2 = 110, step = 108 // 23 = 4.
    schedule = EvictionSchedule(PyramidKV(), 64, buffer=16, window=8)
    budgets = [schedule.layer_budget(layer, 24) for layer in range(24)]
    assert budgets == [110 - 4 * layer + 8 for layer in range(24)]
    assert budgets[0] == 118 and budgets[-1] == 26
    assert schedule.slots(23, 24) == 26 + 16 and schedule.compresses(27, 0, 23, 24)
    assert schedule.layer_budget(0, 1) == 64   # one layer: nothing to allocate


def test_memory_bound_in_bytes():
    # 2 KV heads, key/value dim 4, float16: 2 * (4 + 4) * 2 = 32 bytes per slot, + 5 bookkeeping = 37.
    uniform = EvictionSchedule("rkv", 16, buffer=8, window=4)
    assert uniform.kv_bytes(num_layers=3, kv_heads=2, key_dim=4, value_dim=4, itemsize=2,
                            extra_per_slot=5) == 37 * 24 * 3
    # H2O keeps a float32 state per slot and head: + 8 bytes per slot.
    assert EvictionSchedule("h2o", 16, buffer=8, window=4).kv_bytes(
        num_layers=3, kv_heads=2, key_dim=4, value_dim=4, itemsize=2) == 40 * 24 * 3
    # AdaKV: a head keeps up to window + 2 k = 4 + 24 slots, + buffer 8.
    ada = EvictionSchedule(AdaKV(head_cap=2.0), 16, buffer=8, window=4)
    assert ada.slots() == 36 and ada.kv_bytes(num_layers=1, kv_heads=2, key_dim=4, value_dim=4, itemsize=2) == 32 * 36
    # PyramidKV, 2 layers, budget 16, window 4: k = 12, min 0, max 24, step 24: layers keep 28 and 4.
    pyramid = EvictionSchedule(PyramidKV(), 16, buffer=8, window=4)
    assert pyramid.kv_bytes(num_layers=2, kv_heads=2, key_dim=4, value_dim=4, itemsize=2) == 32 * (36 + 12)


def test_kept_width_of_per_head_budgets():
    ada = EvictionSchedule(AdaKV(head_cap=1.5), 16, buffer=8, window=4)   # head width 4 + 18 = 22
    assert ada.kept_width(30) == 22 and ada.kept_width(20) == 20 and ada.kept_width(16) == 16


def test_a_selection_of_the_wrong_width_is_reported():
    class Wide:
        def select(self, view, budget):
            from kvrescue_eval.eviction import Kept
            return Kept(torch.arange(view.length).expand(*view.keys.shape[:2], -1))

    schedule = EvictionSchedule(Wide(), 8, window=2)
    with pytest.raises(RuntimeError, match=r"Wide kept \(1, 1, 20\); expected \(batch, kv_heads, 8\) for L=20"):
        schedule.select(CacheView(torch.zeros(1, 1, 2, 4), torch.randn(1, 1, 20, 4), 2))


def test_a_stateful_evictor_needs_the_state():
    with pytest.raises(ValueError, match="H2O keeps per-slot state"):
        EvictionSchedule("h2o", 8, window=2).select(CacheView(torch.zeros(1, 1, 2, 4), torch.randn(1, 1, 20, 4), 2))
