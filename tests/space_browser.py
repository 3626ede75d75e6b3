"""A real browser for the Space's tests: the distribution's headless Chromium (Debian's `chromium` package; no browser
is downloaded), driven by Playwright through `executable_path`, and the page's steps as a user takes them."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str | None:
    """The distribution's Chromium: HUBPAD_CHROMIUM, else the first of Debian's and Ubuntu's names on this machine."""
    for candidate in (os.environ.get("HUBPAD_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def launch(playwright, user_data_dir: Path):
    """A persistent context in a fresh profile folder (its own cookies and localStorage: one browser, one user)."""
    return playwright.chromium.launch_persistent_context(
        str(user_data_dir), executable_path=chromium(), args=CHROMIUM_FLAGS, headless=True,
        viewport={"width": 1280, "height": 1000})


def signed_session_cookie(user: str, token: str, host: str = "localhost") -> dict:
    """The session cookie Gradio's OAuth sets after "Sign in with Hugging Face", for another user than the machine's
    (Gradio's local mock signs in one user only). Signed the way gradio/oauth.py's SessionMiddleware signs it:
    starlette's itsdangerous TimestampSigner over base64 JSON, with sha256(OAUTH_CLIENT_SECRET + "-v4") as the key
    (no client secret outside a Space)."""
    from itsdangerous import TimestampSigner

    session = {"oauth_info": {"access_token": token, "token_type": "bearer", "scope": "openid profile",
                              "expires_at": int(time.time()) + 3600,
                              "userinfo": {"name": user.title(), "preferred_username": user,
                                           "profile": f"https://huggingface.co/{user}", "picture": ""}}}
    key = hashlib.sha256(((os.environ.get("OAUTH_CLIENT_SECRET") or "") + "-v4").encode()).hexdigest()
    value = TimestampSigner(key).sign(base64.b64encode(json.dumps(session).encode())).decode()
    # By domain, as the Set-Cookie of a real sign-in lands (Chromium refuses a Secure cookie given with an http URL)
    return {"name": "session", "value": value, "domain": host, "path": "/", "secure": True, "sameSite": "None",
            "httpOnly": True}


class Page:
    """The Space's page in one browser tab, in the words of its steps."""

    def __init__(self, page, url: str) -> None:
        self.page, self.url = page, url

    def open(self) -> "Page":
        self.page.goto(self.url)
        self.page.locator("#hp-pad").wait_for(timeout=60_000)
        self.page.wait_for_function("(document.querySelector('#hp-signed')?.innerText || '').includes('Sign')",
                                    timeout=60_000)  # the page's load event has said who is here
        return self

    def sign_in(self) -> None:
        """Gradio's mocked sign-in (the machine's own Hub login: alice), then the page as it loads again."""
        self.page.get_by_role("button", name="Sign in with Hugging Face").click()
        self.page.get_by_role("button", name="Logout (alice)").wait_for(timeout=60_000)
        self.page.wait_for_function("(document.querySelector('#hp-signed')?.innerText || '').includes('Signed in as')",
                                    timeout=60_000)

    def signed_in_as(self) -> str:
        return self.page.locator("#hp-signed p").inner_text()

    def pick_model(self, repo_id: str, typed: str | None = None) -> None:
        """Type part of the name, then pick it from the Hub's suggestions."""
        box = self.page.locator("#hp-upstream input")
        box.click()
        box.fill("")
        box.type(typed or repo_id.split("/")[1][:6], delay=40)
        self.page.get_by_role("option", name=repo_id, exact=True).click(timeout=30_000)

    def fill_form(self, repo_id: str, target: str | None = None, typed: str = "tiny-hy3") -> None:
        """Name the model, wait for its table to offer TP 3 padded, and name the copy (else keep the default)."""
        self.pick_model(repo_id, typed=typed)
        self.advice().locator('tr[data-tp="3"][data-verdict="pad"]').wait_for(timeout=30_000)
        if target:
            self.set_target(target)

    def advice(self):
        return self.page.locator("#hp-advice")

    def pick_tp(self, tp: int) -> None:
        self.page.locator("#hp-tp label").filter(has_text=f"{tp} (").click()

    def target(self):
        return self.page.locator("#hp-target input, #hp-target textarea").first

    def set_target(self, name: str) -> None:
        self.target().fill(name)
        self.target().press("Enter")

    def run_as_job(self) -> None:
        """Where it runs: a job on Hugging Face Jobs in the user's account."""
        self.page.locator("#hp-route label").filter(has_text="As a job on Hugging Face Jobs").click()

    def keep_up_to_date(self) -> None:
        box = self.page.locator("#hp-keep input[type=checkbox]")
        if not box.is_checked():
            box.check()

    def pad(self) -> None:
        self.page.locator("#hp-pad").click()

    def run_text(self) -> str:
        return self.page.locator("#hp-run").inner_text()

    def wait_run(self, *words: str, timeout: float = 120) -> str:
        """Wait until the run box shows one of `words`; returns its text."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.run_text()
            if any(w in text for w in words):
                return text
            time.sleep(0.2)
        raise AssertionError(f"the page never showed {words}; it shows: {self.run_text()!r}")

    def html(self) -> str:
        return self.page.content()
