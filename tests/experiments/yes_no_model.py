"""A tiny random SmolLM2 whose first answer token is "yes" or "no" with chosen odds, whatever the prompt.

The tiny random model's next-token distribution is nearly uniform, so no reward would ever be 1 and every
accuracy would be 0: an experiment on it compares nothing. Here two rows of the (tied) embedding are set
along the model's final hidden state, so P("yes") and P("no") take the values asked for. Prompts whose
gold answer is "yes", "no" or anything else then have pass rates near those odds, near them, and 0:
GRPO has something to learn, and strategies differ in what they feed it.
"""

import math
from pathlib import Path

import torch

ANSWERS = ("yes", "no")


def build_yes_no_model(tiny_checkpoint: Path, target: Path, odds: dict[str, float]) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from backend.prompting import render_prompts

    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint, dtype=torch.float32)
    rendered = render_prompts(tokenizer, ["Is this a question?"])[0]
    ids = tokenizer(rendered, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        hidden = model.model(**ids).last_hidden_state[0, -1]  # after the final norm: what lm_head sees
        embeddings = model.get_input_embeddings().weight
        rest = 1.0 - sum(odds.values())
        normaliser = embeddings.shape[0] / rest  # the other tokens' logits are ~0, so each weighs ~1
        generator = torch.Generator().manual_seed(0)
        for word, chance in odds.items():
            token = tokenizer.convert_tokens_to_ids(word)
            along = hidden * (math.log(chance * normaliser) / float(hidden @ hidden))
            # Plus a direction of its own, orthogonal to the hidden state (no effect on the odds above), so
            # training can move the hidden state towards one answer and away from the other.
            own = torch.randn(hidden.shape, generator=generator)
            own -= hidden * (float(own @ hidden) / float(hidden @ hidden))
            embeddings[token] = along + own * (float(along.norm()) / float(own.norm()))
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def first_token_odds(checkpoint: Path, question: str) -> dict[str, float]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from backend.prompting import render_prompts

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    ids = tokenizer(render_prompts(tokenizer, [question])[0], return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        probs = torch.softmax(model(**ids).logits[0, -1], -1)
    return {word: float(probs[tokenizer.convert_tokens_to_ids(word)]) for word in ANSWERS}
