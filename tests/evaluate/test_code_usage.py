"""DiscoDVT's code usage summary: codes used, perplexity of the usage, the top code."""

from __future__ import annotations

from collections import Counter

import pytest

from eric.evaluate.code_usage import code_summary


def test_code_summary_by_hand():
    summary = code_summary(Counter({1: 3, 2: 1}), num_codes=8)
    # entropy of (3/4, 1/4) = 0.5623 nats: perplexity exp(0.5623) = 1.75
    assert summary == {"codes_used": 2, "num_codes": 8, "code_spans": 4, "code_perplexity": pytest.approx(1.75),
                       "top_code": {"code": 1, "share": 0.75}}
    assert code_summary(Counter(), num_codes=8)["top_code"] is None
