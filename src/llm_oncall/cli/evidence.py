"""`llm-oncall evidence ...`: what a log or node-command output file shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from llm_oncall.evidence import catalog, prior
from llm_oncall.evidence.catalog import CatalogError
from llm_oncall.evidence.classify import classify_file, reset_signatures, use_signatures
from llm_oncall.evidence.model import Finding
from llm_oncall.termtable import Column, FitTable

app = typer.Typer(
    help="Classify logs, node command output and sampled model outputs (NCCL, Xid, ECC, NVLink, DCGM, py-spy, "
    "vLLM, SGLang, kubectl, completions).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_console = Console()
_err = Console(stderr=True)

# Facts worth a table cell, in display order; everything else stays in --json.
_KEY_FACTS = (
    "collectives",
    "ranks",
    "mismatch",
    "xids",
    "worst",
    "gpus",
    "summary_hides_fault",
    "errors_by_gpu",
    "errors",
    "fix",
    "after_capture",
    "during_capture",
    "preemptions_logged",
    "max_waiting",
    "max_kv_usage",
    "reasons",
    "exit_codes",
    "restart_count",
    "stuck_threads",
    "area",
    "overall",
    "last_stats",
    "garbage_rate",
    "reasons",
    "worst_revision",
    "first",
)


def _short(value: object, limit: int = 80) -> str:
    if isinstance(value, dict) and {"code", "meaning"} <= value.keys():
        text = f"{value['code']} {value['meaning']}"
    else:
        text = json.dumps(value, default=str, separators=(",", ":")) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


def key_facts(f: Finding, n: int = 4) -> str:
    picked = [k for k in _KEY_FACTS if k in f.facts][:n]
    return "\n".join(f"{k}={_short(f.facts[k])}" for k in picked)


def _lines(f: Finding, n: int = 6) -> str:
    shown = ",".join(str(x) for x in f.lines[:n])
    return shown + ("…" if len(f.lines) > n else "")


def other_findings(f: Finding, n: int = 4) -> str:
    """The file's other findings, most severe first: kind, severity and where."""
    rest = [x for x in f.findings if x is not f and (x.kind, x.lines) != (f.kind, f.lines)]
    out = [f"{x.kind} ({x.severity}{', lines ' + _lines(x) if x.lines else ''})" for x in rest[:n]]
    if len(rest) > n:
        out.append(f"… {len(rest) - n} more")
    return "\n".join(out)


def render_table(findings: list[Finding]) -> FitTable:
    # Ids (kind, hint) never wrap, so they stay greppable in a narrow terminal; the rest wraps or moves below.
    table = FitTable(Column("file", min_width=16), Column("kind", no_wrap=True),
                     Column("benign", no_wrap=True), Column("hint", no_wrap=True, priority=1),
                     Column("confidence", justify="right", no_wrap=True, priority=2),
                     Column("lines", min_width=10, priority=5), Column("key facts", min_width=28, priority=3),
                     Column("also found", min_width=24, priority=4), title="evidence", show_lines=True)
    for f in findings:
        table.add_row(
            f.file,
            f.kind,
            "yes" if f.benign else Text("no", style="bold red"),
            f.incident_hint or "-",
            f"{f.confidence:.2f}",
            _lines(f) or "-",
            key_facts(f),
            other_findings(f),
        )
    return table


@app.callback()
def _group() -> None:
    """Evidence from logs and node command output."""


SignaturesOpt = Annotated[
    list[Path] | None,
    typer.Option("--signatures", help="Directory (or file) of signature YAML that adds or overrides (same id)."),
]


