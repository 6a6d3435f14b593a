"""Evaluation during training: greedy accuracy of the policy (base + LoRA adapter) on a held-out pool,
at step 0 (the base model: the adapter starts as a no-op), every ``eval_every`` steps and at the last step, written to
``run_metric`` as ``eval/accuracy`` (and ``eval/samples``)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from sqlalchemy import delete, insert
from sqlmodel import Session, select

from backend.curation.grading import extract_answer, is_correct
from backend.database import session_scope
from backend.jobs.tables import Job
from backend.runs.tables import RunMetric
from worker.prompting import render_prompts

try:
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover
    TrainerCallback = object  # type: ignore[misc,assignment]

ACCURACY_KEY = "eval/accuracy"
EVAL_BATCH = 16


def greedy_completions(model, tokenizer, questions: list[str], max_new_tokens: int) -> list[str]:
    """Greedy completions of the chat-rendered questions, in batches, left padded."""
    import torch

    prompts = render_prompts(tokenizer, questions)
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    was_training = model.training
    model.eval()
    texts: list[str] = []
    try:
        with torch.inference_mode():
            for start in range(0, len(prompts), EVAL_BATCH):
                inputs = tokenizer(prompts[start:start + EVAL_BATCH], return_tensors="pt", padding=True,
                                   add_special_tokens=False).to(model.device)
                output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                                        pad_token_id=tokenizer.pad_token_id)
                texts.extend(tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1]:],
                                                    skip_special_tokens=True))
    finally:
        tokenizer.padding_side = side
        if was_training:
            model.train()
    return texts


def accuracy(completions: list[str], golds: list[str], task_type: str) -> float:
    graded = [is_correct(extract_answer(text, task_type), gold, task_type)
              for text, gold in zip(completions, golds, strict=True)]
    return sum(graded) / len(graded) if graded else 0.0


class EvaluationCallback(TrainerCallback):
    def __init__(self, run_id: int, job_id: int, questions: list[str], golds: list[str], task_type: str, *,
                 every: int, max_new_tokens: int,
                 session_factory: Callable[[], AbstractContextManager[Session]] = session_scope):
        self.run_id = run_id
        self.job_id = job_id
        self.questions = questions
        self.golds = golds
        self.task_type = task_type
        self.every = every
        self.max_new_tokens = max_new_tokens
        self.session_factory = session_factory
        self.done_steps: set[int] = set()

    def evaluate(self, step: int, model, tokenizer) -> float:
        with self.session_factory() as session:
            job = session.exec(select(Job).where(Job.id == self.job_id)
                               .execution_options(populate_existing=True)).one()
            job.message = f"evaluating at step {step} on {len(self.questions)} held-out prompts"
            session.add(job)
        value = accuracy(greedy_completions(model, tokenizer, self.questions, self.max_new_tokens), self.golds,
                         self.task_type)
        rows = [{"run_id": self.run_id, "step": step, "key": ACCURACY_KEY, "value": value},
                {"run_id": self.run_id, "step": step, "key": "eval/samples", "value": float(len(self.questions))}]
        with self.session_factory() as session:
            session.execute(delete(RunMetric).where(RunMetric.run_id == self.run_id, RunMetric.step == step,
                                                    RunMetric.key.in_([row["key"] for row in rows])))
            session.execute(insert(RunMetric), rows)
        self.done_steps.add(step)
        return value

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        if 0 not in self.done_steps:
            self.evaluate(0, model, processing_class)

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        step = int(state.global_step)
        if self.every and step % self.every == 0 and step not in self.done_steps:
            self.evaluate(step, model, processing_class)

    def on_train_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        # The final accuracy is measured on the final weights, also when max_steps is no multiple of
        # eval_every; a run stopped for a cancel ends at once instead.
        step = int(state.global_step)
        if step not in self.done_steps and step >= args.max_steps:
            self.evaluate(step, model, processing_class)


def ood_key(pool_id: int, k: int, *, base: bool = False) -> str:
    return f"ood/{pool_id}/{'base_' if base else ''}pass@{k}"


def sampled_completions(model, tokenizer, questions: list[str], *, k: int, max_new_tokens: int, temperature: float,
                        seed: int) -> list[list[str]]:
    """k sampled completions per question (seeded), grouped per question."""
    import torch

    prompts = render_prompts(tokenizer, questions)
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    was_training = model.training
    model.eval()
    groups: list[list[str]] = []
    per_batch = max(1, EVAL_BATCH // k)
    try:
        torch.manual_seed(seed)
        with torch.inference_mode():
            for start in range(0, len(prompts), per_batch):
                inputs = tokenizer(prompts[start:start + per_batch], return_tensors="pt", padding=True,
                                   add_special_tokens=False).to(model.device)
                output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=True,
                                        temperature=temperature, top_k=0, top_p=1.0, num_return_sequences=k,
                                        pad_token_id=tokenizer.pad_token_id)
                texts = tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
                groups.extend(texts[i:i + k] for i in range(0, len(texts), k))
    finally:
        tokenizer.padding_side = side
        if was_training:
            model.train()
    return groups


def pass_at_k(groups: list[list[str]], golds: list[str], task_type: str) -> float:
    """Share of questions with at least one correct completion among their k."""
    solved = [any(is_correct(extract_answer(text, task_type), gold, task_type) for text in group)
              for group, gold in zip(groups, golds, strict=True)]
    return sum(solved) / len(solved) if solved else 0.0


def evaluate_ood(run_id: int, job_id: int, model, tokenizer, ood_sets, *, step: int, k: int, max_new_tokens: int,
                 temperature: float, seed: int,
                 session_factory: Callable[[], AbstractContextManager[Session]] = session_scope) -> dict[str, float]:
    """pass@k of the trained policy and of the base model (adapter disabled) on each OOD pool."""
    values: dict[str, float] = {}
    for ood in ood_sets:
        with session_factory() as session:
            job = session.exec(select(Job).where(Job.id == job_id).execution_options(populate_existing=True)).one()
            job.message = f"out-of-distribution pass@{k} on pool {ood.pool_id} ({len(ood.questions)} prompts)"
            session.add(job)
        args = {"k": k, "max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed}
        questions, golds = list(ood.questions), list(ood.golds)
        values[ood_key(ood.pool_id, k)] = pass_at_k(sampled_completions(model, tokenizer, questions, **args),
                                                    golds, ood.task_type)
        with model.disable_adapter():
            values[ood_key(ood.pool_id, k, base=True)] = pass_at_k(
                sampled_completions(model, tokenizer, questions, **args), golds, ood.task_type)
    rows = [{"run_id": run_id, "step": step, "key": key, "value": value} for key, value in values.items()]
    if rows:
        with session_factory() as session:
            session.execute(delete(RunMetric).where(RunMetric.run_id == run_id, RunMetric.step == step,
                                                    RunMetric.key.in_(list(values))))
            session.execute(insert(RunMetric), rows)
    return values
