"""A probe's model, template, chat-template options and grading policy are what its subsets are trained and
evaluated with (issue 7 §8): real probes, real GRPO steps and real generation on tiny models, nothing stubbed."""

import shutil
from pathlib import Path

import pytest
from sqlalchemy import update
from sqlmodel import select

from backend.database import session_scope
from backend.pools.tables import Pool, Prompt
from backend.probes.schemas import ProbeCreate
from backend.probes.service import create_probe
from backend.probes.tables import Sample
from backend.runs.service import create_run
from backend.runs.tables import Run, RunMetric
from backend.subsets.tables import Subset
from tests.runs.conftest import make_subset
from tests.subsets.conftest import make_probed_pool
from tests.worker.test_prompting import THINKING_SUFFIX

STEP = {"lora_rank": 4, "lora_alpha": 8, "num_generations": 2, "batch_size": 4, "max_completion_length": 4,
        "learning_rate": 1e-3, "max_steps": 1}
THINKING_OFF = {"enable_thinking": False, "persona": "a terse tutor who answers in one word"}


@pytest.fixture(scope="module")
def thinking_model(service_tiny_model, tmp_path_factory) -> str:
    """The tiny model as a local checkpoint whose chat template renders options (like Qwen3's)."""
    from transformers import AutoTokenizer

    target = tmp_path_factory.mktemp("thinking") / "tiny-thinking"
    shutil.copytree(service_tiny_model, target)
    tokenizer = AutoTokenizer.from_pretrained(target)
    tokenizer.chat_template = tokenizer.chat_template + THINKING_SUFFIX
    tokenizer.save_pretrained(target)
    return str(target)


@pytest.fixture
def artifacts(service_env, use_artifacts, service_tiny_model) -> Path:
    return use_artifacts(Path(service_env["BUDGETLAB_ARTIFACT_DIR"]))


def probe_completions(pool_id: int, model: str, **fields) -> tuple[list[str], list[str]]:
    """(questions, greedy completions) of a real probe of the pool, run in this process."""
    from worker.probing import run_probe

    with session_scope() as session:
        probe = create_probe(session, ProbeCreate(pool_id=pool_id, model=model, k=1, temperature=0.0,
                                                  max_new_tokens=6, **fields), shard_size=256)
        probe_id = probe.id
    assert run_probe(probe_id) == "succeeded"
    with session_scope() as session:
        rows = session.exec(select(Prompt.text, Sample.completion).join(Sample, Sample.prompt_id == Prompt.id)
                            .where(Sample.probe_id == probe_id).order_by(Prompt.position)).all()
    return [row[0] for row in rows], [row[1] for row in rows]


def test_probing_renders_with_the_chat_template_options(artifacts, thinking_model):
    from worker.engines import get_engine

    pool_id = make_probed_pool(3).pool_id
    questions, with_options = probe_completions(pool_id, thinking_model, chat_template_options=THINKING_OFF)
    _, without = probe_completions(pool_id, thinking_model)
    engine = get_engine(thinking_model)  # the engine the probes used, greedy: its completions are reproducible
    expected = engine.generate(engine.render(questions, None, THINKING_OFF), k=1, temperature=0.0,
                               max_new_tokens=6, seed=0)
    assert with_options == [outs[0] for outs in expected]
    assert with_options != without


def test_evaluation_renders_with_the_runs_prompt_format(artifacts, thinking_model):
    from backend.prompting import PromptFormat
    from worker.engines import get_engine
    from worker.evaluation import greedy_completions

    engine = get_engine(thinking_model)
    questions = ["What is 1 + 1?", "What is 2 + 5?"]
    probed = engine.generate(engine.render(questions, None, THINKING_OFF), k=1, temperature=0.0,
                             max_new_tokens=6, seed=0)
    evaluated = greedy_completions(engine.model, engine.tokenizer, questions, 6, PromptFormat(None, THINKING_OFF))
    assert evaluated == [outs[0] for outs in probed]
    assert evaluated != greedy_completions(engine.model, engine.tokenizer, questions, 6)


