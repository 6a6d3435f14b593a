import pytest

from backend.curation.budget import Budget, BudgetError, budget_to_count


def test_count_within_the_pool():
    assert budget_to_count(1000, count=100) == Budget(n=100, requested=100, clamped=False, warning=None)


def test_fraction_floors_but_keeps_at_least_one():
    assert budget_to_count(1319, fraction=0.1).n == 131
    assert budget_to_count(100, fraction=0.29).n == 29  # 0.29 * 100 is 28.999999999999996 in floats
    assert budget_to_count(5, fraction=0.1).n == 1
    assert budget_to_count(7, fraction=1).n == 7
    assert budget_to_count(0, fraction=0.5).n == 0


def test_money_divides_without_float_error():
    assert budget_to_count(100, money=0.3, cost_per_prompt=0.1).n == 3
    assert budget_to_count(100, money=10, cost_per_prompt=3).n == 3
    assert budget_to_count(10_000, money=12.5, cost_per_prompt=0.05).n == 250


def test_request_larger_than_the_pool_is_clamped_with_a_warning():
    budget = budget_to_count(50, count=80)
    assert (budget.n, budget.requested, budget.clamped) == (50, 80, True)
    assert "80" in budget.warning and "50" in budget.warning and "clamped" in budget.warning
    money = budget_to_count(10, money=5, cost_per_prompt=0.25)
    assert (money.n, money.requested, money.clamped) == (10, 20, True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"count": 5, "fraction": 0.1},
        {"count": 5, "money": 3.0, "cost_per_prompt": 1.0},
    ],
)
def test_exactly_one_budget_kind(kwargs):
    with pytest.raises(BudgetError, match="exactly one of count, fraction or money"):
        budget_to_count(100, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"count": -1}, "at least 1"),
        ({"count": 0}, "at least 1"),
        ({"count": 2.5}, "whole number"),
        ({"fraction": 0.0}, r"\(0, 1\]"),
        ({"fraction": 1.5}, r"\(0, 1\]"),
        ({"fraction": float("nan")}, "finite"),
        ({"money": 10.0}, "cost_per_prompt"),
        ({"money": 10.0, "cost_per_prompt": 0.0}, "more than 0"),
        ({"money": -1.0, "cost_per_prompt": 1.0}, "more than 0"),
        ({"money": 0.05, "cost_per_prompt": 0.1}, "buys no prompt"),
        ({"count": 5, "cost_per_prompt": 1.0}, "only applies to a money budget"),
    ],
)
def test_invalid_budgets_say_what_to_fix(kwargs, message):
    with pytest.raises(BudgetError, match=message):
        budget_to_count(100, **kwargs)


def test_budget_error_is_a_value_error_and_pool_size_is_checked():
    assert issubclass(BudgetError, ValueError)
    with pytest.raises(BudgetError, match="pool size"):
        budget_to_count(-1, count=1)
