from sim.cost.tokens import (
    MESSAGE_OVERHEAD_BYTES,
    derive_sizes,
    estimate_tokens,
    isotonic_l1,
    scale_tokens,
    seed_estimate,
    split_proportional,
)


def test_seed_estimate_is_ceil_bytes_over_4():
    assert [seed_estimate(b) for b in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_split_proportional_largest_remainder():
    assert split_proportional(10, [1, 1, 1]) == [4, 3, 3]  # tie: earlier item gets the extra
    assert split_proportional(7, [1, 2, 4]) == [1, 2, 4]
    assert split_proportional(0, [5, 5]) == [0, 0]
    assert split_proportional(5, [0, 0]) == [3, 2]  # no weight: equal shares
    assert sum(split_proportional(1001, [3, 17, 5, 0])) == 1001


def test_isotonic_l1_pools_dips():
    assert isotonic_l1([1, 2, 3]) == [1, 2, 3]
    assert isotonic_l1([100, 200, 150, 300]) == [100, 150, 150, 300]  # lower median of (200, 150)
    assert isotonic_l1([5, 1, 1, 9]) == [1, 1, 1, 9]
    assert isotonic_l1([-3, 4]) == [0, 4]


def test_isotonic_l1_is_optimal_on_small_cases():
    # brute force over non-decreasing sequences with values drawn from the data
    import itertools

    for data in ([3, 1, 2], [4, 4, 1, 5], [2, 9, 1, 8, 3]):
        best = min(
            sum(abs(a - b) for a, b in zip(data, cand, strict=True))
            for cand in itertools.product(sorted(set(data)), repeat=len(data))
            if all(x <= y for x, y in zip(cand, cand[1:], strict=False))
        )
        fit = isotonic_l1(data)
        assert sum(abs(a - b) for a, b in zip(data, fit, strict=True)) == best


def test_derive_sizes_exact_on_append_only_history():
    # events: 0 sys, 1 task | call0 | 2 asst, 3 obs | call1 | 4 asst, 5 obs | call2 | 6 asst (never seen)
    b = [84, 16, 16, 48, 16, 0, 44]
    sizes, prov, resid, bpt = derive_sizes(b, [2, 4, 6], [100, 160, 150])
    # call2 dips below call1: the fit pools them at the lower median 150; their events share the step
    # 150 - 100 = 50 by weights (bytes + 16): 32, 64, 32, 16 -> 11.1, 22.2, 11.1, 5.6 -> 11, 22, 11, 6
    assert sizes[:2] == [76, 24]  # 100 split by weights 100:32
    assert sizes[2:6] == [11, 22, 11, 6]
    assert prov == ["derived"] * 6 + ["estimate"]
    assert resid == [0, 160 - 133, 0]  # the pooled step is shared, so call1 keeps 27 as residual
    assert bpt == round((sum(b[:6]) + 6 * MESSAGE_OVERHEAD_BYTES) / 150, 4)
    assert sizes[6] == estimate_tokens(44, bpt)


def test_scale_tokens_keeps_content_ratio():
    assert scale_tokens(1000, 4000 - MESSAGE_OVERHEAD_BYTES, 400 - MESSAGE_OVERHEAD_BYTES) == 100


def test_json_sizes_are_json_dumps_on_recorded_and_awkward_texts(mini_traces):
    """json_bytes and json_units call json's string encoder directly (what json.dumps(text,
    ensure_ascii=False) returns): the same sizes on every recorded text and on escapes, controls,
    non-ASCII and astral characters."""
    import json

    from sim.cost.tokens import json_bytes
    from sim.policies.seed_messages import RESULT_CLIP, json_units, units

    texts = [e.content for t in mini_traces for e in t.events if e.content is not None]
    texts += ['a"b\\c', "tab\there\nnew\r\x00\x1f\x7f", "héllo wörld", "emoji 😀 \u2028 \u2029", ""]
    assert len(texts) > 1000 and any(not s.isascii() for s in texts)
    for s in texts:
        assert json_bytes(s) == len(json.dumps(s, ensure_ascii=False).encode())
        want = units(json.dumps(s[: RESULT_CLIP + 1], ensure_ascii=False))
        assert json_units(s, len(s), len(s.encode()), 0) == want
