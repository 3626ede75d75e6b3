"""The Space's handlers (space/hubpad_space), called directly against the Hub emulator with the real huggingface_hub
client: sign-in, completion, the advisor, every refusal before the queue, a whole run with its progress and links,
the queue, a run lost to a restart, a run as a job on Hugging Face Jobs (the emulator's Jobs run this checkout's
hubpad), the scheduled refresh and what "keep it up to date" shows. The browser drives the same page in
test_space_browser.py."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time

import pytest
import yaml

from tests.emulator_fixtures import ALICE, ALICE_TOKEN, ORG, READER, READER_TOKEN
from tests.helpers import ROOT, cli, tool_missing
from tests.jobs_fixtures import PIN, jobs_hub  # noqa: F401
from tests.space_fixtures import CAROL, CAROL_TOKEN, FOREIGN, GATED, REFUSED, SHARD, UPSTREAM, seed_space_repos

if importlib.util.find_spec("gradio") is None:
    tool_missing("gradio is not installed (requirements/test.txt locks it; the Space's tests need it)")
sys.path.insert(0, str(ROOT / "space"))

import gradio as gr  # noqa: E402

from hubpad.util.sizes import parse_size  # noqa: E402
from hubpad_space import explain, fresh, handlers, view  # noqa: E402
from hubpad_space.card import serve_commands  # noqa: E402
from hubpad_space.job import execute  # noqa: E402
from hubpad_space.on_jobs import mirror_commands  # noqa: E402
from hubpad_space.runs import ON_JOBS, Busy, Request, Run, Runs  # noqa: E402
from hubpad_space.settings import ACTION_PLACEHOLDER, Settings  # noqa: E402

TARGET = f"{ALICE}/Tiny-Hy3-TP3"
ALICE_V = handlers.Visitor(ALICE, ALICE_TOKEN)
SETTINGS = Settings(shard_size=parse_size(SHARD), max_disk=parse_size("10MB"), workdir=None,
                    action=ACTION_PLACEHOLDER)


@pytest.fixture
def world(hub, tmp_path):
    seed_space_repos(hub, tmp_path)
    return hub


@pytest.fixture
def jobs_world(jobs_hub, tmp_path):
    """The Space's repos on an emulator whose Jobs run this checkout's hubpad, pinned to PIN (tests/jobs_fixtures.py)."""
    seed_space_repos(jobs_hub, tmp_path)
    return jobs_hub


def _profile(user: str) -> gr.OAuthProfile:
    return gr.OAuthProfile({"name": user, "preferred_username": user, "profile": "", "picture": ""})


def _wait(run: Run, timeout: float = 120) -> Run:
    deadline = time.monotonic() + timeout
    while run.active and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not run.active, f"run still {run.state} after {timeout}s"
    return run


def _runs() -> Runs:
    return Runs(lambda run: execute(run, SETTINGS))


# ------------------------------------------------------------------------------------------------ who is here


def test_sign_in_maps_gradios_local_mock_to_the_machines_login(hub):
    mock = gr.OAuthToken(token=handlers.GRADIO_MOCK_TOKEN, scope="openid profile", expires_at=0)
    assert handlers.visitor(_profile(ALICE), mock, on_space=False) == handlers.Visitor(ALICE, ALICE_TOKEN)
    # On a Space the token is the user's own, used as given; Gradio's placeholder is never swapped for the machine's
    real = gr.OAuthToken(token=CAROL_TOKEN, scope="openid profile", expires_at=0)
    assert handlers.visitor(_profile(CAROL), real, on_space=True).token == CAROL_TOKEN
    assert handlers.visitor(_profile(ALICE), mock, on_space=True).token == handlers.GRADIO_MOCK_TOKEN
    # Signed out: no token at all, not even the machine's
    anonymous = handlers.visitor(None, None, on_space=False)
    assert anonymous.token is False and not anonymous.signed_in


def test_completion_searches_the_hub_and_hides_private_repos(world):
    world.seed("bob/Tiny-Hy3-Secret", {"README.md": "x"}, private=True)
    found = handlers.suggestions("tiny-hy3", ALICE_V)
    assert found[0] == UPSTREAM  # most downloaded first
    assert {GATED, REFUSED} <= set(found) and "bob/Tiny-Hy3-Secret" not in found
    assert "bob/Tiny-Hy3-Secret" in handlers.suggestions("secret", handlers.Visitor(READER, READER_TOKEN))
    assert handlers.suggestions("t", ALICE_V) == []


# ------------------------------------------------------------------------------------------------ the advisor


def test_advisor_shows_the_cli_table_from_headers_only(world):
    world.reset_log()
    start = time.monotonic()
    advised = handlers.advise_upstream(UPSTREAM, handlers.Visitor(), SETTINGS)  # anonymous: a public model
    assert time.monotonic() - start < 10
    assert advised.error is None
    row = advised.row(3)
    assert row.verdict == "pad" and {d["name"] for d in row.dims} >= {"attention heads", "kv heads"}
    # Headers only: a small part of each weight file was read
    weights = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    served = sum(world.bytes_served(UPSTREAM, f) for f in weights)
    assert served < 0.05 * sum(len(world.file_bytes(UPSTREAM, f)) for f in weights)
    html = view.advisor_table(advised.advice, chosen=3)
    assert 'data-tp="3" data-verdict="pad"' in html and "hp-chosen" in html
    assert "heads 4→6, kv 2→3" in html and "extra KV/token" in html
    # The same cells `hubpad plan SRC` prints
    printed = cli("plan", UPSTREAM).stdout
    assert "pad + vocab patch" in printed and "pad + vocab patch" in html
    assert view.tp_choices(advised.advice)[2] == ("3 (needs padding)", 3) and view.preferred_tp(advised.advice) == 3


def test_advisor_says_why_a_tp_cannot_be_done(world):
    advised = handlers.advise_upstream(REFUSED, ALICE_V, SETTINGS)
    row = advised.row(3)
    assert row.verdict == "cannot" and "2 routed experts < tp 3" in row.why[0]
    assert view.tp_choices(advised.advice)[2] == ("3 (cannot be done)", 3)


@pytest.mark.parametrize("name, words", [
    (GATED, "is gated: open"),
    ("acme/Does-Not-Exist", "was not found on the Hub"),
    ("not a repo", "is not a Hub model id"),
    ("../etc/passwd", "is not a Hub model id"),
])
def test_advisor_errors_are_one_sentence(world, name, words):
    advised = handlers.advise_upstream(name, ALICE_V, SETTINGS)
    assert advised.advice is None and words in advised.error and "\n" not in advised.error
    assert ALICE_TOKEN not in advised.error


def test_gated_upstream_opens_once_accepted(world):
    world.set_gated(GATED, "manual", granted=[ALICE])
    assert handlers.advise_upstream(GATED, ALICE_V, SETTINGS).error is None
    error = handlers.advise_upstream(GATED, handlers.Visitor(CAROL, CAROL_TOKEN), SETTINGS).error
    assert error.startswith(f"{GATED} is gated: open {world.endpoint}/{GATED}, accept its terms there while signed in "
                            f"as {CAROL}")


# ------------------------------------------------------------------------------------------------ before the queue


def _request(**kw):
    args = dict(upstream=UPSTREAM, tp=3, target=TARGET, private=False, draft="", who=ALICE_V, settings=SETTINGS)
    args.update(kw)
    return handlers.make_request(**args)


@pytest.mark.parametrize("kw, words", [
    ({"who": handlers.Visitor()}, handlers.SIGN_IN_FIRST),
    ({"target": FOREIGN}, f"You cannot write to {FOREIGN}: someone is not your account"),
    ({"target": f"{READER}/x", "who": handlers.Visitor(READER, READER_TOKEN)},
     f"Your sign-in does not let this page create repos in {READER}/ (it may only read)"),
    ({"upstream": REFUSED, "target": f"{ALICE}/x"}, f"{REFUSED} cannot be padded for TP 3: config.json: 2 routed "
                                                   f"experts < tp 3"),
    ({"upstream": GATED, "target": f"{ALICE}/x"}, f"{GATED} is gated"),
    ({"tp": 1}, f"{UPSTREAM} already serves at TP 1 as it is: there is nothing to pad"),
    ({"tp": None}, "Pick a tensor-parallel size"),
    ({"target": UPSTREAM}, "needs a name of its own"),
    ({"draft": REFUSED}, f"The draft {REFUSED}: config.json names no speculative-decoding draft"),
])
def test_every_refusal_before_the_queue_is_one_sentence(world, kw, words):
    with pytest.raises(ValueError) as err:
        _request(**kw)
    assert words in str(err.value) and "\n" not in str(err.value) and "Traceback" not in str(err.value)


def test_an_org_member_may_write_into_the_org(world):
    req = _request(target=f"{ORG}/Tiny-Hy3-TP3")
    assert req.target == f"{ORG}/Tiny-Hy3-TP3" and req.user == ALICE


def test_default_targets_follow_the_cli(world):
    assert handlers.default_target(UPSTREAM, 3, ALICE_V) == TARGET
    assert handlers.default_target(UPSTREAM, 3, handlers.Visitor()) == "Tiny-Hy3-TP3"


# ------------------------------------------------------------------------------------------------ a run


def test_a_run_pads_publishes_and_links_the_cards_serve_commands(world, tmp_path):
    runs = _runs()
    req = _request()
    assert handlers.target_status(UPSTREAM, 3, TARGET, ALICE_V) == f"{TARGET} does not exist yet: Pad creates it."
    run = _wait(handlers.start(req, ALICE_V, runs))
    assert run.state == "done", run.error
    assert run.token is None  # dropped as the run ended
    # Progress in the CLI's words (Meter): one final line per built shard
    assert len(run.finished) == 5
    assert all(re.fullmatch(r"model-0000\d-of-00005\.safetensors: [\d.]+ [KM]B in [\d.]+s \([\d.]+ [KM]?B/s\)", line)
               for line in run.finished), run.finished
    result = run.result
    assert result["url"] == f"{world.endpoint}/{TARGET}" and result["built"] == 5 and "moved" not in result
    assert 0 < result["peak_disk"] <= SETTINGS.max_disk  # the scratch disk held to the Space's budget (--max-disk)
    assert not (SETTINGS.scratch() / run.id).exists()
    titles = [w["title"] for w in result["commands"]]
    assert titles == ["sparkrun, on 3 DGX Sparks", "one machine with the GPUs", "3 machines, without sparkrun"]
    card = world.file_bytes(TARGET, "README.md").decode()
    for way in result["commands"]:
        for block in way["code"]:
            assert block in card
    assert any("--tensor-parallel-size 3" in b for b in result["commands"][1]["code"])
    page = view.run_view(run, 0, (False, 0))
    assert 'data-state="done"' in page and f'href="{world.endpoint}/{TARGET}"' in page
    # The derivative passes `hubpad verify`, and no token is anywhere in it, on the page or in the run's notes
    report = cli("verify", UPSTREAM, TARGET)
    assert report.exit_code == 0, report.output
    for path, sha in world.files(TARGET).items():
        assert ALICE_TOKEN.encode() not in world.file_bytes(TARGET, path), path
    assert ALICE_TOKEN not in page + json.dumps(result) + "".join(run.notes)
    assert handlers.target_status(UPSTREAM, 3, TARGET, ALICE_V) == (f"{TARGET} is up to date with {UPSTREAM}: Pad "
                                                                   f"has nothing to do.")
    # Again: nothing to do
    again = _wait(handlers.start(_request(), ALICE_V, runs))
    assert again.result["up_to_date"] and "already up to date" in view.run_view(again, 0, (False, 0))


def test_a_draft_is_padded_first_and_paired_with_its_target(world, tmp_path):
    from tests.draft_models import build_eagle3, eagle3_config

    draft = build_eagle3(tmp_path / "draft", eagle3_config("llama"))
    world.seed("yuhuili/EAGLE3-Tiny", {p.name: p for p in draft.iterdir() if p.is_file()})
    req = _request(draft="yuhuili/EAGLE3-Tiny")
    assert req.draft_target == f"{ALICE}/EAGLE3-Tiny-TP3"
    run = _wait(handlers.start(req, ALICE_V, _runs()))
    assert run.state == "done", run.error
    assert run.result["draft"] == {"target": req.draft_target, "url": f"{world.endpoint}/{req.draft_target}"}
    one_machine = "\n".join(run.result["commands"][1]["code"])
    assert (f'--speculative-config \'{{"method": "eagle3", "model": "{req.draft_target}", "num_speculative_tokens": '
            f'3}}\'') in one_machine
    draft_card = world.file_bytes(req.draft_target, "README.md").decode()
    assert f"vllm serve {TARGET} --tensor-parallel-size 3" in draft_card  # the draft's card names its target
    assert json.loads(world.file_bytes(req.draft_target, "hubpad.json"))["serving"]["draft"]["target"] == TARGET
    entry = fresh.mirrors_entry(req)
    assert "draft_for: RedHatAI/Tiny-Hy3" in entry


def test_an_upstream_that_moves_during_the_run_is_said(world):
    world.set_throttle(down_bytes_per_s=4_000_000)
    run = handlers.start(_request(), ALICE_V, _runs())
    while not run.finished and run.active:
        time.sleep(0.02)
    pinned = world.head(UPSTREAM)
    head = world.seed(UPSTREAM, {"README.md": "---\nlicense: other\n---\n# a new card\n"}, message="new card")
    _wait(run)
    assert run.state == "done", run.error
    assert run.result["moved"] == (f"{UPSTREAM} changed while this run was working (commit {pinned[:12]} became "
                                   f"{head[:12]}): {TARGET} was published from {pinned[:12]}, so it is already "
                                   f"behind; press Pad again to pad the new version (shards whose inputs did not "
                                   f"change are kept).")
    assert handlers.target_status(UPSTREAM, 3, TARGET, ALICE_V).startswith(f"{TARGET} is behind {UPSTREAM}")


def test_a_target_that_holds_something_else_is_refused_before_and_during_the_run(world):
    world.seed(f"{ORG}/Taken", {"README.md": "not hubpad's\n"})
    said = f"{ORG}/Taken already holds files hubpad did not create, which this page never replaces: choose another "
    with pytest.raises(ValueError, match=re.escape(said)):
        _request(target=f"{ORG}/Taken")
    # The same sentence when the run itself meets it (the repo filled meanwhile), and the Hub's own 403
    run = Run(Request(ALICE, UPSTREAM, 3, f"{ORG}/Taken"), ALICE_TOKEN)
    execute(run, SETTINGS)
    assert run.error.startswith(said) and "--force" not in run.error
    reader = Run(Request(READER, UPSTREAM, 3, f"{ORG}/x"), READER_TOKEN)
    execute(reader, SETTINGS)
    assert reader.error == explain.cannot_write(f"{ORG}/x", READER)


def test_one_run_at_a_time_first_come_first_served(world):
    world.set_throttle(down_bytes_per_s=3_000_000)
    runs = _runs()
    carol = handlers.Visitor(CAROL, CAROL_TOKEN)
    first = handlers.start(_request(), ALICE_V, runs)
    second = handlers.start(_request(target=f"{CAROL}/Tiny-Hy3-TP3", who=carol), carol, runs)
    while first.state == "waiting":
        time.sleep(0.02)
    assert runs.place(first) == 0 and runs.place(second) == 1 and second.state == "waiting"
    waiting = view.run_view(second, runs.place(second), runs.size())
    assert "you are number 1" in waiting and "1 run(s) ahead of yours" in waiting
    with pytest.raises(ValueError, match="You already have a run in the queue"):
        handlers.start(_request(target=f"{ALICE}/other"), ALICE_V, runs)
    _wait(first)
    _wait(second)
    assert first.state == second.state == "done" and second.submitted < first.ended <= second.ended


def test_a_failing_run_never_stops_the_queue_and_a_user_has_one_run_at_a_time():
    import threading

    release = threading.Event()

    def execute_or_fail(run):
        if run.request.upstream == "a/boom":
            raise RuntimeError("boom")
        release.wait(30)
        run.result = {}

    runs = Runs(execute_or_fail)
    boom = runs.submit(Request("u1", "a/boom", 3, "u1/x"), "tok-1")
    fine = runs.submit(Request("u2", "a/fine", 3, "u2/x"), "tok-2")
    _wait(boom)
    while fine.state == "waiting":
        time.sleep(0.01)
    with pytest.raises(Busy) as busy:  # u2's run works: a second one of u2's is refused, not queued
        runs.submit(Request("u2", "a/other", 3, "u2/y"), "tok-3")
    assert busy.value.run is fine and runs.size() == (True, 0)
    release.set()
    _wait(fine)
    assert boom.state == "failed" and "unexpected error (RuntimeError)" in boom.error and fine.state == "done"
    assert boom.token is None and fine.token is None


# ------------------------------------------------------------------------------------------------ on Hugging Face Jobs


def _no_token_but_the_secret(job_spec: dict) -> None:
    assert job_spec["secrets"] == {"HF_TOKEN": ALICE_TOKEN}  # the one place the token goes
    assert ALICE_TOKEN not in json.dumps({k: v for k, v in job_spec.items() if k != "secrets"})


def test_a_run_on_jobs_runs_in_the_users_namespace_and_the_page_follows_it(jobs_world):
    runs = _runs()
    req = _request(route=ON_JOBS)
    run = _wait(handlers.start(req, ALICE_V, runs))
    assert run.state == "done", (run.error, run.notes)
    (job,) = jobs_world.jobs.jobs.values()
    assert job.namespace == ALICE and job.stage == "COMPLETED"  # in the user's namespace: billed to them
    _no_token_but_the_secret(job.spec)
    # hubpad's own job (run/hf_jobs.py): the pinned install, the flavor's disk budget, the Space's options, the
    # upstream pinned to the commit the page read
    script = job.spec["command"][2]
    assert script.splitlines()[-1] == (f"exec hubpad mirror {UPSTREAM} --to {TARGET} --revision "
                                       f"{jobs_world.head(UPSTREAM)} --tp 3 --shard-size {SHARD} --max-disk 45GB")
    assert f"--no-deps 'hubpad @ https://github.com/example/hubpad/archive/{PIN.split('@')[1]}.tar.gz'" in script
    # The page showed the job's log in the CLI's words: its start, each shard's final line, what it published
    assert run.jobs == [{"id": job.id, "url": f"{jobs_world.endpoint}/jobs/{ALICE}/{job.id}", "for": UPSTREAM}]
    assert any(n.startswith(f"started job {job.id} on cpu-upgrade ($0.03/hour, timeout 6h) in {ALICE}, hubpad ")
               for n in run.notes), run.notes
    assert len(run.finished) == 5 and all(re.fullmatch(r"model-0000\d-of-00005\.safetensors: [\d.]+ [KM]B in "
                                                       r"[\d.]+s \([\d.]+ [KM]?B/s\)", f) for f in run.finished)
    assert any(n.startswith(f"published {TARGET}") for n in run.notes), run.notes
    page = view.run_view(run, 0, (False, 0))
    assert f"is published, by <a href=\"{jobs_world.endpoint}/jobs/{ALICE}/{job.id}\"" in page
    assert [w["title"] for w in run.result["commands"]][0] == "sparkrun, on 3 DGX Sparks"
    assert cli("verify", UPSTREAM, TARGET).exit_code == 0
    for path in jobs_world.files(TARGET):
        assert ALICE_TOKEN.encode() not in jobs_world.file_bytes(TARGET, path), path
    assert ALICE_TOKEN not in page + json.dumps(run.result) + "".join(run.notes) + jobs_world.jobs.log_text(job.id)
    # Again: up to date, and no job is started (nor billed) to learn it
    again = _wait(handlers.start(_request(route=ON_JOBS), ALICE_V, runs))
    assert again.result["up_to_date"] and len(jobs_world.jobs.jobs) == 1


def test_a_draft_on_jobs_is_padded_by_its_own_job_first():
    req = Request(ALICE, UPSTREAM, 3, TARGET, True, "yuhuili/EAGLE3-Tiny", f"{ALICE}/EAGLE3-Tiny-TP3", ON_JOBS)
    assert mirror_commands(req, "c" * 40, SETTINGS) == [
        ("mirror", "yuhuili/EAGLE3-Tiny", "--to", f"{ALICE}/EAGLE3-Tiny-TP3", "--tp", "3", "--shard-size", SHARD,
         "--private", "--draft-for", TARGET),
        ("mirror", UPSTREAM, "--to", TARGET, "--revision", "c" * 40, "--tp", "3", "--shard-size", SHARD, "--private",
         "--draft", f"{ALICE}/EAGLE3-Tiny-TP3")]


@pytest.mark.parametrize("status, words", [
    (402, f"Hugging Face Jobs are billed to your account, and {ALICE} has no credit for them: add credits at "),
    (403, f"The Hub did not let this page start a job in {ALICE} (the sign-in may not run Jobs): sign out, sign in "
          f"again and allow it to run Jobs, or run it on this Space instead."),
])
def test_a_namespace_that_cannot_run_jobs_is_one_sentence_and_nothing_starts(jobs_world, status, words):
    jobs_world.jobs.deny(ALICE, status)
    run = _wait(handlers.start(_request(route=ON_JOBS), ALICE_V, _runs()))
    assert run.state == "failed" and run.error.startswith(words) and "\n" not in run.error, run.error
    assert ALICE_TOKEN not in run.error and "--namespace" not in run.error  # the page's words, not the CLI's
    assert not jobs_world.jobs.jobs and not jobs_world.repo_exists(TARGET)
    with pytest.raises(ValueError) as said:  # the same sentence when "Keep it up to date" asks for a schedule
        handlers.pad(_request(), ALICE_V, _runs(), SETTINGS, keep_fresh=True)
    assert str(said.value).startswith(words) and not jobs_world.jobs.schedules


def test_keep_it_fresh_makes_one_schedule_that_refreshes_the_derivative(jobs_world):
    runs = _runs()
    expires = int(time.time()) + 86400
    alice = handlers.Visitor(ALICE, ALICE_TOKEN, expires)
    run, said = handlers.pad(_request(who=alice), alice, runs, SETTINGS, keep_fresh=True)
    name = fresh.schedule_name(run.request)
    assert name == "refresh-alice-Tiny-Hy3-TP3"
    assert said.startswith(f"Kept up to date: every 6 hours a job in your account (billed to you) checks {UPSTREAM} "
                           f"and re-pads {TARGET} when it changed (schedule {name};")
    assert time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(expires)) in said
    assert _wait(run).state == "done", run.error
    (sched,) = jobs_world.jobs.schedules.values()
    assert sched.namespace == ALICE and sched.schedule == "17 */6 * * *"
    assert sched.job_spec["labels"]["hubpad-schedule"] == name
    _no_token_but_the_secret(sched.job_spec)
    # The schedule runs the hubpad.yaml the page shows (the Space's shard size in it, so a refresh builds the same
    # shards), with the flavor's disk budget added (run/schedule.py)
    shipped = yaml.safe_load(sched.job_spec["environment"]["HUBPAD_CONFIG_YAML"])
    assert shipped["mirrors"] == yaml.safe_load(fresh.mirrors_entry(run.request, SETTINGS.shard_size))["mirrors"]
    assert shipped["defaults"] == {"tp": 3, "shard_size": SHARD, "max_disk": "45GB"}
    # Made again (a new sign-in's token): renewed, still one schedule
    run2, said2 = handlers.pad(_request(), ALICE_V, runs, SETTINGS, keep_fresh=True)
    assert said2.startswith("Renewed: ") and "your Hub login's token" in said2
    _wait(run2)
    assert len(jobs_world.jobs.schedules) == 1
    # The upstream moves; the cron fires: the job re-pads the derivative, which passes `hubpad verify`
    jobs_world.seed(UPSTREAM, {"README.md": "---\nlicense: other\n---\n# a new card\n"}, message="new card")
    assert handlers.target_status(UPSTREAM, 3, TARGET, ALICE_V).startswith(f"{TARGET} is behind")
    job = jobs_world.jobs.fire(next(iter(jobs_world.jobs.schedules)))
    assert jobs_world.jobs.wait(job.id).stage == "COMPLETED", jobs_world.jobs.log_text(job.id)
    assert f"published {TARGET}" in jobs_world.jobs.log_text(job.id)
    assert ALICE_TOKEN not in jobs_world.jobs.log_text(job.id)
    assert handlers.target_status(UPSTREAM, 3, TARGET, ALICE_V).endswith("Pad has nothing to do.")
    assert cli("verify", UPSTREAM, TARGET).exit_code == 0


def test_a_busy_user_gets_no_schedule_either(jobs_world):
    runs = Runs(lambda run: time.sleep(0.5))
    first, _ = handlers.pad(_request(), ALICE_V, runs, SETTINGS)
    with pytest.raises(ValueError, match="You already have a run in the queue"):
        handlers.pad(_request(), ALICE_V, runs, SETTINGS, keep_fresh=True)
    assert not jobs_world.jobs.schedules
    _wait(first)


# ------------------------------------------------------------------------------------------------ the Space restarts


def test_a_run_lost_to_a_restart_resumes_from_what_the_hub_kept(world):
    last = {"run": "gone", "user": ALICE, "upstream": UPSTREAM, "tp": 3, "target": TARGET}
    assert handlers.lost_run(last, ALICE_V) == explain.interrupted(Request(ALICE, UPSTREAM, 3, TARGET), 0)
    assert "press Pad to start it again" in handlers.lost_run(last, ALICE_V)
    # A run that staged shards and stopped (one part of two: staged, never published)
    staged = cli("mirror", UPSTREAM, "--tp", "3", "--shard-size", SHARD, "--to", TARGET, "--part", "1/2")
    assert staged.exit_code == 0, staged.output
    said = handlers.lost_run(last, ALICE_V)
    assert re.search(r"stopped before it finished, most likely because the Space restarted\. [1-9] finished shard\(s\) "
                     r"are safe on the Hub: press Pad to resume", said), said
    assert "staged by a run that did not finish: Pad resumes it" in handlers.target_status(UPSTREAM, 3, TARGET, ALICE_V)
    run = _wait(handlers.start(_request(), ALICE_V, _runs()))
    assert run.state == "done" and any(n.startswith("resuming: ") for n in run.notes), run.notes
    assert run.result["reused"] >= 1
    assert handlers.lost_run(last, ALICE_V) is None  # finished after all: nothing to say
    assert handlers.lost_run({**last, "user": CAROL}, ALICE_V) is None  # someone else's browser memory


def test_a_job_the_space_stopped_following_runs_on_and_the_page_says_so(world):
    url = f"{world.endpoint}/jobs/{ALICE}/0123"
    last = {"run": "gone", "user": ALICE, "upstream": UPSTREAM, "tp": 3, "target": TARGET, "route": ON_JOBS,
            "jobs": [{"id": "0123", "url": url, "for": UPSTREAM}]}
    assert handlers.lost_run(last, ALICE_V) == (f"The Space restarted while following your job for {TARGET} ({url}): "
                                                f"the job runs on in your account, so open its page for its log, and "
                                                f"press Pad once it has ended (an up-to-date copy is not padded again).")


# ------------------------------------------------------------------------------------------------ keep it fresh


def test_the_form_as_it_stands_is_what_keep_it_fresh_shows():
    assert handlers.form_request(UPSTREAM, None, TARGET, False, "", ALICE_V) is None
    assert handlers.form_request("", 3, TARGET, False, "", ALICE_V) is None
    req = handlers.form_request(UPSTREAM, 3, TARGET, True, "yuhuili/EAGLE3-Tiny", ALICE_V)
    assert (req.upstream, req.tp, req.target, req.private, req.draft_target) == (UPSTREAM, 3, TARGET, True,
                                                                                 f"{ALICE}/EAGLE3-Tiny-TP3")
    assert "shard_size" not in fresh.mirrors_entry(req, parse_size("5GB"))  # hubpad's default needs no word
    assert "shard_size: 4MB" in fresh.mirrors_entry(req, parse_size("4MB"))


def test_keep_it_fresh_shows_a_valid_mirrors_entry_and_workflow(tmp_path):
    from hubpad.formats.mirrors_file import parse_mirrors

    req = Request(ALICE, "meta-llama/Llama-3.1-8B-Instruct", 3, f"{ALICE}/Llama-3.1-8B-Instruct-TP3", private=True,
                  draft="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", draft_target=f"{ALICE}/EAGLE3-LLaMA3.1-Instruct-8B-TP3")
    specs = parse_mirrors(fresh.mirrors_entry(req))
    assert [(s.upstream, s.resolved_target(ALICE), s.tp, s.private) for s in specs] == [
        (req.upstream, req.target, 3, True), (req.draft, req.draft_target, 3, False)]
    assert specs[1].draft_for == req.upstream
    flow = fresh.workflow(req, Settings(1, 1, None, "someone/hubpad@" + "a" * 40))
    data = yaml.safe_load(flow)
    steps = data["jobs"]["mirror"]["steps"]
    assert [s.get("with", {}).get("upstream") for s in steps[1:]] == [req.draft, req.upstream]
    assert all(s["uses"] == "someone/hubpad@" + "a" * 40 and s["with"]["config"] == "hubpad.yaml" for s in steps[1:])
    from tests.test_action import _actionlint

    binary = _actionlint()
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "hubpad.yml").write_text(flow)
    lint = subprocess.run([binary, "-no-color", ".github/workflows/hubpad.yml"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


# ------------------------------------------------------------------------------------------------ pieces


def test_serve_commands_are_read_from_the_cards_sections():
    card = ("# x\n## Quick start\n### sparkrun (3 nodes)\ntext\n```bash\nsparkrun run a\n```\n### vLLM\n```bash\n"
            "pip install p\n```\n\n```bash\nvllm serve a \\\n  --tensor-parallel-size 3\n```\n#### On 3 machines with "
            "one GPU each (DGX Sparks), without sparkrun\n```bash\n# node 1\nvllm serve a\n```\n## Provenance\n"
            "```bash\nhubpad verify a b\n```\n")
    ways = serve_commands(card)
    assert [(w["title"], w["anchor"], w["code"]) for w in ways] == [
        ("sparkrun, on 3 DGX Sparks", "sparkrun-3-nodes", ["sparkrun run a"]),
        ("one machine with the GPUs", "vllm", ["pip install p", "vllm serve a \\\n  --tensor-parallel-size 3"]),
        ("3 machines, without sparkrun", "on-3-machines-with-one-gpu-each-dgx-sparks-without-sparkrun",
         ["# node 1\nvllm serve a"])]


def test_what_the_page_shows_is_escaped():
    assert view.message("<script>x</script>", "error") == ('<p class="hp-error" role="alert">&lt;script&gt;x&lt;/script'
                                                          '&gt;</p>')
    run = Run(Request("u", "a/<b>", 3, "u/<i>"))
    assert "<b>" not in view.run_view(run, 2, (True, 1)) and "a/&lt;b&gt;" in view.run_view(run, 2, (True, 1))


# ------------------------------------------------------------------------------------------------ deploying it


def _front_matter(text: str) -> dict:
    return yaml.safe_load(text.split("---\n")[1])


def test_the_spaces_front_matter_matches_the_locks():
    meta = _front_matter((ROOT / "space" / "README.md").read_text())
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py" and meta["hf_oauth"] is True
    assert meta["sdk_version"] == gr.__version__  # the Space runs the Gradio the tests ran
    # Repos this Space created (no access to other repos of the user's) and Jobs (the job route, the refresh): no more
    assert meta["hf_oauth_scopes"] == ["read-repos", "contribute-repos", "jobs"]
    for lock in (ROOT / "space" / "requirements.txt", ROOT / "requirements" / "test.txt"):
        assert f"\ngradio=={gr.__version__} \\" in lock.read_text()
    pins = re.findall(r"^([a-z0-9._-]+==\S+) \\", (ROOT / "space" / "requirements.txt").read_text(), re.M)
    test_pins = set(re.findall(r"^([a-z0-9._-]+==\S+) \\", (ROOT / "requirements" / "test.txt").read_text(), re.M))
    assert pins and set(pins) <= test_pins  # the Space installs exactly what the tests ran with
    assert not [p for p in pins if p.startswith(("torch==", "nvidia-", "triton=="))]


def test_the_published_space_is_self_contained(hub, tmp_path):
    sys.path.insert(0, str(ROOT / "space"))
    import publish

    install, why = publish.jobs_install(PIN)
    assert why is None and install == f"hubpad @ https://github.com/example/hubpad/archive/{PIN.split('@')[1]}.tar.gz"
    assert publish.jobs_install("hubpad>=1")[0] is None  # anything that can move: no Jobs route, and why
    probe = ("import sys; sys.path.insert(0, '.'); import hubpad, hubpad_space.ui; "
             "from hubpad.render.paths import builtin_templates_dir; print(hubpad.__file__); "
             "print(builtin_templates_dir()); from hubpad_space.settings import Settings; s = Settings.from_env(); "
             "print(s.jobs_install, '|', s.jobs_off())")
    env = {"PATH": "/usr/bin:/bin", "GRADIO_ANALYTICS_ENABLED": "False", "HOME": str(tmp_path)}
    for pinned in (install, None):
        folder = publish.assemble(tmp_path / f"space-{bool(pinned)}", pinned)
        out = subprocess.run([sys.executable, "-c", probe], cwd=folder, capture_output=True, text=True, timeout=120,
                             env=env)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[:2] == [str(folder / "hubpad" / "__init__.py"), str(folder / "templates")]
        # The Space's jobs install what publish.py pinned; without a pin (not a checkout) it offers no Jobs route
        assert lines[2] == (f"{install} | None" if pinned else "None | this Space names no hubpad for its jobs to "
                            "install (space/publish.py writes JOBS_INSTALL; or set HUBPAD_JOBS_INSTALL)")
    url = publish.publish(f"{ALICE}/hubpad", token=ALICE_TOKEN, install=install)
    assert url.startswith(hub.endpoint)
    files = hub.files(f"{ALICE}/hubpad", repo_type="space")
    assert {"app.py", "README.md", "requirements.txt", "hubpad/__init__.py", "hubpad_space/ui.py",
            "templates/README.md.j2", "JOBS_INSTALL"} <= set(files)
    assert not [f for f in files if "__pycache__" in f or f.startswith(("tests/", "space/"))]
