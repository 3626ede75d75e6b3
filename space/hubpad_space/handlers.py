"""What the page does when its visitor acts: plain functions of the form's values and the visitor, returning what to
show. ui.py wires them to the page; the unit tests call them directly against the Hub emulator.

Every name a visitor types is taken as a Hub repo id and nothing else (never a local path), and every Hub call uses the
visitor's own token, or none at all before they sign in: never the Space's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hubpad.errors import HubpadError
from hubpad.plan.adapters.drafts import speculative_config
from hubpad.plan.advisor import Advice, advise
from hubpad.plan.planner import make_plan
from hubpad.publish.hub import staging_records
from hubpad.run.check import check_one
from hubpad.source.hub import HubSource
from hubpad.source.hub_api import api_for, search_models, write_namespaces
from hubpad.source.readers import read_json
from hubpad.util.refs import derive_target, is_repo_id

from hubpad_space import explain, fresh
from hubpad_space.job import target_publisher
from hubpad_space.runs import ON_JOBS, ON_SPACE, Busy, Request, Run, Runs
from hubpad_space.settings import Settings

# The access token Gradio puts in a session when it mocks "Sign in with Hugging Face" outside a Space (gradio/oauth.py
# _get_mocked_oauth_info); the mocked user is the machine's own Hub login, so its own token stands in for it.
GRADIO_MOCK_TOKEN = "mock-oauth-token-for-local-dev"
SIGN_IN_FIRST = "Sign in with Hugging Face first: the padded model is published to your account."


@dataclass(frozen=True)
class Visitor:
    """Who is on the page: a signed-in user and their token, or an anonymous visitor (token False: no token at all)."""

    user: str | None = None
    token: str | bool = field(default=False, repr=False)
    expires_at: int | None = field(default=None, compare=False)  # when a Space's sign-in ends (its OAuth token)

    @property
    def signed_in(self) -> bool:
        return bool(self.user and self.token)


def visitor(profile, oauth, on_space: bool) -> Visitor:
    """The visitor from Gradio's OAuth profile and token (each None when signed out)."""
    if profile is None or oauth is None:
        return Visitor()
    token, expires_at = oauth.token, oauth.expires_at or None
    if not on_space and token == GRADIO_MOCK_TOKEN:
        from huggingface_hub import get_token

        token, expires_at = get_token() or False, None
    return Visitor(profile.username, token, expires_at)


# ---------------------------------------------------------------------------------------------------- the model


def suggestions(text: str, who: Visitor, limit: int = 10) -> list[str]:
    """Hub model ids that contain what the visitor typed (the Hub's search); none for fewer than 2 characters."""
    text = (text or "").strip()
    if len(text) < 2:
        return []
    try:
        return search_models(api_for(who.token), text, limit)
    except HubpadError:
        return []  # completion is a help, never an error


@dataclass
class Advised:
    """The advisor's answer for one upstream, or the sentence saying why there is none."""

    upstream: str
    advice: Advice | None = None
    error: str | None = None

    def row(self, tp: int):
        return next((r for r in self.advice.rows if r.tp == tp), None) if self.advice else None


def check_repo_id(value: str, what: str) -> str:
    """A Hub repo id as typed (trimmed), or ValueError with the sentence the page shows."""
    value = (value or "").strip()
    if not value:
        raise ValueError(f"Name the {what}: its Hub id, namespace/name.")
    if not is_repo_id(value):
        raise ValueError(f"{value!r} is not a Hub model id: write it as namespace/name, e.g. RedHatAI/Hy3-NVFP4-FP8.")
    return value


def advise_upstream(upstream: str, who: Visitor, settings: Settings) -> Advised:
    """The TP advisor's table for `upstream`, from its config and safetensors headers only (what `hubpad plan SRC`
    prints)."""
    try:
        upstream = check_repo_id(upstream, "model to pad")
    except ValueError as exc:
        return Advised(upstream or "", error=str(exc))
    req = Request(user=who.user or "", upstream=upstream, tp=0, target="")
    try:
        return Advised(upstream, advice=advise(HubSource(upstream, token=who.token), settings.tps))
    except HubpadError as exc:
        return Advised(upstream, error=explain.explain(exc, req, token=_secret(who)))


def default_target(upstream: str, tp: int, who: Visitor) -> str:
    """`<user>/<name>-TP<tp>`, as `hubpad mirror` names it; `<name>-TP<tp>` until the visitor signs in."""
    if not upstream or not tp:
        return ""
    return derive_target(upstream.strip(), int(tp), who.user)


def default_draft_target(draft: str, tp: int, who: Visitor) -> str:
    return default_target(draft, tp, who) if draft and draft.strip() else ""


def target_status(upstream: str, tp: int, target: str, who: Visitor) -> str:
    """What pressing Pad will do to `target`: create it, update it, resume it, or nothing (it is up to date)."""
    if not who.signed_in or not (upstream and tp and target) or not (is_repo_id(upstream) and is_repo_id(target)):
        return ""
    try:
        status = check_one(upstream, target, int(tp), None, token=who.token)
        staged = len(staging_records(api_for(who.token), target, int(tp)))
    except HubpadError:
        return ""  # the advisor or Pad says what is wrong, in its own words
    if staged:
        return (f"{target} has {staged} shard(s) staged by a run that did not finish: Pad resumes it and does not "
                f"build them again.")
    return {"missing": f"{target} does not exist yet: Pad creates it.",
            "up-to-date": f"{target} is up to date with {upstream}: Pad has nothing to do.",
            "stale": f"{target} is behind {upstream}: Pad updates it and rebuilds only the shards that changed.",
            }[status["status"]]


