"""The sampled-output analyzer: real garbage is garbage, normal answers (multilingual, code, JSON) are not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from llm_oncall.evidence import classify, outputs
from llm_oncall.probe.golden import GoldenProber

REAL = Path(__file__).parent / "real" / "engine"


def _real_garbage() -> list[Path]:
    entries = yaml.safe_load((REAL / "manifest.yaml").read_text(encoding="utf-8"))
    return [REAL / e["file"] for e in entries if e["class"] == "bad-output"]


HEALTHY = {
    "english": "The capital of France is Paris. It has been the country's capital since the 10th century and is "
               "home to about two million people.",
    "chinese_with_terms": "使用GPU加速推理时，建议开启CUDA Graph并把max_model_len设为8192。这样TTFT会明显下降，"
                          "吞吐量也会提高。",
    "japanese": "東京は日本の首都です。人口は約千四百万人で、世界でも有数の大都市のひとつです。",
    "korean": "서울은 대한민국의 수도입니다. 인구는 약 천만 명이며 한강이 도시를 가로질러 흐릅니다.",
    "russian": "Москва — столица России. Это крупнейший город страны с населением более двенадцати миллионов.",
    "arabic": "القاهرة هي عاصمة مصر وأكبر مدنها، وتقع على ضفاف نهر النيل.",
    "hindi": "नई दिल्ली भारत की राजधानी है और यह देश के उत्तरी भाग में स्थित है।",
    "german": "Guten Morgen! Die Hauptstadt von Deutschland ist Berlin, die größte Stadt des Landes.",
    "greek_math": "The α-helix and β-sheet are secondary structures; the energy change ΔG = ΔH − TΔS decides "
                  "which one forms.",
    "translation_list": "Hello in three languages: Chinese 你好, Russian Привет, Arabic مرحبا.",
    "python": "def fib(n: int) -> int:\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
              "    return a\n\nprint([fib(i) for i in range(10)])\n",
    "json": '{"ok": true, "items": [{"id": 1, "name": "alpha"}, {"id": 2, "name": "beta"}, '
            '{"id": 3, "name": "gamma"}]}',
    "json_empty": "{}",
    "sql": "SELECT user_id, COUNT(*) AS n\nFROM orders\nWHERE created_at >= '2025-01-01'\nGROUP BY user_id\n"
           "ORDER BY n DESC\nLIMIT 10;",
    "markdown_table": "| model | TTFT p99 | TPOT |\n|---|---|---|\n| llama-8b | 210 ms | 18 ms |\n"
                      "| qwen-7b | 190 ms | 17 ms |\n",
    "list": "1. Check the queue length.\n2. Check the KV cache usage.\n3. Scale out if both are high.\n"
            "4. Cap max_tokens at the gateway.",
    "number": "391",
    "primes": "2, 3, 5, 7, 11",
    "yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: vllm-0\nspec:\n  containers:\n  - name: vllm\n"
            "    image: vllm/vllm-openai:v0.9.1\n",
    "long_prose": (
        "On-call engineers read dashboards, logs and node output to decide what is wrong. A queue that grows "
        "while the KV cache is full means the fleet needs more capacity, and the quickest fix is to add replicas "
        "before touching any setting. A flat token counter with requests in flight means the engine is stuck; "
        "restarting the whole tensor-parallel group clears it, and a stack dump taken first says where it hung. "
        "Wrong answers from one GPU point at its memory, while garbage from every pod of one revision points at "
        "the rollout. Each of these has a different emergency fix, so telling them apart matters more than "
        "acting fast, and every claim in the report should name the evidence it rests on."
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_normal_answers_are_not_garbage(name: str) -> None:
    g = outputs.garbage(HEALTHY[name])
    assert not g.garbage, g


def test_translation_prompt_allows_another_script() -> None:
    g = outputs.garbage("おはようございます。今日もよろしくお願いします。",
                        prompt="Translate 'good morning' into Japanese.")
    assert not g.garbage
    mismatch = outputs.garbage("Доброе утро, как ваши дела сегодня? Надеюсь, всё хорошо.",
                               prompt="What is the capital of France? Answer in one word please.")
    assert "script_mismatch" in mismatch.reasons


@pytest.mark.parametrize(("text", "reason"), [
    (" is is is is is is is is is is is is is is is is is is is is is is", "repetition"),
    ("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!", "one_character"),
    ("<|reserved_special_token_12|><|reserved_special_token_12|>", "special_tokens"),
    ("The answer is\x00\x00\x00\x01 here", "control_characters"),
    ("\ufffd\ufffd\ufffd\ufffd abc", "replacement_characters"),
    ("Привет世界helloมนุษย์ текст中文mixed ภาษาword кот猫cat", "mixed_scripts"),
    ("   ", "empty"),
    (", ; . , :", "no_words"),
])
def test_each_garbage_class(text: str, reason: str) -> None:
    g = outputs.garbage(text)
    assert g.garbage and reason in g.reasons, g


def test_constant_token_ids() -> None:
    g = outputs.garbage("", token_ids=[0, 0, 0, 0, 0, 0, 0, 0])
    assert {"empty", "constant_token_ids"} <= set(g.reasons)


@pytest.mark.parametrize("path", _real_garbage(), ids=lambda p: p.name)
def test_real_garbage_samples(path: Path) -> None:
    f = classify.classify_file(path)
    if path.name == "mixtral_word_salad_vllm_2714.txt":
        pytest.xfail("Latin-script word salad: no measure here tells it from text without a language model")
    assert (f.category, f.incident_hint) == ("bad-output", "bad-model-rollout"), (f.kind, f.facts)


def _completion(text: str, model: str = "m", ids: list[int] | None = None) -> dict[str, object]:
    choice: dict[str, object] = {"index": 0, "text": text, "finish_reason": "length"}
    if ids is not None:
        choice["token_ids"] = ids
    return {"id": "cmpl-1", "object": "text_completion", "model": model, "choices": [choice]}


def test_jsonl_per_revision(tmp_path: Path) -> None:
    rows = []
    for i in range(10):
        rows.append({"revision": "v1", "prompt": "Say hi", "response": _completion(f"Hello there, number {i}.")})
        bad = "the the the the the the the the the the the the the the the" if i < 6 else f"Hi {i}!"
        rows.append({"revision": "v2", "prompt": "Say hi", "response": _completion(bad)})
    p = tmp_path / "samples.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    f = classify.classify_file(p)
    assert (f.kind, f.incident_hint, f.category) == ("garbage_outputs", "bad-model-rollout", "bad-output")
    assert f.facts["worst_revision"] == "v2"
    assert f.facts["revisions"]["v1"]["garbage_rate"] == 0.0
    assert f.facts["revisions"]["v2"]["garbage_rate"] == 0.6
    assert f.facts["revisions"]["v2"]["reasons"] == {"repetition": 6}
    assert len(f.lines) == 6


def test_chat_responses_and_healthy_file(tmp_path: Path) -> None:
    chat = {"object": "chat.completion", "model": "qwen", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": HEALTHY["chinese_with_terms"]}}]}
    p = tmp_path / "chat.json"
    p.write_text(json.dumps([chat, chat]), encoding="utf-8")
    f = classify.classify_file(p)
    assert (f.kind, f.benign) == ("model_outputs_ok", True)
    assert f.facts["revisions"] == {"model:qwen": {"samples": 2, "garbage": 0, "garbage_rate": 0.0, "reasons": {}}}


def test_vllm_request_log_pairs_prompt_and_output() -> None:
    log = (
        "INFO 05-01 10:00:00 [logger.py:41] Received request cmpl-7: prompt: 'What is 2+2? Answer briefly.', "
        "params: SamplingParams(n=1)\n"
        "INFO 05-01 10:00:01 [logger.py:80] Generated response cmpl-7: output: '!!!!!!!!!!!!!!!!', "
        "output_token_ids: [0, 0, 0, 0, 0, 0, 0, 0], finish_reason: length\n"
    )
    samples, fmt = outputs.samples_of(log)
    assert fmt == "log" and samples[0].prompt == "What is 2+2? Answer briefly."
    assert samples[0].token_ids == (0,) * 8
    f = classify.classify_text(log, "requests.log")
    assert f.category == "bad-output" and f.lines == (2,)


def test_a_log_is_not_read_as_a_model_output() -> None:
    log = "\n".join(f"INFO 05-01 10:00:{i:02d} [loggers.py:123] heartbeat ok" for i in range(40))
    assert classify.classify_text(log, "x").category != "bad-output"


def test_golden_prober_counts_garbage() -> None:
    prober = GoldenProber({"m": {"p": "Paris"}}, prompts=("p",), garbage=outputs.is_garbage)
    prober.judge("pod-a", "r2", "m", "p", "!!!!!!!!!!!!!!!!")
    prober.judge("pod-a", "r2", "m", "p", "Paris")
    page = prober.render()
    assert 'llm_oncall_probe_garbage_total{pod="pod-a",revision="r2"} 1.0' in page
