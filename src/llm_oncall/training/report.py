"""The training report (Markdown): the page, what the trainee did and when, what the runbook suggests, what the
autopilot did on the same seed, and the gap."""

from __future__ import annotations

from llm_oncall.runbooks.loader import load_registry
from llm_oncall.training.session import COSTS, Result


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f} s"


def _gap(trainee: float | None, autopilot: float | None) -> str:
    if trainee is None or autopilot is None:
        return "—"
    d = trainee - autopilot
    return f"{d:+.0f} s"


def render(r: Result, max_output_lines: int = 6) -> str:
    ap = r.autopilot
    rb = load_registry().get(r.incident)
    out = [f"# On-call training: {r.incident} (seed {r.seed})", "",
           f"Score **{r.score}/100** · diagnosis **{r.diagnosed or 'none'}** "
           f"({'correct' if r.correct else 'wrong'}) · {len(r.harmful)} harmful action(s) · {r.hints} hint(s)", "",
           "## The page", "", "```", r.page, "```", "",
           "## Scores", "", "| | trainee | autopilot | gap |", "|---|---|---|---|",
           f"| diagnosis | {r.diagnosed or '—'} | {ap.get('diagnosed') or '—'} | |",
           f"| time to diagnosis | {_s(r.seconds_to_diagnosis)} | {_s(ap.get('seconds_to_diagnosis'))} | "
           f"{_gap(r.seconds_to_diagnosis, ap.get('seconds_to_diagnosis'))} |",
           f"| time to first action | {_s(r.seconds_to_first_action)} | {_s(ap.get('seconds_to_first_action'))} | "
           f"{_gap(r.seconds_to_first_action, ap.get('seconds_to_first_action'))} |",
           f"| time to mitigation | {_s(r.seconds_to_mitigation)} | {_s(ap.get('seconds_to_mitigation'))} | "
           f"{_gap(r.seconds_to_mitigation, ap.get('seconds_to_mitigation'))} |",
           f"| harmful actions | {len(r.harmful)} | 0 | |", f"| hints | {r.hints} | — | |", "",
           "Times are seconds from the fault's onset on the simulator's clock; each command costs simulated time "
           f"({', '.join(f'{k} {v:.0f} s' for k, v in COSTS.items())}).", "",
           "## Timeline of the trainee", "", "| t | command | result |", "|---|---|---|"]
    for s in r.steps:
        first = [ln for ln in s.output.splitlines() if ln.strip()][:1]
        if s.status == "error":  # what went wrong, in the trainee's words of the tool
            result = f"error: {first[0].removeprefix('error: ')[:90]}" if first else "error"
        else:
            result = s.status if s.kind == "act" else (first[0][:90] if first else "")
        cmd, res = s.command.replace("|", "\\|"), result.replace("|", "\\|")
        out.append(f"| {s.t:.0f} s | `{cmd}` | {res} |")
    if r.harmful:
        out += ["", "Actions that hurt:", ""] + [f"- {h['kind']} {h['target']}: {h['why']}" for h in r.harmful]
    out += ["", "## What the runbook suggests", ""]
    if rb is not None:
        out += [f"Runbook `{rb.id}`: {rb.title.get('en')}", "", "Triage:", ""]
        for c in rb.triage:
            how = f"`query {c.signal}`" if c.signal else "`run " + " ".join(c.command or []) + "`"
            out.append(f"- {c.name}: {how} — {c.meaning.get('en')}")
        out += ["", "Emergency actions:", ""] + [f"- `act {a.action}` — {a.text.get('en')}" for a in rb.emergency]
    out += ["", "## What the autopilot did (same seed)", ""]
    if ap:
        out.append(f"Diagnosed {ap.get('diagnosed') or 'nothing'} {_s(ap.get('seconds_to_diagnosis'))} after onset; "
                   f"first action {_s(ap.get('seconds_to_first_action'))}; mitigated "
                   f"{_s(ap.get('seconds_to_mitigation'))}.")
        out += [""] + [f"- {a['runbook_action']} → {a['kind']} {a['target']}: {a['status']}"
                       for a in ap.get("actions", [])]
    else:
        out.append("(not run)")
    out += ["", "## The gap", "", *_lessons(r)]
    return "\n".join(out) + "\n"


def _lessons(r: Result) -> list[str]:
    ap = r.autopilot
    notes = []
    if not r.correct:
        notes.append(f"- The diagnosis was {r.diagnosed or 'never given'}; the fault was {r.incident}.")
    fixes = {a["runbook_action"] for a in ap.get("actions", []) if a["status"] == "executed"}
    mine = {a["runbook_action"] for a in r.actions if a["status"] == "executed"}
    if fixes - mine:
        notes.append(f"- The autopilot also executed: {', '.join(sorted(fixes - mine))}.")
    if r.harmful:
        notes.append(f"- {len(r.harmful)} action(s) changed the fleet without fixing the fault.")
    t, a = r.seconds_to_mitigation, ap.get("seconds_to_mitigation")
    if t is not None and a is not None:
        notes.append(f"- Mitigation took {t:.0f} s against the autopilot's {a:.0f} s ({t - a:+.0f} s).")
    elif t is None:
        notes.append("- The fault was not mitigated within the run.")
    if r.hints:
        notes.append(f"- {r.hints} hint(s) taken.")
    return notes or ["- None: as fast and as right as the autopilot."]