@app.command()
def classify(
    files: Annotated[list[Path], typer.Argument(help="Log, command-output or sampled-output files.",
                                                show_default=False)],
    signatures: SignaturesOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Machine-readable output: a list, one object per file.")
    ] = False,
    use_prior: Annotated[bool | None, typer.Option("--prior/--no-prior", help="Where nothing is recognised, let "
                                                   "the word-level prior answer a failure class at a low confidence "
                                                   "(default: on, adopted in round 3o: docs/evidence.md).",
                                                   show_default=False)] = None,
) -> None:
    """Say what each file shows: kind, benign or not, incident hint, confidence and the facts behind it, and
    every finding of the file with its line numbers (the file is classified by the most severe)."""
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        _err.print(f"[red]error:[/red] no such file: {', '.join(missing)}")
        raise typer.Exit(2)
    if signatures:
        try:
            use_signatures(signatures)
        except CatalogError as exc:
            _err.print(f"error: invalid signatures: {exc}", markup=False, highlight=False)
            raise typer.Exit(2) from exc
    if use_prior and prior.packaged() is None:
        _err.print("[red]error:[/red] no word-level prior model in the package")
        raise typer.Exit(2)
    findings: list[Finding] = []
    try:
        for p in files:
            try:
                findings.append(classify_file(p, word_prior=use_prior))
            except OSError as exc:
                _err.print(f"[red]error:[/red] cannot read {p}: {exc.strerror or exc}")
                raise typer.Exit(2) from exc
    finally:
        if signatures:
            reset_signatures()
    if as_json:
        typer.echo(json.dumps([f.to_json() for f in findings], indent=2, default=str))
    else:
        _console.print(render_table(findings))


signatures_app = typer.Typer(help="The line-signature catalogue.", no_args_is_help=True)
app.add_typer(signatures_app, name="signatures")


@signatures_app.command("check")
def signatures_check(
    dirs: Annotated[list[Path] | None, typer.Argument(help="Signature directories or files to add (default: only "
                                                      "the built-in catalogue).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Validate signatures (schema, references) and run their examples: exit 0 when every example behaves."""
    try:
        sigs = catalog.load(dirs or [])
    except CatalogError as exc:
        _err.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from exc
    problems = catalog.check(sigs)
    if as_json:
        typer.echo(json.dumps({"signatures": len(sigs), "problems": problems}, indent=2))
    else:
        for p in problems:
            _console.print(p, markup=False, highlight=False)
        _console.print(f"{len(sigs)} signatures, {len(problems)} problem(s)")
    if problems:
        raise typer.Exit(1)


@app.command("agreement")
def agreement_cmd(
    labels: Annotated[Path, typer.Argument(help="A second labelling: YAML list of {file, class, sure?, second?, "
                                           "thread_read?, reason?}, file relative to --corpus.",
                                           show_default=False)],
    corpus_dir: Annotated[Path, typer.Option("--corpus", help="The corpus the files belong to (manifest.yaml per "
                                             "folder).")] = Path("tests/evidence/holdout"),
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """How often a second, independent labelling agrees with the corpus's labels: raw agreement, Cohen's kappa,
    agreement where the second labeller was sure, and every disagreement."""
    from llm_oncall.evidence import agreement, corpus

    if not labels.is_file():
        _err.print(f"[red]error:[/red] no such file: {labels}", highlight=False)
        raise typer.Exit(2)
    if not corpus_dir.is_dir():
        _err.print(f"[red]error:[/red] no such corpus directory: {corpus_dir}", highlight=False)
        raise typer.Exit(2)
    try:
        result = agreement.compare(corpus.load(corpus_dir), corpus_dir, agreement.load_second(labels))
    except corpus.CorpusError as exc:
        _err.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
        return
    k = "-" if result.kappa is None else f"{result.kappa:.3f}"
    rate = "-" if result.rate is None else f"{result.rate:.3f}"
    _console.print(f"{result.samples} samples labelled twice: {result.agree} agree ({rate}), Cohen's kappa {k}; "
                   f"where the second labeller was sure: {result.sure_agree}/{result.sure}; benign against failure: "
                   f"{result.benign_agree}/{result.samples}", markup=False, highlight=False)
    for d in result.disagreements:
        _console.print(f"  {d.first} / {d.second}{'' if d.sure else ' (unsure)'}: {d.file}", markup=False,
                       highlight=False, soft_wrap=True)
