"""The Space in a real browser: `python space/app.py` served locally against the Hub emulator, driven by the
distribution's headless Chromium through Playwright, as a user who never opened a terminal would use it.

Sign in (Gradio's local mock), name a model and see the advisor's table, pad it at TP 3 and watch the progress move,
then `hubpad verify` the derivative; the same as a job on Hugging Face Jobs in the user's namespace (the emulator's
Jobs run this checkout's hubpad), kept up to date by one schedule; the three refusals a user meets (gated, a target
they cannot write to, a model that cannot be padded); two users in the queue; and the Space restarting in the middle
of a run.

The screenshot in the README is this test's: HUBPAD_UPDATE_SCREENSHOT=1 writes it to docs/space.png.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import tempfile
import time
from pathlib import Path

import pytest

from tests.emulator_fixtures import ALICE, ALICE_TOKEN
from tests.helpers import ROOT, cli_subprocess, tool_missing
from tests.space_browser import Page, chromium, launch, signed_session_cookie
from tests.space_fixtures import (CAROL, CAROL_TOKEN, FOREIGN, GATED, REFUSED, UPSTREAM, app_env, free_port,
                                  space_world, start_app)

SCREENSHOT = ROOT / "docs" / "space.png"


@pytest.fixture(scope="module")
def browser_tools():
    if importlib.util.find_spec("playwright") is None or importlib.util.find_spec("gradio") is None:
        tool_missing("playwright and gradio are not installed (requirements/test.txt locks them)")
    if chromium() is None:
        tool_missing("no Chromium from the distribution (apt-get install chromium; .ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """An emulator of its own for the module (the page's process talks to it over HTTP)."""
    hub = space_world(tmp_path_factory.mktemp("space-world"))
    try:
        yield hub
    finally:
        hub.stop()


class App:
    """`python space/app.py` in a process of its own; restartable on the same port (same origin for the browser)."""

    def __init__(self, world, name: str) -> None:
        self.port = free_port()
        self.url = f"http://localhost:{self.port}/"
        self.log = world.tmp / f"{name}.log"
        self.env = app_env(world, world.tmp / "hf_home", self.port)
        self.proc = None

    def start(self) -> "App":
        self.proc = start_app(self.env, self.log)
        return self

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except Exception:  # noqa: BLE001
                self.proc.kill()


@pytest.fixture(scope="module")
def app(world, browser_tools):
    served = App(world, "app").start()
    try:
        yield served
    finally:
        served.stop()
        log = served.log.read_text()
        assert ALICE_TOKEN not in log and CAROL_TOKEN not in log, "a token reached the Space's log"


@pytest.fixture
def throttled(world, request):
    """Slow downloads (3 MB/s, or the test's `rate` mark) so that a run lasts long enough to watch: progress, the
    queue, a restart."""
    mark = request.node.get_closest_marker("rate")
    world.set_throttle(down_bytes_per_s=mark.args[0] if mark else 3_000_000)
    yield world
    world.set_throttle(None, None)


def _browser(browser_tools, name: str):
    return launch(browser_tools, Path(tempfile.mkdtemp(prefix=f"hubpad-chromium-{name}-")))


def _verify(world, target: str) -> None:
    env = {"HF_ENDPOINT": world.endpoint, "HF_TOKEN": ALICE_TOKEN, "HF_HUB_DISABLE_XET": "1",
           "HF_HOME": str(world.tmp / "hf_home")}
    r = cli_subprocess("verify", UPSTREAM, target, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    for path in world.files(target):
        assert ALICE_TOKEN.encode() not in world.file_bytes(target, path), path


def _staged(world, target: str) -> int:
    if not world.repo_exists(target) or "hubpad-staging" not in world.branches(target):
        return 0
    return sum(p.startswith(".hubpad-staging/") for p in world.files(target, "hubpad-staging"))


def test_sign_in_advisor_and_pad_at_tp3(world, app, browser_tools, throttled):
    context = _browser(browser_tools, "alice")
    try:
        page = Page(context.new_page(), app.url).open()
        assert "Sign in with Hugging Face first" in page.signed_in_as()
        # Name the model: the Hub's suggestions, then the advisor's table within seconds (no sign-in needed to look)
        started = time.monotonic()
        page.pick_model(UPSTREAM, typed="tiny")
        page.advice().locator("table").wait_for(timeout=30_000)
        assert time.monotonic() - started < 15
        assert page.target().input_value() == "Tiny-Hy3-TP3"
        # Signing in reloads the page: the model stays picked, and the copy's name gets the user's namespace
        page.sign_in()
        assert page.signed_in_as() == f"Signed in as {ALICE}: padded copies are published to your account."
        page.advice().locator("table").wait_for(timeout=30_000)
        page.page.wait_for_function("document.querySelector('#hp-target input, #hp-target textarea').value"
                                    f" === '{ALICE}/Tiny-Hy3-TP3'", timeout=30_000)
        rows = page.advice().locator("tbody tr")
        assert rows.count() == 8
        assert rows.nth(2).get_attribute("data-verdict") == "pad" and "heads 4→6, kv 2→3" in rows.nth(2).inner_text()
        assert rows.nth(6).get_attribute("data-verdict") == "cannot"
        assert page.page.locator("#hp-tp input[type=radio]:checked").get_attribute("value") == "3"
        assert page.target().input_value() == f"{ALICE}/Tiny-Hy3-TP3"
        page.page.get_by_text(f"{ALICE}/Tiny-Hy3-TP3 does not exist yet: Pad creates it.").wait_for()
        # Pad: the progress moves, in the CLI's words
        page.pad()
        seen = set()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            text = page.run_text()
            seen.update(re.findall(r"model-\d{5}-of-\d{5}\.safetensors \[[#.]+\]\s+[\d.]+% [\d.]+ [KM]?B/[\d.]+ [KM]B "
                                   r"[\d.]+ [KM]?B/s ETA \S+", text))
            if "Done" in text:
                break
            time.sleep(0.25)
        assert len(seen) >= 2, seen  # several different progress lines were shown while it ran
        text = page.wait_run("Done")
        assert f"{ALICE}/Tiny-Hy3-TP3 is published (5 shard(s) built, 0 kept)" in text
        for way in ("Sparkrun, on 3 DGX Sparks", "One machine with the GPUs", "3 machines, without sparkrun"):
            assert way in text
        assert page.page.locator(f'#hp-run a[href="{world.endpoint}/{ALICE}/Tiny-Hy3-TP3"]').count() == 1
        assert "vllm serve alice/Tiny-Hy3-TP3" in text and "--tensor-parallel-size 3" in text
        page.page.locator("#hp-fresh-box").get_by_text("Keep it up to date").click()
        page.page.get_by_text("upstream: RedHatAI/Tiny-Hy3").first.wait_for()
        shot = SCREENSHOT if os.environ.get("HUBPAD_UPDATE_SCREENSHOT") == "1" else world.tmp / "space.png"
        page.page.screenshot(path=str(shot), full_page=True)
        assert ALICE_TOKEN not in page.html()
    finally:
        context.close()
    _verify(world, f"{ALICE}/Tiny-Hy3-TP3")


def test_run_it_as_a_job_and_keep_it_up_to_date(world, app, browser_tools):
    target = f"{ALICE}/Tiny-Hy3-Job"
    name = "refresh-alice-Tiny-Hy3-Job"
    context = _browser(browser_tools, "job")
    try:
        page = Page(context.new_page(), app.url).open()
        page.sign_in()
        page.fill_form(UPSTREAM, target)
        # The hubpad.yaml and the workflow for a repository of one's own are there before anything is pressed
        page.page.locator("#hp-fresh-box").get_by_text("Keep it up to date from a repository").click()
        page.page.locator("#hp-fresh-yaml").get_by_text(f"target: {target}").wait_for(timeout=30_000)
        page.run_as_job()
        page.keep_up_to_date()
        page.pad()
        said = page.page.locator("#hp-fresh-note .hp-done")
        said.wait_for(timeout=60_000)
        assert said.inner_text().startswith(f"Kept up to date: every 6 hours a job in your account (billed to you) "
                                            f"checks {UPSTREAM} and re-pads {target} when it changed (schedule {name};")
        running = page.wait_run("On Hugging Face Jobs in your account", "Done", timeout=60)
        done = page.wait_run("Done", timeout=180)
        (job,) = [j for j in world.jobs.jobs.values() if j.spec["labels"].get("hubpad") == "mirror"]
        assert job.namespace == ALICE and job.stage == "COMPLETED" and job.spec["flavor"] == "cpu-basic"
        assert f"is published, by job {job.id} ({UPSTREAM}) in your account on Hugging Face Jobs" in done, done
        assert "job " in running
        assert page.page.locator(f'#hp-run a[href="{world.endpoint}/jobs/{ALICE}/{job.id}"]').count() == 1
        assert "vllm serve alice/Tiny-Hy3-Job" in done and "--tensor-parallel-size 3" in done
        page.page.get_by_text("What the run did").click()
        log = page.run_text()
        assert f"started job {job.id} on cpu-basic" in log and re.search(r"model-00005-of-00005\.safetensors: "
                                                                        r"[\d.]+ [KM]B in", log), log
        # Pressed again with the box ticked: nothing to pad (no job), the schedule renewed, still exactly one
        page.pad()
        page.wait_run("already up to date", timeout=60)
        page.page.locator("#hp-fresh-note").get_by_text("Renewed:").wait_for(timeout=30_000)
        assert [s.job_spec["labels"]["hubpad-schedule"] for s in world.jobs.schedules.values()] == [name]
        assert len([j for j in world.jobs.jobs.values() if j.spec["labels"].get("hubpad") == "mirror"]) == 1
        (sched,) = world.jobs.schedules.values()
        for spec in (job.spec, sched.job_spec):
            assert spec["secrets"] == {"HF_TOKEN": ALICE_TOKEN}
            assert ALICE_TOKEN not in str({k: v for k, v in spec.items() if k != "secrets"})
        assert ALICE_TOKEN not in page.html() and ALICE_TOKEN not in world.jobs.log_text(job.id)
    finally:
        context.close()
    _verify(world, target)


def test_the_three_refusals_a_user_meets(world, app, browser_tools):
    context = _browser(browser_tools, "refusals")
    try:
        page = Page(context.new_page(), app.url).open()
        page.sign_in()
        # A gated upstream whose terms alice has not accepted
        page.pick_model(GATED, typed="gated")
        said = page.advice().locator(".hp-error")
        said.wait_for(timeout=30_000)
        assert said.inner_text() == (f"{GATED} is gated: open {world.endpoint}/{GATED}, accept its terms there while "
                                     f"signed in as {ALICE}, then try again (a request its authors approve by hand can "
                                     f"take a while).")
        # A model that cannot be padded at TP 3, with the refusal's reason
        page.pick_model(REFUSED, typed="two")
        page.advice().locator("table").wait_for(timeout=30_000)
        row = page.advice().locator('tr[data-tp="3"]')
        assert row.get_attribute("data-verdict") == "cannot" and "2 routed experts < tp 3" in row.inner_text()
        page.pick_tp(3)
        page.pad()
        error = page.page.locator("#hp-run .hp-error")
        error.wait_for(timeout=30_000)
        assert error.inner_text().startswith(f"{REFUSED} cannot be padded for TP 3: config.json: 2 routed experts "
                                             f"< tp 3")
        # A target alice cannot write to
        page.fill_form(UPSTREAM, FOREIGN)
        page.pad()
        page.page.get_by_text(f"You cannot write to {FOREIGN}: someone is not your account").wait_for(timeout=30_000)
        assert page.page.locator("#hp-run .hp-error").count() == 1
    finally:
        context.close()


@pytest.mark.rate(6_000_000)
def test_two_users_queue(world, app, browser_tools, throttled):
    alice = _browser(browser_tools, "queue-alice")
    carol = _browser(browser_tools, "queue-carol")
    try:
        carol.add_cookies([signed_session_cookie(CAROL, CAROL_TOKEN)])
        first = Page(alice.new_page(), app.url).open()
        first.sign_in()
        second = Page(carol.new_page(), app.url).open()
        assert second.signed_in_as() == f"Signed in as {CAROL}: padded copies are published to your account."
        first.fill_form(UPSTREAM, f"{ALICE}/Tiny-Hy3-Queue")
        second.fill_form(UPSTREAM)  # carol keeps the default name
        assert second.target().input_value() == f"{CAROL}/Tiny-Hy3-TP3"
        first.pad()
        first.wait_run("Running")
        second.pad()
        waiting = second.wait_run("Waiting in the queue")
        assert "you are number 1 (1 run(s) ahead of yours" in waiting
        second.page.locator("#hp-queue").get_by_text("The Space is padding a model now; 1 run(s) wait after it.",
                                                     exact=True).wait_for(timeout=10_000)
        assert "Done" in first.wait_run("Done")
        assert "Running" in second.wait_run("Running", "Done")
        assert f"{CAROL}/Tiny-Hy3-TP3 is published" in second.wait_run("Done")
        assert CAROL_TOKEN not in second.html() and ALICE_TOKEN not in first.html()
    finally:
        alice.close()
        carol.close()
    _verify(world, f"{CAROL}/Tiny-Hy3-TP3")


@pytest.mark.rate(6_000_000)
def test_the_space_restarting_mid_run_says_so_and_pad_resumes(world, browser_tools, throttled):
    own = App(world, "restart").start()
    target = f"{ALICE}/Tiny-Hy3-Restart"
    context = _browser(browser_tools, "restart")
    try:
        page = Page(context.new_page(), own.url).open()
        page.sign_in()
        page.fill_form(UPSTREAM, target)
        page.pad()
        deadline = time.monotonic() + 60
        while _staged(world, target) < 1:  # at least one finished shard kept on the Hub
            assert time.monotonic() < deadline, page.run_text()
            time.sleep(0.05)
        own.kill()  # the Space restarts: its process and everything in it are gone
        own.start()
        page.page.reload()
        said = page.wait_run("stopped before it finished", timeout=60)
        assert re.search(r"most likely because the Space restarted\. \d+ finished shard\(s\) are safe on the Hub: "
                         r"press Pad to resume", said), said
        # The form is filled again with that run's choices: one press resumes it
        page.advice().locator('tr[data-tp="3"][data-verdict="pad"]').wait_for(timeout=30_000)
        assert page.target().input_value() == target
        page.pad()
        done = page.wait_run("Done")
        assert re.search(r"\(\d shard\(s\) built, [1-9] kept\)", done), done
        page.page.get_by_text("What the run did").click()
        assert "resuming: " in page.run_text()
    finally:
        context.close()
        own.stop()
    _verify(world, target)