def first_training_prompt(**probe_fields) -> tuple[Run, str]:
    """Train one step on a subset of a probe with ``probe_fields`` (no model named); the run and its
    first question."""
    from worker.training import train_run

    subset_id = make_subset(4, **probe_fields)
    with session_scope() as session:
        run_id = create_run(session, subset_id, STEP).id
    assert train_run(run_id) == "succeeded"
    with session_scope() as session:
        run = session.get(Run, run_id)
        subset = session.get(Subset, run.subset_id)
        question = session.exec(select(Prompt.text).where(Prompt.pool_id == subset.pool_id)
                                .order_by(Prompt.position)).first()
        return run, question


def test_training_uses_the_probes_model_and_custom_template(artifacts, thinking_model):
    from transformers import AutoTokenizer

    from backend.prompting import render_prompt, without_added_bos

    template = "Problem: {prompt}\nShort answer in \\boxed{}:"
    run, question = first_training_prompt(model=thinking_model, template=template)
    assert run.model == run.settings["model"] == thinking_model  # the probe's, not the default model
    tokenizer = AutoTokenizer.from_pretrained(thinking_model)
    assert run.prompt_example == without_added_bos(tokenizer, render_prompt(tokenizer, question, template))
    assert run.prompt_example.startswith(f"Problem: {question}\nShort answer")


def test_training_uses_the_probes_chat_template_options(artifacts, thinking_model):
    run, question = first_training_prompt(model=thinking_model, chat_template_options=THINKING_OFF)
    assert question in run.prompt_example
    assert run.prompt_example.endswith("<think>\n\n</think>\n\n(a terse tutor who answers in one word)")


# --- grading policy: an unboxed right answer earns a reward and counts in evaluation only when lenient -------


@pytest.fixture(scope="module")
def yes_model(service_tiny_model, tmp_path_factory) -> str:
    """Answers "yes" first with probability 0.9, unboxed."""
    from tests.experiments.yes_no_model import build_yes_no_model

    return str(build_yes_no_model(service_tiny_model, tmp_path_factory.mktemp("yes"), {"yes": 0.9, "no": 0.05}))


def train_yes_pool(model: str, grading_policy: str) -> dict[int, dict[str, float]]:
    """One step on a pool whose every gold answer is "yes" (task type exact), evaluated on that pool."""
    from worker.training import train_run

    subset_id = make_subset(4, model=model, grading_policy=grading_policy)
    with session_scope() as session:
        pool_id = session.get(Subset, subset_id).pool_id
        session.execute(update(Pool).where(Pool.id == pool_id).values(task_type="exact"))
        session.execute(update(Prompt).where(Prompt.pool_id == pool_id).values(answer="yes", gold="yes"))
        run_id = create_run(session, subset_id, {**STEP, "max_completion_length": 1, "eval_pool_id": pool_id,
                                                 "eval_samples": 4}).id
    assert train_run(run_id) == "succeeded"
    by_step: dict[int, dict[str, float]] = {}
    with session_scope() as session:
        for row in session.exec(select(RunMetric).where(RunMetric.run_id == run_id)):
            by_step.setdefault(row.step, {})[row.key] = row.value
    return by_step


def test_the_probes_grading_policy_decides_reward_and_evaluation(artifacts, yes_model):
    lenient = train_yes_pool(yes_model, "lenient")
    strict = train_yes_pool(yes_model, "strict")
    assert lenient[0]["eval/accuracy"] == 1.0 and lenient[1]["reward"] > 0.5
    assert strict[0]["eval/accuracy"] == 0.0 and strict[1]["reward"] == 0.0  # "yes" is not in \boxed{}


