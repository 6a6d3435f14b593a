"""Generation on vLLM (GPU workers; the optional ``gpu`` extra). vLLM is imported inside the
class, so this module imports anywhere."""

from __future__ import annotations

from backend.prompting import render_prompts
from worker.engines.base import check_sampling, derive_seed

# Sequences per ``generate`` call: vLLM schedules them itself; the chunk only bounds how long the
# caller waits before it can report progress or notice a cancel.
ROWS_PER_CALL = 2048


# vLLM sizes its LoRA buffers for one of these ranks; an adapter's rank is rounded up to the next.
VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def lora_rank_bound(adapter: str) -> int:
    """The rank vLLM must allow for the PEFT adapter in this directory."""
    import json
    from pathlib import Path

    rank = int(json.loads((Path(adapter) / "adapter_config.json").read_text())["r"])
    return next((bound for bound in VLLM_LORA_RANKS if bound >= rank), rank)


class VLLMEngine:
    """``n=k`` sampling with prefix caching (the k samples of a prompt share its KV cache).

    Each prompt gets its own seed derived from the call's seed and its index; vLLM gives the k
    children of a request ``seed + i``, so the same call is reproducible and prompts differ.
    """

    def __init__(self, model_name: str, *, seed: int = 0, gpu_memory_utilization: float = 0.85,
                 rows_per_call: int = ROWS_PER_CALL, adapter: str | None = None):
        try:
            from vllm import LLM
        except ImportError as exc:  # pragma: no cover - depends on the machine
            raise RuntimeError("vLLM is not installed on this worker; install the 'gpu' extra "
                               "(pip install 'budgetlab[gpu]') or use the transformers engine") from exc
        from transformers import AutoTokenizer

        from worker.model_store import SAFE_TOKENIZER_LOAD, ensure_checkpoint

        self.model_name = model_name
        checkpoint = ensure_checkpoint(model_name)
        self.tokenizer = AutoTokenizer.from_pretrained(checkpoint, **SAFE_TOKENIZER_LOAD)
        lora = {"enable_lora": True, "max_lora_rank": lora_rank_bound(adapter)} if adapter else {}
        self.llm = LLM(model=str(checkpoint), tokenizer=str(checkpoint), enable_prefix_caching=True, seed=seed,
                       gpu_memory_utilization=gpu_memory_utilization, trust_remote_code=False,
                       load_format="safetensors", **lora)
        self.rows_per_call = rows_per_call
        self.lora_request = None
        if adapter:
            from vllm.lora.request import LoRARequest

            self.lora_request = LoRARequest("adapter", 1, adapter)  # ids start at 1

    def prompts_per_batch(self, k: int) -> int:
        return max(1, self.rows_per_call // max(1, k))

    def render(self, questions: list[str], template: str | None = None,
               chat_template_options: dict | None = None) -> list[str]:
        return render_prompts(self.tokenizer, questions, template, chat_template_options)

    def generate(self, prompts: list[str], *, k: int, temperature: float, max_new_tokens: int,
                 seed: int) -> list[list[str]]:
        from vllm import SamplingParams

        check_sampling(k, temperature, max_new_tokens)
        if not prompts:
            return []
        greedy = temperature == 0
        params = [SamplingParams(n=1 if greedy else k, temperature=temperature, max_tokens=max_new_tokens,
                                 seed=derive_seed(seed, index), skip_special_tokens=True)
                  for index in range(len(prompts))]
        # Token ids, not text: the rendered prompt already holds its special tokens, and vLLM would
        # otherwise add a BOS token a second time for some tokenizers.
        inputs = [{"prompt_token_ids": self.tokenizer(text, add_special_tokens=False).input_ids}
                  for text in prompts]
        outputs = self.llm.generate(inputs, sampling_params=params, use_tqdm=False, lora_request=self.lora_request)
        results = []
        for output in outputs:
            texts = [completion.text for completion in sorted(output.outputs, key=lambda c: c.index)]
            results.append(texts * k if greedy else texts)
        return results
