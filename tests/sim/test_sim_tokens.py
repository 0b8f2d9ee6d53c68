"""The simulator's token approximation (streams/sim/tokens.py): 1 CJK character ≈ 1 token, 1 word ≈ 1.3."""

from __future__ import annotations

from streams.sim.tokens import approx_tokens, cjk_share, cut, unit_spans


def test_counts_per_script() -> None:
    assert approx_tokens("床前明月光，疑是地上霜。") == 10
    assert approx_tokens("吾輩は猫である。") == 7
    assert approx_tokens("Die Würde des Menschen ist unantastbar.") == 8  # 6 words x 1.3 = 7.8
    assert approx_tokens("GLM 模型 works") == 2 + 3  # 2 words x 1.3 -> 2.6, + 2 characters
    assert approx_tokens("") == 0 and approx_tokens("!") == 1


def test_cut_at_any_token_boundary() -> None:
    text = "学而时习之，不亦说乎？有朋自远方来，不亦乐乎？"
    frag, tokens, units = cut(text, 2, 7)
    assert frag == "时习之，不亦说乎" and tokens == 7 and units == 7  # punctuation inside, no unit
    latin = "one two three four five six"
    frag, tokens, units = cut(latin, 1, 4)
    assert frag == "two three four five" and units == 4 and abs(tokens - 5.2) < 1e-9  # at least 4 tokens
    assert cut(latin, 6, 4) == ("", 0.0, 0)


def test_units_and_share() -> None:
    assert [e - s for s, e, _ in unit_spans("ab 中文 cd")] == [2, 1, 1, 2]
    assert cjk_share("中文 ab") == 2 / 3 and cjk_share("") == 0.0