# ---------------------------------------------------------------------------------------------------- the run


def make_request(upstream: str, tp, target: str, private: bool, draft: str, who: Visitor,
                 settings: Settings, route: str = ON_SPACE) -> Request:
    """Check everything that can be checked before queueing (in seconds, headers only), and raise ValueError with
    the sentence for the first problem: a visitor never waits in the queue (nor pays for a job) for a run that
    cannot work."""
    if not who.signed_in:
        raise ValueError(SIGN_IN_FIRST)
    if route == ON_JOBS and settings.jobs_off():
        raise ValueError("This Space cannot start jobs (it names no hubpad for them to install): run it on this Space.")
    upstream = check_repo_id(upstream, "model to pad")
    target = check_repo_id(target, "padded copy")
    if not tp:
        raise ValueError("Pick a tensor-parallel size (TP): how many GPUs, or DGX Sparks, serve the model together.")
    tp = int(tp)
    draft = (draft or "").strip() or None
    req = Request(who.user, upstream, tp, target, bool(private), draft,
                  default_draft_target(draft, tp, who) if draft else None, route)
    if upstream.casefold() == target.casefold():
        raise ValueError(f"The padded copy needs a name of its own, not {upstream}'s.")
    try:
        if target.split("/", 1)[0] not in write_namespaces(api_for(who.token)):
            raise ValueError(explain.cannot_write(target, who.user, refused=False))
        plan = make_plan(HubSource(upstream, token=who.token), tp, settings.shard_size)
        if plan.needs_padding:
            target_publisher(target, req.private, who.token, settings).inspect(plan)  # taken, or not writable
        if draft:
            check_repo_id(draft, "draft model")
            speculative_config(req.draft_target, read_json(HubSource(draft, token=who.token), "config.json"),
                               what=f"The draft {draft}")
    except HubpadError as exc:
        raise ValueError(explain.explain(exc, req, token=_secret(who))) from None
    if not plan.needs_padding:
        raise ValueError(f"{upstream} already serves at TP {tp} as it is: there is nothing to pad, serve it directly "
                         f"with `vllm serve {upstream} --tensor-parallel-size {tp}`.")
    return req


def start(request: Request, who: Visitor, runs: Runs) -> Run:
    """Queue the run (one per user at a time); ValueError with the sentence when this user already has one."""
    try:
        return runs.submit(request, who.token if isinstance(who.token, str) else None)
    except Busy as busy:
        raise ValueError(_busy(busy.run)) from None


def _busy(run: Run) -> str:
    mine = run.request
    return (f"You already have a run in the queue ({mine.upstream} into {mine.target}): it continues when you close "
            f"this page; wait for it to end before starting another.")


def pad(request: Request, who: Visitor, runs: Runs, settings: Settings, keep_fresh: bool = False
        ) -> tuple[Run, str | None]:
    """Start the run; with `keep_fresh`, first make (or renew) the derivative's scheduled refresh on Jobs: the run
    and its sentence. ValueError with the sentence when either cannot be (then neither is)."""
    mine = runs.active_run(request.user)
    if mine is not None:
        raise ValueError(_busy(mine))
    said = fresh.keep_fresh(request, who.token, who.expires_at, settings) if keep_fresh else None
    return start(request, who, runs), said


def form_request(upstream: str, tp, target: str, private: bool, draft: str, who: Visitor) -> Request | None:
    """The form as it stands, unchecked (what "Keep it up to date" shows before Pad is pressed); None while it
    names no model, TP or copy."""
    try:
        upstream, target = check_repo_id(upstream, "model"), check_repo_id(target, "copy")
        tp = int(tp)
    except (ValueError, TypeError):
        return None
    draft = (draft or "").strip() or None
    return Request(who.user or "", upstream, tp, target, bool(private), draft,
                   default_draft_target(draft, tp, who) if draft else None)


def lost_run(last: dict | None, who: Visitor) -> str | None:
    """The sentence for this visitor's last run when this Space no longer knows it (it restarted meanwhile): what
    the Hub shows of it decides between "resume" and "start again"; None when it had finished after all."""
    if not last or not who.signed_in or last.get("user") != who.user:
        return None
    try:
        req = Request(who.user, check_repo_id(last.get("upstream", ""), "model"), int(last.get("tp") or 0),
                      check_repo_id(last.get("target", ""), "copy"))
    except (ValueError, TypeError):
        return None
    try:
        if check_one(req.upstream, req.target, req.tp, None, token=who.token)["status"] == "up-to-date":
            return None
        staged = len(staging_records(api_for(who.token), req.target, req.tp))
    except HubpadError:
        staged = 0
    if last.get("route") == ON_JOBS:
        return explain.interrupted_job(req, [j["url"] for j in last.get("jobs") or [] if isinstance(j, dict)
                                             and isinstance(j.get("url"), str)])
    return explain.interrupted(req, staged)


def _secret(who: Visitor) -> str | None:
    return who.token if isinstance(who.token, str) else None
