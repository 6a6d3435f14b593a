"""Evaluation of the policy (base + LoRA adapter) during and after training.

- ``EvaluationCallback``: accuracy on the held-out pool at step 0 (the base model: the adapter starts as a
  no-op), every ``eval_every`` steps and at the last step, written to ``run_metric`` as ``eval/accuracy``
  (and ``eval/samples``): greedy, or one sample per prompt at ``eval_temperature`` (the paper's). The runs
  of one experiment share the model, the evaluation prompts and their rendering, so greedy decoding gives
  them the same step-0 accuracy: a run whose sibling already measured it copies it (and records which run,
  as ``eval/base_from_run``).
- ``evaluate_ood``: pass@k on out-of-distribution pools after training, for the trained policy and
  the base model (adapter disabled), as ``ood/<pool>/pass@k`` and ``ood/<pool>/base_pass@k``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager

from sqlmodel import Session, select

from backend.curation.grading import grade
from backend.database import session_scope
from backend.jobs.engine import TaskContext
from backend.prompting import PromptFormat
from backend.runs.service import replace_metrics
from backend.runs.tables import Run, RunMetric

try:
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover
    TrainerCallback = object  # type: ignore[misc,assignment]

ACCURACY_KEY = "eval/accuracy"
SAMPLES_KEY = "eval/samples"
BASE_FROM_KEY = "eval/base_from_run"
# Sequences per generate() call: on the CPU a call of 64 short sequences costs about what one of 16 does; on
# a GPU the batch is kept at 16 so long completions of a larger model fit in memory.
CPU_EVAL_BATCH, GPU_EVAL_BATCH = 64, 16

SessionFactory = Callable[[], AbstractContextManager[Session]]


def _generate(model, tokenizer, questions: list[str], per_call: int, prompt_format: PromptFormat,
              on_batch: Callable[[], object] | None = None, **generate_kwargs) -> list[str]:
    """Completions of the questions rendered as the probe rendered them, ``per_call`` at a time, left padded;
    ``on_batch`` after each batch (the job's beat: a long evaluation keeps its lease)."""
    import torch

    prompts = prompt_format.render(tokenizer, questions)
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    was_training = model.training
    model.eval()
    texts: list[str] = []
    try:
        with torch.inference_mode(), _merged(model):
            for start in range(0, len(prompts), per_call):
                inputs = tokenizer(prompts[start:start + per_call], return_tensors="pt", padding=True,
                                   add_special_tokens=False).to(model.device)
                output = model.generate(**inputs, pad_token_id=tokenizer.pad_token_id, **generate_kwargs)
                texts.extend(tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1]:],
                                                    skip_special_tokens=True))
                if on_batch is not None:
                    on_batch()
    finally:
        tokenizer.padding_side = side
        if was_training:
            model.train()
    return texts


@contextmanager
def _merged(model):
    """The LoRA adapter merged into the base weights while generating (the same function): the 135M model
    on a CPU then generates about 3x faster than through PEFT's per-layer adapter wrappers. Only for float32
    weights (the CPU case): in bf16 the merge loses most of the small delta and unmerging drifts the base;
    not while the adapter is disabled either."""
    import torch

    if not hasattr(model, "merge_adapter") or next(model.parameters()).dtype != torch.float32:
        yield  # bf16 cannot hold the small LoRA delta (and unmerging would drift the base), nor can 4-bit
        return
    from peft.tuners.tuners_utils import BaseTunerLayer

    if any(layer.disable_adapters for layer in model.modules() if isinstance(layer, BaseTunerLayer)):
        yield  # inside disable_adapter(): the base model is wanted, and PEFT would unmerge at every forward
        return
    model.merge_adapter()
    try:
        yield
    finally:
        model.unmerge_adapter()


def _eval_batch(model) -> int:
    return GPU_EVAL_BATCH if model.device.type == "cuda" else CPU_EVAL_BATCH


def greedy_completions(model, tokenizer, questions: list[str], max_new_tokens: int,
                       prompt_format: PromptFormat = PromptFormat(), on_batch=None) -> list[str]:
    return _generate(model, tokenizer, questions, _eval_batch(model), prompt_format, on_batch,
                     max_new_tokens=max_new_tokens, do_sample=False)


