"""Generation with transformers' batched ``generate`` (CPU or GPU)."""

from __future__ import annotations

from backend.prompting import render_prompts
from worker.engines.base import check_sampling

# Sequences (prompts x k) per ``generate`` call. On a 2-core CPU with the default model in
# bfloat16, decode throughput grows up to ~64 rows and is flat after (docs/benchmarks.md).
CPU_ROWS_PER_BATCH = 64
GPU_ROWS_PER_BATCH = 512


class TransformersEngine:
    """Pure sampling (temperature only, no top-k/top-p truncation, as vLLM does by default) with
    left padding and ``num_return_sequences=k``; greedy when temperature is 0.

    ``batch_size`` fixes the prompts per ``generate`` call; by default it is
    ``rows_per_batch // k`` (at least 1), so the batch stays efficient whatever k is. ``adapter``: a trained
    LoRA adapter's directory, applied to the model (`worker.model_store.load_adapted_model`).
    """

    def __init__(self, model_name: str, *, device: str | None = None, batch_size: int | None = None,
                 rows_per_batch: int | None = None, dtype=None, adapter: str | None = None):
        from worker.model_store import load_adapted_model, load_model

        self.model_name = model_name
        self.model, self.tokenizer = (load_adapted_model(model_name, adapter, device, dtype=dtype) if adapter else
                                      load_model(model_name, device, dtype=dtype))
        self.device = self.model.device
        self.batch_size = batch_size
        self.rows_per_batch = rows_per_batch or (GPU_ROWS_PER_BATCH if self.device.type == "cuda"
                                                 else CPU_ROWS_PER_BATCH)

    def prompts_per_batch(self, k: int) -> int:
        return self.batch_size or max(1, self.rows_per_batch // max(1, k))

    def render(self, questions: list[str], template: str | None = None,
               chat_template_options: dict | None = None) -> list[str]:
        return render_prompts(self.tokenizer, questions, template, chat_template_options)

    def generate(self, prompts: list[str], *, k: int, temperature: float, max_new_tokens: int,
                 seed: int) -> list[list[str]]:
        import torch

        check_sampling(k, temperature, max_new_tokens)
        if not prompts:
            return []
        torch.manual_seed(seed)  # one seed per call: the same call gives the same completions
        results: list[list[str]] = []
        step = self.prompts_per_batch(k)
        for start in range(0, len(prompts), step):
            results.extend(self._generate_batch(prompts[start:start + step], k, temperature, max_new_tokens))
        return results

    def _generate_batch(self, prompts: list[str], k: int, temperature: float,
                        max_new_tokens: int) -> list[list[str]]:
        import torch

        tokenizer = self.tokenizer
        inputs = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        greedy = temperature == 0
        sampling = ({"do_sample": False, "num_return_sequences": 1} if greedy else
                    {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0,
                     "num_return_sequences": k})
        with torch.inference_mode():
            output = self.model.generate(**inputs, max_new_tokens=max_new_tokens,
                                         pad_token_id=tokenizer.pad_token_id, **sampling)
        texts = tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        if greedy:
            return [[text] * k for text in texts]
        return [texts[i * k:(i + 1) * k] for i in range(len(prompts))]
