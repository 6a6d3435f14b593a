"""Plotly figure builders. Figures are plain dicts in Plotly's JSON schema: the browser renders
them with Plotly.newPlot, and building dicts avoids plotly.py's validation cost on hot paths."""

METRIC_TITLES = {"pass_rate": "pass rate", "agreement": "answer agreement"}
_LAYOUT = {"margin": {"l": 50, "r": 20, "t": 40, "b": 45}, "bargap": 0.05,
           "height": 320}


def _centres(edges: list[float]) -> list[float]:
    return [round((a + b) / 2, 6) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def _width(edges: list[float]) -> float:
    return (edges[-1] - edges[0]) / max(len(edges) - 1, 1)


def difficulty_histogram(edges: list[float], counts: list[int], metric: str) -> dict:
    title = METRIC_TITLES.get(metric, metric)
    return {
        "data": [{"type": "bar", "x": _centres(edges), "y": counts, "width": _width(edges),
                  "name": "prompts", "marker": {"color": "#4f6bed"},
                  "hovertemplate": f"{title} %{{x:.2f}}: %{{y}} prompts<extra></extra>"}],
        "layout": {**_LAYOUT, "title": {"text": f"Prompts by {title}"},
                   "xaxis": {"title": {"text": title}, "range": [0, 1]},
                   "yaxis": {"title": {"text": "prompts"}}},
    }


def selection_histogram(edges: list[float], counts_all: list[int], counts_picked: list[int], metric: str,
                        strategy: str) -> dict:
    title = METRIC_TITLES.get(metric, metric)
    x, width = _centres(edges), _width(edges)
    rest = [a - p for a, p in zip(counts_all, counts_picked, strict=True)]
    return {
        "data": [
            {"type": "bar", "x": x, "y": counts_picked, "width": width, "name": f"picked ({strategy})",
             "marker": {"color": "#e4572e"}},
            {"type": "bar", "x": x, "y": rest, "width": width, "name": "not picked",
             "marker": {"color": "#c9d1e8"}},
        ],
        "layout": {**_LAYOUT, "barmode": "stack", "title": {"text": f"Picked prompts by {title}"},
                   "xaxis": {"title": {"text": title}, "range": [0, 1]},
                   "yaxis": {"title": {"text": "prompts"}}, "legend": {"orientation": "h", "y": -0.25}},
    }


def line_chart(title: str, y_title: str, lines: list[tuple[str, list[int], list[float]]], *,
               y_range: list[float] | None = None,
               intervals: dict[str, list[tuple[float, float]]] | None = None) -> dict:
    """One line per (name, steps, values); the x axis is the training step. ``intervals``: per line name, a
    (low, high) per point, drawn as error bars."""
    yaxis = {"title": {"text": y_title}, **({"range": y_range} if y_range else {})}

    def bars(name: str, values: list[float]) -> dict:
        bounds = (intervals or {}).get(name)
        if not bounds or len(bounds) != len(values):
            return {}
        return {"error_y": {"type": "data", "symmetric": False, "thickness": 1, "width": 3,
                            "array": [high - v for v, (_, high) in zip(values, bounds, strict=True)],
                            "arrayminus": [v - low for v, (low, _) in zip(values, bounds, strict=True)]}}

    return {
        "data": [{"type": "scatter", "mode": "lines+markers", "name": name, "x": steps, "y": values,
                  **bars(name, values)}
                 for name, steps, values in lines if steps],
        "layout": {**_LAYOUT, "title": {"text": title}, "xaxis": {"title": {"text": "step"}}, "yaxis": yaxis,
                   "legend": {"orientation": "h", "y": -0.25}},
    }


def gain_scatter(points: list[dict], fit: dict) -> dict:
    """Learnable % against accuracy gain, one marker per run, with the least-squares line and its R²."""
    data = [{"type": "scatter", "mode": "markers+text", "name": "runs",
             "x": [p["x"] for p in points], "y": [p["y"] for p in points],
             "text": [p["label"] for p in points], "textposition": "top center",
             "marker": {"size": 10, "color": "#4f6bed"},
             "hovertemplate": "%{text}: learnable %{x:.1f}%, gain %{y:+.3f}<extra></extra>"}]
    title = "Accuracy gain vs learnable %"
    if fit.get("slope") is not None:
        xs = [p["x"] for p in points]
        ends = [min(xs), max(xs)]
        data.append({"type": "scatter", "mode": "lines", "name": "least-squares fit", "x": ends,
                     "y": [fit["intercept"] + fit["slope"] * x for x in ends], "line": {"color": "#e4572e"}})
        if fit.get("r2") is not None:
            title += f" (R² = {fit['r2']:.3f}, {fit['n_points']} runs)"
    return {"data": data,
            "layout": {**_LAYOUT, "title": {"text": title}, "xaxis": {"title": {"text": "learnable % of steps"}},
                       "yaxis": {"title": {"text": "accuracy gain (final − base)"}}, "showlegend": False}}


def agreement_scatter(agreement, pass_rate) -> dict:
    """Pass rate against agreement, one marker per distinct pair sized by its prompt count."""
    from backend.labels.trust import scatter_points

    points = scatter_points(agreement, pass_rate)
    sizes = [6 + 14 * (c / max(points["count"])) ** 0.5 for c in points["count"]] if points["count"] else []
    return {
        "data": [{"type": "scatter", "mode": "markers", "x": points["agreement"], "y": points["pass_rate"],
                  "customdata": points["count"], "marker": {"size": sizes, "color": "#4f6bed", "opacity": 0.7},
                  "name": "prompts",
                  "hovertemplate": "agreement %{x:.2f}, pass rate %{y:.2f}: %{customdata} prompts<extra></extra>"}],
        "layout": {**_LAYOUT, "title": {"text": "Agreement (label-free) against pass rate (labeled)"},
                   "xaxis": {"title": {"text": "answer agreement"}, "range": [-0.02, 1.02]},
                   "yaxis": {"title": {"text": "pass rate"}, "range": [-0.02, 1.02]}},
    }


def capacity_boundary(tiers: list[str], series: list[tuple[str, list[float | None]]]) -> dict:
    """Gain in pass rate by the base model's tier on the evaluation pool, a bar group per tier and a bar per
    strategy: where training helped."""
    return {
        "data": [{"type": "bar", "x": tiers, "y": gains, "name": name,
                  "hovertemplate": f"{name}, %{{x}}: %{{y:+.3f}}<extra></extra>"} for name, gains in series],
        "layout": {**_LAYOUT, "barmode": "group", "title": {"text": "Gain in pass rate by the base model's tier"},
                   "xaxis": {"title": {"text": "tier under the base model (evaluation pool)"}},
                   "yaxis": {"title": {"text": "pass rate after - before"}}, "legend": {"orientation": "h", "y": -0.3}},
    }