def sampled_completions(model, tokenizer, questions: list[str], *, k: int, max_new_tokens: int, temperature: float,
                        seed: int, prompt_format: PromptFormat = PromptFormat(), on_batch=None) -> list[list[str]]:
    """k sampled completions per question (seeded, the probe's sampling: no top-k/top-p), grouped per question."""
    import torch

    torch.manual_seed(seed)
    texts = _generate(model, tokenizer, questions, max(1, _eval_batch(model) // k), prompt_format, on_batch,
                      max_new_tokens=max_new_tokens, do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                      num_return_sequences=k)
    return [texts[i:i + k] for i in range(0, len(texts), k)]


def accuracy(completions: list[str], prompts, policy: str) -> float:
    """Share correct; ``prompts`` is the PromptSet the completions answer, in order."""
    results = [grade(text, gold, prompts.task_type, policy, question)
               for text, gold, question in zip(completions, prompts.golds, prompts.questions, strict=True)]
    return sum(results) / len(results) if results else 0.0


def pass_at_k(groups: list[list[str]], prompts, policy: str) -> float:
    """Share of the PromptSet's questions with at least one correct completion among their k."""
    solved = [any(grade(text, gold, prompts.task_type, policy, question) for text in group)
              for group, gold, question in zip(groups, prompts.golds, prompts.questions, strict=True)]
    return sum(solved) / len(solved) if solved else 0.0


def ood_key(pool_id: int, k: int, *, base: bool = False) -> str:
    return f"ood/{pool_id}/{'base_' if base else ''}pass@{k}"


class EvaluationCallback(TrainerCallback):
    def __init__(self, run_id: int, ctx: TaskContext, prompts, *, every: int, max_new_tokens: int,
                 prompt_format: PromptFormat, grading_policy: str, temperature: float = 0.0, seed: int = 0,
                 session_factory: SessionFactory = session_scope):
        self.run_id = run_id
        self.ctx = ctx
        self.prompts = prompts  # worker.training.PromptSet
        self.prompt_format = prompt_format  # the training run's (its probe's), also on another pool
        self.grading_policy = grading_policy
        self.every = every
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature  # 0: greedy
        self.seed = seed
        self.session_factory = session_factory
        self.done_steps: set[int] = set()

    def evaluate(self, step: int, model, tokenizer) -> float:
        if step == 0 and not self.temperature and (copied := self._sibling_base()) is not None:
            self.done_steps.add(step)
            return copied
        questions = list(self.prompts.questions)
        self.ctx.beat(message=f"evaluating at step {step} on {len(questions)} held-out prompts")
        if self.temperature:  # one sample per prompt (the paper's evaluation), seeded per step
            completions = [group[0] for group in sampled_completions(
                model, tokenizer, questions, k=1, max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                seed=self.seed + step, prompt_format=self.prompt_format, on_batch=self.ctx.beat)]
        else:
            completions = greedy_completions(model, tokenizer, questions, self.max_new_tokens, self.prompt_format,
                                             on_batch=self.ctx.beat)
        value = accuracy(completions, self.prompts, self.grading_policy)
        with self.session_factory() as session:
            replace_metrics(session, self.run_id, step, {ACCURACY_KEY: value, SAMPLES_KEY: float(len(questions))})
        self.done_steps.add(step)
        return value

    def _sibling_base(self) -> float | None:
        """Copy the step-0 accuracy of a run of the same experiment (same settings, model and probe, so the
        same prompts, rendering and greedy decoding), if one has it; None otherwise."""
        with self.session_factory() as session:
            run = session.get(Run, self.run_id)
            if run is None or run.experiment_id is None:
                return None
            siblings = select(Run.id).where(Run.experiment_id == run.experiment_id, Run.id != run.id)
            rows = session.exec(select(RunMetric.run_id, RunMetric.key, RunMetric.value).where(
                RunMetric.run_id.in_(siblings), RunMetric.step == 0,
                RunMetric.key.in_([ACCURACY_KEY, SAMPLES_KEY]))).all()
            found: dict[int, dict[str, float]] = {}
            for run_id, key, value in rows:
                found.setdefault(run_id, {})[key] = value
            same = [(run_id, values) for run_id, values in sorted(found.items())
                    if values.get(SAMPLES_KEY) == float(len(self.prompts.questions)) and ACCURACY_KEY in values]
            if not same:
                return None
            source, values = same[0]
            replace_metrics(session, self.run_id, 0, {**values, BASE_FROM_KEY: float(source)})
        self.ctx.beat(message=f"base accuracy at step 0 copied from run {source} of the same experiment")
        return values[ACCURACY_KEY]

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


def evaluate_ood(run_id: int, ctx: TaskContext, model, tokenizer, prompt_sets, *, step: int, k: int,
                 max_new_tokens: int, temperature: float, seed: int, prompt_format: PromptFormat, grading_policy: str,
                 session_factory: SessionFactory = session_scope) -> dict[str, float]:
    """pass@k of the trained policy and of the base model on each OOD pool, prompted and graded as in
    training; stops early on a cancel."""
    values: dict[str, float] = {}
    args = {"k": k, "max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed,
            "prompt_format": prompt_format, "on_batch": ctx.beat}
    for prompts in prompt_sets:
        if not ctx.beat(message=f"out-of-distribution pass@{k} on pool {prompts.pool_id} ({len(prompts.questions)} "
                                "prompts)", stopped=f"in the OOD evaluation after step {step}"):
            break  # cancelled, or ended elsewhere
        questions = list(prompts.questions)
        trained = pass_at_k(sampled_completions(model, tokenizer, questions, **args), prompts, grading_policy)
        with model.disable_adapter():
            base = pass_at_k(sampled_completions(model, tokenizer, questions, **args), prompts, grading_policy)
        pool_values = {ood_key(prompts.pool_id, k): trained, ood_key(prompts.pool_id, k, base=True): base}
        with session_factory() as session:
            replace_metrics(session, run_id, step, pool_values)
        values.update(pool_values)
    return values
