"""On-call training in the console: over HTTP (forms, CSRF, htmx partials), then in headless Chromium."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.testkit import wait_for
from tests.web.conftest import API, csrf_of, login
from tests.web.test_browser import browser_factory, full_shot, shots_dir, unlabelled

__all__ = ["browser_factory"]  # the Chromium fixture, shared with test_browser


def test_training_over_http(start_console: Any) -> None:
    svc = start_console()
    c = login(svc, API, by="trainee-1")
    r = c.get("/training")
    assert r.status_code == 200 and "Start a training run" in r.text and 'id="trainer"' not in r.text
    csrf = csrf_of(r.text)
    assert c.post("/training", data={"csrf": "wrong", "incident": "gpu-ecc", "seed": "7"}).status_code == 403
    assert c.post("/training", data={"csrf": csrf, "incident": "nope", "seed": "7"}).status_code == 400
    assert c.post("/training/command", data={"csrf": csrf, "line": "hint"}).status_code == 409
    r = c.post("/training", data={"csrf": csrf, "incident": "gpu-ecc", "seed": "7"}, timeout=120)
    assert r.status_code == 303
    r = c.get("/training")
    assert "LLMServingSymptoms" in r.text and "gpu-ecc" not in r.text.split('id="page"')[1][:400]
    r = c.post("/training/command", data={"csrf": csrf, "line": "run dmesg --node gpu-node-00"},
               headers={"HX-Request": "true"}, timeout=60)
    assert r.status_code == 200 and "NVRM: Xid" in r.text and "<html" not in r.text
    for line in ("diagnose gpu-ecc", "act gpu_repair"):
        assert c.post("/training/command", data={"csrf": csrf, "line": line}, timeout=60).status_code == 303
    r = c.post("/training/finish", data={"csrf": csrf}, timeout=300)
    assert r.status_code == 303
    page = c.get("/training").text
    assert 'id="report"' in page and "# On-call training: gpu-ecc (seed 7)" in page
    assert "What the autopilot did (same seed)" in page
    assert c.post("/training/command", data={"csrf": csrf, "line": "hint"}).status_code == 409  # finished
    # Stopping the service stops each training run's simulated fleet and its Kubernetes API.
    trainings = next(stop.__self__ for stop in svc.on_stop if getattr(stop, "__name__", "") == "close")
    assert trainings.runs
    svc.stop()
    assert not trainings.runs


def test_training_in_the_browser(start_console: Any, browser_factory: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    shots = shots_dir(tmp_path)
    svc = start_console()
    d = browser_factory(1280)
    d.get(f"{svc.url}/login")
    d.find_element(By.ID, "token").send_keys(API, Keys.ENTER)
    wait_for(lambda: d.current_url.endswith("/incidents"), 10, "the incidents page")
    d.find_element(By.LINK_TEXT, "Training").click()
    wait_for(lambda: d.current_url.endswith("/training"), 10, "the training page")
    assert not unlabelled(d)
    Select(d.find_element(By.ID, "incident")).select_by_value("engine-hang")
    d.find_element(By.CSS_SELECTOR, ".train-form button[type=submit]").click()
    wait_for(lambda: d.find_elements(By.ID, "line"), 120, "the page and the command line")
    assert d.find_element(By.ID, "page").text.startswith("[FIRING:")
    d.execute_script("window.__same_page = true")
    for n, line in enumerate(("run py-spy dump --pod vllm-llama-8b-0", "diagnose engine-hang vllm-llama-8b-0",
                              "act restart_group"), 1):
        box = d.find_element(By.ID, "line")
        box.send_keys(line, Keys.ENTER)  # htmx swaps the transcript in, with a fresh (autofocused) command line
        wait_for(lambda n=n: len(d.find_elements(By.CSS_SELECTOR, "ol.transcript li")) == n, 60, f"step {n}")
    assert d.execute_script("return window.__same_page === true")
    steps = d.find_elements(By.CSS_SELECTOR, "ol.transcript li")
    assert "all_reduce" in steps[0].text
    assert "restart_group Pod/llm/vllm-llama-8b-0: executed" in steps[2].text
    assert not unlabelled(d)
    full_shot(d, shots / "training-1280.png", 1280)
    d.find_element(By.CSS_SELECTOR, ".finish-form button[type=submit]").click()
    wait_for(lambda: d.find_elements(By.ID, "report"), 300, "the training report")
    report = d.find_element(By.ID, "report").text
    assert report.startswith("# On-call training: engine-hang (seed 7)")
    assert "diagnosis **engine-hang** (correct)" in report and "0 harmful action(s)" in report
    full_shot(d, shots / "training-report-1280.png", 1280)
