"""What a strategy's run cost, and what its gain was per unit of each cost. Pure: numbers in, numbers out.

- Labels: the subset's prompts × the price of a label (the money budget's cost per prompt, else the pool's
  cost per label); None without a price.
- Probing: the samples the probe drew (prompts × k), at most that × max_new_tokens tokens, and the seconds it
  took at its measured throughput. Only strategies that read the probe's scores pay it: ``random`` and ``all``
  pick without them, which is the whole argument about probing's price.
- Training: the sum of the run's measured step times.
- Gain per unit: the accuracy gain (points of accuracy, as a fraction) per label-money unit and per compute
  hour (probe + training), on the device the run reports.
"""

from __future__ import annotations

UNPROBED = frozenset({"random", "all"})  # strategies that pick without difficulty scores


def strategy_cost(*, strategy: str, labels: int, price_per_label: float | None, probe_samples: int,
                  probe_max_new_tokens: int, probe_samples_per_second: float | None,
                  training_seconds: float | None, gain: float | None, device: str | None) -> dict:
    probed = strategy not in UNPROBED
    samples = probe_samples if probed else 0
    probe_seconds = (samples / probe_samples_per_second if probe_samples_per_second else None) if probed else 0.0
    label_cost = labels * price_per_label if price_per_label is not None else None
    compute_seconds = (probe_seconds + training_seconds
                       if probe_seconds is not None and training_seconds is not None else None)
    return {
        "labels": labels, "label_cost": label_cost,
        "probe_samples": samples, "probe_tokens_at_most": samples * probe_max_new_tokens,
        "probe_seconds": probe_seconds, "training_seconds": training_seconds,
        "compute_hours": compute_seconds / 3600 if compute_seconds is not None else None, "device": device,
        "gain_per_label_cost": gain / label_cost if gain is not None and label_cost else None,
        "gain_per_compute_hour": gain / (compute_seconds / 3600) if gain is not None and compute_seconds else None,
    }
