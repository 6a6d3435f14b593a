import numpy as np
import pytest

from backend.curation.histogram import histogram, summary


def test_histogram_bins_over_zero_to_one_with_one_in_the_last_bin():
    values = np.array([0.0, 0.05, 0.1, 0.55, 1.0, np.nan, 1.0000000000000002])
    result = histogram(values, bins=10)
    assert result["edges"] == pytest.approx([i / 10 for i in range(11)])
    assert result["counts"] == [2, 1, 0, 0, 0, 1, 0, 0, 0, 2]


def test_histogram_of_nothing_and_bad_bins():
    assert histogram(np.array([np.nan]), bins=4)["counts"] == [0, 0, 0, 0]
    with pytest.raises(ValueError):
        histogram(np.array([0.5]), bins=0)


def test_summary_excludes_unprobed_prompts():
    result = summary(np.array([0.0, 0.0, 0.5, 1.0, np.nan]))
    assert result == {"mean": 0.375, "share_at_0": 0.5, "share_at_1": 0.25, "count": 4}
    assert summary(np.array([np.nan])) == {"mean": None, "share_at_0": None, "share_at_1": None, "count": 0}
