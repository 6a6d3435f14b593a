"""Training settings: bounds, presets and TRL's batch rules, checked without the ML stack."""

import pytest

from backend.runs.settings import PRESETS, TrainingSettings, check_training_settings, parse_training_settings, preset


def test_defaults_pass_the_rules():
    assert check_training_settings(TrainingSettings()) == []


def test_paper_preset_matches_the_paper():
    from backend.runs.settings import grpo_config_kwargs, lora_config_kwargs

    paper = preset("paper")
    assert (paper.lora_rank, paper.lora_alpha) == (32, 32)
    assert paper.lora_target_modules == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert (paper.learning_rate, paper.num_generations, paper.max_completion_length) == (5e-6, 8, 250)
    assert (paper.temperature, paper.max_steps, paper.prompts_per_step) == (1.0, 1000, 1)
    assert check_training_settings(paper) == []
    # The optimiser and schedule reach TRL's config as the paper states them.
    config = grpo_config_kwargs(paper, cuda=False, bf16=False, output_dir="/tmp/x")
    assert {key: config[key] for key in ("lr_scheduler_type", "warmup_steps", "weight_decay", "adam_beta2",
                                         "max_grad_norm")} == {"lr_scheduler_type": "cosine", "warmup_steps": 0.1,
                                                               "weight_decay": 0.1, "adam_beta2": 0.99,
                                                               "max_grad_norm": 0.1}
    assert lora_config_kwargs(paper)["target_modules"] == paper.lora_target_modules


def test_quick_cpu_preset_is_small_and_valid():
    quick = preset("quick_cpu")
    assert quick.max_steps <= 60 and quick.max_completion_length <= 64 and quick.batch_size <= 8
    assert check_training_settings(quick) == []
    assert preset("quick_cpu", max_steps=5).max_steps == 5
    with pytest.raises(KeyError):
        preset("huge")


def test_one_generation_is_refused_with_the_reason():
    settings, problems = parse_training_settings({"num_generations": 1})
    assert settings is None
    assert problems == ["num_generations = 1 is out of range; allowed: ≥ 2 and ≤ 64."]
    # the rule itself (as TRL words it), on settings built without field validation
    [problem] = check_training_settings(TrainingSettings.model_construct(**{**TrainingSettings().model_dump(),
                                                                             "num_generations": 1}))
    assert "at least 2 generations" in problem


def test_batch_must_hold_whole_groups():
    for prompts in (1, 2, 3, 7):
        for g in (2, 3, 8):
            settings = TrainingSettings(batch_size=prompts * g, num_generations=g)
            assert settings.prompts_per_step == prompts
            assert check_training_settings(settings) == []
    settings, [problem] = parse_training_settings({"batch_size": 10, "num_generations": 4})
    assert settings is None
    assert "batch_size (10 completions per step) must be divisible by num_generations (4)" in problem
    assert "for example 8" in problem


@pytest.mark.parametrize(("field", "value", "words"), [
    ("lora_rank", 0, "lora_rank = 0 is out of range; allowed: ≥ 1 and ≤ 512."),
    ("learning_rate", 0, "learning_rate = 0 is out of range; allowed: > 0 and ≤ 0.01."),
    ("temperature", 5.0, "temperature = 5.0 is out of range; allowed: > 0 and ≤ 2.0."),
    ("max_completion_length", 100_000, "max_completion_length = 100000 is out of range; allowed: ≥ 1 and ≤ 8192."),
])
def test_out_of_range_values_name_the_allowed_range(field, value, words):
    settings, problems = parse_training_settings({field: value})
    assert settings is None and problems == [words]


def test_unknown_setting_and_lm_head_and_eval_rules():
    assert "not a training setting" in parse_training_settings({"lr": 1})[1][0]
    assert "lm_head" in parse_training_settings({"lora_target_modules": ["q_proj", "lm_head"]})[1][0]
    assert "eval_pool_id" in parse_training_settings({"eval_every": 10})[1][0]
    settings, problems = parse_training_settings({"lora_target_modules": ["q_proj", "v_proj"], "max_steps": 3})
    assert problems == [] and settings.lora_target_modules == ["q_proj", "v_proj"]


def test_presets_are_all_valid():
    for name in PRESETS:
        assert check_training_settings(preset(name)) == []


def test_module_names_given_as_text_become_a_list():
    # PEFT reads a plain string as one regular expression: "q_proj" alone would match no module.
    assert TrainingSettings(lora_target_modules="q_proj, v_proj").lora_target_modules == ["q_proj", "v_proj"]
    assert TrainingSettings(lora_target_modules="q_proj").lora_target_modules == ["q_proj"]
    assert TrainingSettings().lora_target_modules == "all-linear"
    assert "lm_head" in parse_training_settings({"lora_target_modules": "q_proj,lm_head"})[1][0]
