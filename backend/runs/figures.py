"""The run page's curves, built from a run's metric series."""

from backend.charts import line_chart

# (figure name, title, y axis, [(metric key, line name)], y range)
RUN_FIGURES = [
    ("reward", "Reward", "reward", [("reward", "mean"), ("reward_std", "std")], None),
    ("learnable_share", "Learnable share (1 − frac_reward_zero_std)", "share of groups",
     [("learnable_share", "learnable share")], [0, 1.05]),
    ("loss", "Loss", "loss", [("loss", "loss")], None),
    ("kl", "KL to the base model", "KL", [("kl", "kl")], None),
    ("completion_length", "Completion length", "tokens", [("completions/mean_length", "mean length")], None),
    ("step_time", "Step time", "seconds", [("step_time", "step time")], None),
    ("eval_accuracy", "Evaluation accuracy (step 0 = base model)", "accuracy", [("eval/accuracy", "accuracy")],
     [0, 1.05]),
]
FIGURE_KEYS = sorted({key for *_, lines, _ in RUN_FIGURES for key, _ in lines})


def run_figures(series: dict[str, dict[str, list]], settings: dict) -> dict[str, dict]:
    empty = {"steps": [], "values": []}
    figures = {name: line_chart(title, y_title, [(line, series.get(key, empty)["steps"],
                                                  series.get(key, empty)["values"]) for key, line in lines],
                                y_range=y_range)
               for name, title, y_title, lines, y_range in RUN_FIGURES}
    for name, figure in figures.items():
        if not figure["data"]:  # say why a chart is empty instead of drawing bare axes
            figure["layout"]["annotations"] = [{"text": _why_empty(name, settings), "showarrow": False,
                                                "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}]
    return figures


def _why_empty(name: str, settings: dict) -> str:
    if name == "kl" and not settings.get("beta"):
        return "not logged: beta = 0 (no reference model)"
    if name == "eval_accuracy" and settings.get("eval_pool_id") is None:
        return "no evaluation pool chosen for this run"
    return "no values logged yet"
