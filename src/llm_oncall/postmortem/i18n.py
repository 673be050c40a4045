"""The postmortem's words in English and Chinese (`--lang zh`), like the runbooks' `{en, zh}` texts.

What the record quotes (the diagnosis summary, evidence, the guard's reasons) stays as recorded; headings, labels
and the sentences the postmortem composes are translated here, and runbook texts come in the chosen language.
"""

from __future__ import annotations

from typing import Any

LANGS = ("en", "zh")

TEXT: dict[str, dict[str, str]] = {
    "en": {
        "doc_title": "Postmortem: {title}",
        "id": "Incident id", "incident": "Incident", "status": "Status", "authors": "Authors",
        "authors_value": "llm-oncall, draft for review", "date": "Date (UTC)", "drill": "Drill",
        "drill_value": "yes — a simulated fleet (seed {seed}); the injected fault: {incident} at {onset}",
        "summary": "Summary", "impact": "Impact", "root_causes": "Root cause(s)", "trigger": "Trigger",
        "detection": "Detection", "response": "Response and resolution", "timeline": "Timeline (UTC)",
        "evidence": "Evidence", "ruled_out": "Ruled-out hypotheses", "lessons": "Lessons learned",
        "well": "What went well", "wrong": "What went wrong", "lucky": "Where we got lucky",
        "items": "Action items", "charts": "Charts", "method": "How this was estimated",
        "todo": "TODO (humans)", "owner_tbd": "TBD (owner)",
        "summary_text": "{what} ({incident}, confidence {confidence}). Paged at {page} UTC, {mttd}. {response} "
                        "{recovery}",
        "mttd_after": "{s} after the first symptom in the telemetry",
        "mttd_unknown": "the first symptom is not in the recorded telemetry",
        "resp_actions": "The autopilot executed {n} action(s): {kinds}.",
        "resp_none": "No action was executed.",
        "recovered_after": "The user-facing signal recovered {s} after the first symptom.",
        "not_recovered": "No recovery is recorded.",
        "imp_slo": "SLO minutes burned: {m} ({bad} of {n} scrape intervals violated the SLO)",
        "imp_total": "Requests in the window: ≈ {n}",
        "imp_affected": "Requests affected (arrived while the SLO was violated, upper bound): ≈ {n}",
        "imp_failed": "Requests failed (5xx, engine errors, aborts): ≈ {n}",
        "imp_retries": "Retries among the requests (the same users counted again): ≈ {n}",
        "imp_ttft": "TTFT p99 peak {peak} vs baseline {base}",
        "imp_err": "Error share peak {peak}",
        "imp_window": "Window: {start} → {end} UTC",
        "imp_slo_back": "User-facing SLO held again from {t} UTC ({s} after the first symptom)",
        "imp_slo_never": "User-facing SLO not met again within the record (it ends {t} UTC)",
        "imp_after": "SLO minutes burned after the recovery signal was back: {m}",
        "imp_scope": "Requests served by the scoped pod(s) ({pods}) until the first action: ≈ {n} (exposed to wrong "
                     "answers, which the latency and error objectives do not see)",
        "imp_quality": "Of those, with a quality violation (the worst revision's format/repetition/control-character "
                       "share): ≈ {n}",
        "wrong_after": "The recovery signal came back at {t} UTC while users still saw the incident: {m} SLO minutes "
                       "were burned after it.",
        "wrong_follow_on": "After the fix the fleet paged {incident} at {t} UTC (a consequence of the fix?).",
        "item_prevent_what_if": " — what-if `{fix}` (seed {seed}, {on}): SLO minutes {slo0} → {slo1}, failed requests "
                                "{f0} → {f1}, pages {p0} → {p1}",
        "item_prevent_what_if_worse": "; worse than without it as modelled: size the fix before adopting it",
        "item_prevent_follow_on": "The fix was followed by a {incident} page at {t} UTC: make the emergency fix "
                                  "avoid it, or expect it in the runbook",
        "item_detect_verify": "Verify {incident}'s fixes on the user-facing SLO too: the recovery signal was back "
                              "while "
                              "the SLO was still violated ({m} min)",
        "imp_none": "No telemetry was recorded for this incident's window: impact unknown.",
        "slo_default": "the default objectives (TTFT/ITL p99 at 3×/2× the pre-incident baseline, ≥ 5 % errors, "
                       "successes halved with demand intact, pods lost)",
        "slo_configured": "the configured SLO (TTFT p99 ≤ {ttft}, errors < {err}) and the default objectives",
        "method_text": "Per-scrape fleet telemetry from the first symptom to the resolution (or the end of the "
                       "record), judged against {slo}. "
                       "SLO minutes = the intervals in violation; requests = arrival rate × interval; affected = "
                       "those arriving in violating intervals (an upper bound: quantiles, not per-request "
                       "latencies, are kept); failed = error share × arrivals.",
        "trigger_change": "{kind} at {t} UTC, {ago} before the first symptom: {detail}",
        "trigger_none": "No deploy, rollout or config change is recorded before the first symptom.",
        "trigger_cause": "The diagnosis attributes the onset to: {cause}",
        "det_how": "Detected by llm-oncall's autopilot on {signals}; paged at {page} UTC.",
        "det_mttd": "Time to detect: {s} from the first symptom ({n} scrape interval(s) of {iv}).",
        "det_truth": "Drill ground truth: the fault was injected at {t} UTC ({s} before the page).",
        "det_first_unknown": "The first page named no runbook (`unknown`); the runbook was named at {t} UTC.",
        "det_diag": "Diagnosed as {incident} at {t} UTC (confidence {c}).",
        "col_when": "When", "col_who": "Who", "col_what": "What", "col_dry": "Dry run", "col_approval": "Approval",
        "col_outcome": "Outcome", "col_verify": "Verification", "col_event": "Event", "col_detail": "Detail",
        "col_signal": "Signal", "col_value": "Value", "col_baseline": "Baseline", "col_source": "Source",
        "col_finding": "Finding", "col_incident": "Hypothesis", "col_why": "Why ruled out", "col_type": "Type",
        "col_item": "Action item", "col_owner": "Owner", "col_from": "From",
        "manual": "Manual step (not automated): {text}",
        "ev_fault": "drill: fault injected (ground truth, not seen by the autopilot)",
        "ev_symptom": "first symptom in the telemetry", "ev_page": "page: incident opened ({incident})",
        "ev_diagnosis": "diagnosis: {incident} ({c})", "ev_plan": "plan {plan}: {kinds}",
        "ev_action": "action {kind} on {target}: {status}", "ev_verify": "verification of {kind}: {verdict}",
        "ev_recovery": "recovery: {detail}", "ev_status": "status → {status}: {why}",
        "ev_alert": "alert {name} {status}",
        "ev_approval": "approval of {action}: {decision}", "ev_notify": "notification: {detail}",
        "ev_change": "cluster event {kind}: {detail}",
        "ok": "ok", "failed": "failed", "none": "—",
        "well_mttd": "Detected {s} after the first symptom ({n} scrape interval(s)).",
        "well_diag": "The diagnosis named {incident} with {k} piece(s) of evidence and ruled out {r} look-alike(s).",
        "well_verified": "{kind} was verified: {detail}.",
        "well_ttm": "Recovered {s} after the first symptom, without a human in the loop.",
        "well_ttm_approved": "Recovered {s} after the first symptom; approved by {who}.",
        "ev_effect": "{detail}", "ev_note": "{detail}",
        "wrong_action": "{kind} on {target} ended {status}: {why}.",
        "wrong_verdict": "{kind} was judged {verdict}: {detail}.",
        "wrong_mttd": "Detection took {s} ({n} scrape intervals) after the first symptom.",
        "wrong_unknown": "The first page named no runbook; the runbook was only named {s} later.",
        "wrong_not_recovered": "The record shows no recovery.",
        "wrong_slo": "{m} SLO minutes were burned.",
        "lucky_capped": "{kind} was cut by the policy's caps ({why}) and it was still enough.",
        "wrong_capped": "{kind} was cut by the policy's caps ({why}) and the user-facing SLO did not hold again "
                        "within the record.",
        "item_process_cap": "Review the policy cap on {kind} ({why}): the SLO did not hold again after it",
        "item_mitigate_manual": "Carry out or automate the manual step: {text}",
        "item_mitigate_blocked": "{kind} on {target} did not run ({status}): decide the emergency path for it",
        "item_mitigate_verdict": "{kind} was judged {verdict}: find an emergency fix that helps",
        "item_mitigate_revisit": "Revisit the temporary mitigation still in place: {kind} on {target} ({result})",
        "item_detect_mttd": "Detect earlier: paging took {s} after the first symptom",
        "item_detect_unknown": "Teach the runbook to name this incident on the first page (it paged `unknown` first)",
        "item_detect_rule": "Alert on the runbook's condition in Prometheus (llm-oncall rules export): `{alert}`",
        "item_process_ttm": "Time to mitigate was {s}: review the path from page to fix (approval, policy, cooldowns)",
        "item_process_review": "Review this draft with the on-call team (blameless) and assign the owners",
        "from_runbook": "runbook", "from_record": "record",
        "chart_golden": "Golden signals of the incident window", "chart_pods": "Per pod",
        "mark_onset": "first symptom", "mark_detection": "page", "mark_action": "action", "mark_recovery": "recovery",
        "axis_time": "time (UTC)",
        "sig_ttft_p99": "TTFT p99 (s)", "sig_ttft_p50": "TTFT p50 (s)", "sig_waiting": "waiting requests",
        "sig_waiting_per_pod": "waiting per pod", "sig_kv_max": "KV usage (max pod)",
        "sig_arrival_rate": "request rate (/s)",
        "sig_error_share": "error share", "sig_success_rate": "successes (/s)", "sig_hit_rate": "prefix hit rate",
        "sig_n_stalled": "stalled pods", "sig_pods_up": "pods up", "sig_n_crashloop": "crash-looping pods",
        "sig_retry_share": "retry share", "sig_bad_rev_quality": "worst revision quality violations",
        "sig_probe_mismatch_rate": "probe mismatches (/s)", "sig_prompt_p99": "prompt p99 (tokens)",
        "sig_itl_p99": "ITL p99 (s)", "sig_requests_per_s": "requests (/s)", "sig_up": "up",
        "sig_probe_mismatches_per_s": "probe mismatches (/s)", "sig_kv_usage": "KV usage",
        "sig_n_ecc_gpus": "GPUs with ECC errors", "sig_arrival_rate_ratio": "arrivals vs baseline (×)",
        "sig_nvlink_errors": "NVLink CRC errors", "sig_ttft_ratio": "TTFT p99 vs baseline (×)",
        "sig_kv_median": "KV usage (median pod)", "sig_prompt_shift": "prompt-length shift (×)",
        "sig_miss_ratio": "prefix miss ratio (×)", "sig_hit_rate_drop": "hit-rate drop",
        "sig_log_cuda_graph": "CUDA-graph capture errors in logs", "sig_success_ratio": "successes vs baseline (×)",
        "no_telemetry": "No telemetry recorded for this window: no charts.",
    },
    "zh": {
        "doc_title": "事后复盘：{title}",
        "id": "事件 ID", "incident": "事件类型", "status": "状态", "authors": "作者",
        "authors_value": "llm-oncall，待评审草稿", "date": "日期（UTC）", "drill": "演练",
        "drill_value": "是——模拟集群（种子 {seed}）；注入的故障：{incident}，时间 {onset}",
        "summary": "摘要", "impact": "影响", "root_causes": "根因", "trigger": "触发因素",
        "detection": "发现", "response": "响应与解决", "timeline": "时间线（UTC）",
        "evidence": "证据", "ruled_out": "已排除的假设", "lessons": "经验教训",
        "well": "做得好的", "wrong": "出问题的", "lucky": "侥幸之处",
        "items": "改进项", "charts": "图表", "method": "估算方法",
        "todo": "待补充（人工）", "owner_tbd": "待定（负责人）",
        "summary_text": "{what}（{incident}，置信度 {confidence}）。{page} UTC 告警，{mttd}。{response}{recovery}",
        "mttd_after": "距遥测中的首个症状 {s}",
        "mttd_unknown": "记录的遥测中没有首个症状",
        "resp_actions": "自动驾驶执行了 {n} 个动作：{kinds}。",
        "resp_none": "未执行任何动作。",
        "recovered_after": "用户可见信号在首个症状后 {s} 恢复。",
        "not_recovered": "没有记录到恢复。",
        "imp_slo": "消耗的 SLO 分钟数：{m}（{n} 个采集间隔中有 {bad} 个违反 SLO）",
        "imp_total": "窗口内请求数：约 {n}",
        "imp_affected": "受影响请求（SLO 违反期间到达，上界）：约 {n}",
        "imp_failed": "失败请求（5xx、引擎错误、中止）：约 {n}",
        "imp_retries": "其中的重试请求（同一用户被重复计数）：约 {n}",
        "imp_ttft": "TTFT p99 峰值 {peak}，基线 {base}",
        "imp_err": "错误占比峰值 {peak}",
        "imp_window": "窗口：{start} → {end} UTC",
        "imp_slo_back": "用户侧 SLO 自 {t} UTC 起恢复（首个症状后 {s}）",
        "imp_slo_never": "记录内用户侧 SLO 未恢复（记录止于 {t} UTC）",
        "imp_after": "恢复信号回归后仍消耗的 SLO 分钟数：{m}",
        "imp_scope": "首个动作前受影响 pod（{pods}）处理的请求：约 {n}（可能得到错误答案，延迟与错误目标看不到）",
        "imp_quality": "其中存在质量问题的（最差版本的格式/重复/控制字符占比）：约 {n}",
        "wrong_after": "恢复信号于 {t} UTC 回归，但用户仍受影响：此后又消耗了 {m} 个 SLO 分钟。",
        "wrong_follow_on": "修复后集群于 {t} UTC 又告警 {incident}（是否由修复引起？）。",
        "item_prevent_what_if": " —— 推演 `{fix}`（种子 {seed}，{on}）：SLO 超标分钟 {slo0} → {slo1}，"
                                "失败请求 {f0} → {f1}，告警 {p0} → {p1}",
        "item_prevent_what_if_worse": "；按模型推演反而更差：采用前先确定修复的规模",
        "item_prevent_follow_on": "修复后于 {t} UTC 出现 {incident} 告警：让应急修复避免它，或在 runbook 中预期它",
        "item_detect_verify": "{incident} 的修复也应按用户侧 SLO 验证：恢复信号回归时 SLO 仍被违反（{m} 分钟）",
        "imp_none": "本事件窗口没有记录遥测：影响未知。",
        "slo_default": "默认目标（TTFT/ITL p99 达到事前基线的 3/2 倍、错误 ≥ 5%、需求不变而成功数减半、pod 丢失）",
        "slo_configured": "配置的 SLO（TTFT p99 ≤ {ttft}，错误 < {err}）以及默认目标",
        "method_text": "使用从首个症状到解决（或记录结束）的逐次采集集群遥测，按{slo}判定。"
                       "SLO 分钟 = 违反期间的采集间隔；请求数 = 到达率 × 间隔；"
                       "受影响 = 违反期间到达的请求（上界：只保留分位数，不保留每个请求的延迟）；"
                       "失败 = 错误占比 × 到达数。",
        "trigger_change": "{t} UTC 的 {kind}（首个症状前 {ago}）：{detail}",
        "trigger_none": "首个症状前没有记录到部署、发布或配置变更。",
        "trigger_cause": "诊断将起因归于：{cause}",
        "det_how": "由 llm-oncall 自动驾驶根据 {signals} 发现；{page} UTC 告警。",
        "det_mttd": "发现耗时：距首个症状 {s}（{n} 个 {iv} 的采集间隔）。",
        "det_truth": "演练真值：故障于 {t} UTC 注入（告警前 {s}）。",
        "det_first_unknown": "首次告警未匹配任何 runbook（`unknown`）；{t} UTC 才匹配到 runbook。",
        "det_diag": "{t} UTC 诊断为 {incident}（置信度 {c}）。",
        "col_when": "时间", "col_who": "执行者", "col_what": "内容", "col_dry": "试运行", "col_approval": "审批",
        "col_outcome": "结果", "col_verify": "验证", "col_event": "事件", "col_detail": "详情",
        "col_signal": "信号", "col_value": "值", "col_baseline": "基线", "col_source": "来源",
        "col_finding": "发现", "col_incident": "假设", "col_why": "排除原因", "col_type": "类型",
        "col_item": "改进项", "col_owner": "负责人", "col_from": "来源",
        "manual": "人工步骤（未自动化）：{text}",
        "ev_fault": "演练：注入故障（真值，自动驾驶不可见）",
        "ev_symptom": "遥测中的首个症状", "ev_page": "告警：创建事件（{incident}）",
        "ev_diagnosis": "诊断：{incident}（{c}）", "ev_plan": "计划 {plan}：{kinds}",
        "ev_action": "动作 {kind}，目标 {target}：{status}", "ev_verify": "{kind} 的验证：{verdict}",
        "ev_recovery": "恢复：{detail}", "ev_status": "状态 → {status}：{why}", "ev_alert": "告警 {name} {status}",
        "ev_approval": "{action} 的审批：{decision}", "ev_notify": "通知：{detail}",
        "ev_change": "集群事件 {kind}：{detail}",
        "ok": "成功", "failed": "失败", "none": "—",
        "well_mttd": "首个症状后 {s} 即发现（{n} 个采集间隔）。",
        "well_diag": "诊断给出 {incident}，附 {k} 条证据，并排除了 {r} 个相似事件。",
        "well_verified": "{kind} 已验证：{detail}。",
        "well_ttm": "首个症状后 {s} 恢复，无需人工介入。",
        "well_ttm_approved": "首个症状后 {s} 恢复；由 {who} 审批。",
        "ev_effect": "{detail}", "ev_note": "{detail}",
        "wrong_action": "{kind}（{target}）结束状态为 {status}：{why}。",
        "wrong_verdict": "{kind} 被判定为 {verdict}：{detail}。",
        "wrong_mttd": "首个症状后 {s}（{n} 个采集间隔）才发现。",
        "wrong_unknown": "首次告警未匹配 runbook；{s} 后才匹配到。",
        "wrong_not_recovered": "记录中没有恢复。",
        "wrong_slo": "共消耗了 {m} 个 SLO 分钟。",
        "lucky_capped": "{kind} 被策略上限削减（{why}），但仍然足够。",
        "wrong_capped": "{kind} 被策略上限削减（{why}），记录内用户侧 SLO 未再达标。",
        "item_process_cap": "复查 {kind} 的策略上限（{why}）：此后 SLO 未再达标",
        "item_mitigate_manual": "执行或自动化人工步骤：{text}",
        "item_mitigate_blocked": "{kind}（{target}）未执行（{status}）：确定其应急路径",
        "item_mitigate_verdict": "{kind} 被判定为 {verdict}：寻找有效的应急修复",
        "item_mitigate_revisit": "复查仍在生效的临时缓解措施：{kind}（{target}，{result}）",
        "item_detect_mttd": "更早发现：告警在首个症状后 {s} 才发出",
        "item_detect_unknown": "让 runbook 在首次告警时就识别该事件（首次告警为 `unknown`）",
        "item_detect_rule": "在 Prometheus 中按 runbook 条件告警（llm-oncall rules export）：`{alert}`",
        "item_process_ttm": "缓解耗时 {s}：复查从告警到修复的流程（审批、策略、冷却期）",
        "item_process_review": "与值班团队（无责）评审本草稿并指定负责人",
        "from_runbook": "runbook", "from_record": "记录",
        "chart_golden": "事件窗口的黄金信号", "chart_pods": "各 pod",
        "mark_onset": "首个症状", "mark_detection": "告警", "mark_action": "动作", "mark_recovery": "恢复",
        "axis_time": "时间（UTC）",
        "no_telemetry": "本窗口没有记录遥测：无图表。",
    },
}

ITEM_TYPES = ("mitigate", "prevent", "detect", "process")
TAG_TYPE = {"monitoring": "detect", "process": "process", "drill": "process"}
"""Runbook long-term tags → action-item type (everything else — automation, capacity, config — prevents)."""


def tr(lang: str, key: str, **kw: Any) -> str:
    text = TEXT.get(lang, TEXT["en"]).get(key) or TEXT["en"][key]
    return text.format(**kw) if kw else text


def duration(s: float | None, lang: str = "en") -> str:
    if s is None:
        return "—"
    s = max(0.0, s)
    if s < 90:
        return f"{s:.0f} s" if lang == "en" else f"{s:.0f} 秒"
    return f"{s / 60:.1f} min" if lang == "en" else f"{s / 60:.1f} 分钟"