def test_probing_grades_samples_with_the_probes_policy():
    from worker.probing import ShardWork, grade_shard

    def correct_count(policy: str) -> int:
        work = ShardWork(probe_id=1, probe_job_id=1, shard_index=0, shard_number=1, shard_count=1, first_position=0,
                         model="m", adapter=None, k=2, temperature=1.0, max_new_tokens=8, template=None,
                         chat_template_options=None, grading_policy=policy, seed=0, label_free=False,
                         task_type="numeric", prompt_ids=[1], positions=[0], texts=["What is 2 + 2?"], golds=["4"],
                         prompt_count=1)
        _, scores = grade_shard(work, [["2 + 2 makes 4", "so \\boxed{4}"]])
        return scores[0]["correct_count"]

    assert (correct_count("lenient"), correct_count("strict")) == (2, 1)


# --- the probe stores and shows them; bad options are refused in words -----------------------------------


def test_a_probe_stores_and_shows_its_options_and_policy(service_env):
    from backend.probes.service import probe_read

    pool_id = make_probed_pool(3).pool_id
    with session_scope() as session:
        probe = create_probe(session, ProbeCreate(pool_id=pool_id, chat_template_options={"enable_thinking": False},
                                                  grading_policy="strict"), shard_size=256)
        read = probe_read(session, probe)
        assert (read.chat_template_options, read.grading_policy) == ({"enable_thinking": False}, "strict")
        paper = probe_read(session, create_probe(session, ProbeCreate(pool_id=pool_id, preset="paper", k=4),
                                                 shard_size=256))
        assert (paper.k, paper.max_new_tokens, paper.grading_policy) == (4, 250, "strict")  # k given: kept
        assert probe_read(session, create_probe(session, ProbeCreate(pool_id=pool_id), 256)).grading_policy == "lenient"


@pytest.mark.parametrize(("body", "words"), [
    ({"chat_template_options": {"enable-thinking": False}}, "key 'enable-thinking' is not an identifier"),
    ({"chat_template_options": {"enable_thinking": {"deep": True}}}, "must be text, a number, true, false or null"),
    ({"chat_template_options": {"enable_thinking": False}, "template": "Q: {prompt}"}, "custom template replaces"),
    ({"grading_policy": "exact"}, "strict"),
])
def test_bad_options_and_policy_are_422_in_words(client, body, words):
    pool_id = make_probed_pool(3).pool_id
    response = client.post("/api/probes", json={"pool_id": pool_id, **body})
    assert response.status_code == 422, response.text
    assert words in response.text


def test_probe_cli_refuses_bad_options_in_words(service_env):
    from typer.testing import CliRunner

    from backend.cli import app

    pool_id = str(make_probed_pool(3).pool_id)
    bad = CliRunner().invoke(app, ["probe", pool_id, "--chat-template-options", '{"enable thinking": false}'])
    assert bad.exit_code == 1 and "key 'enable thinking' is not an identifier" in bad.output
    policy = CliRunner().invoke(app, ["probe", pool_id, "--grading-policy", "loose"])
    assert policy.exit_code == 1 and "'strict' or 'lenient'" in policy.output


def test_the_paper_preset_is_one_user_turn_asking_for_boxed_and_for_letters_on_a_choice_pool(client):
    from backend.prompting import PAPER_CHOICE_TEMPLATE, PAPER_TEMPLATE

    numbers = client.post("/api/pools", files={"file": ("n.jsonl", b'{"prompt": "1+1?", "answer": "2"}\n')},
                          data={"name": "numbers"}).json()
    letters = client.post("/api/pools", files={"file": ("c.jsonl", b'{"prompt": "Pick: (A) x (B) y", '
                                                                   b'"answer": "(B)"}\n')},
                          data={"name": "letters", "task_type": "choice"}).json()
    for pool, template in ((numbers, PAPER_TEMPLATE), (letters, PAPER_CHOICE_TEMPLATE)):
        probe = client.post("/api/probes", json={"pool_id": pool["id"], "preset": "paper"}).json()
        assert (probe["k"], probe["temperature"], probe["max_new_tokens"], probe["grading_policy"]) == (
            10, 1.0, 250, "strict")
        assert probe["template"] == template
    assert "\\boxed{(X)}" in PAPER_CHOICE_TEMPLATE and PAPER_TEMPLATE.startswith("{chat}")
