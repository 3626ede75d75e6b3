"""Every failure the page can show, as one plain sentence that says what to do next (never a token, never a trace).

The kind of failure comes from hubpad's error classes (errors.py): a gated upstream (GatedError), a refused token
or target (HubError 401 / 403), a model that cannot be padded (ConfigError, whose message is the refusal's reason), a target holding something else
(TargetTakenError),
a target someone else changed meanwhile (ConflictError), an unreachable Hub (NetworkError).
"""

from __future__ import annotations

from hubpad.errors import (ConfigError, ConflictError, GatedError, HubError, HubpadError, NetworkError,
                           TargetTakenError)
from hubpad.util.redact import redact

from hubpad_space.runs import Request
from hubpad_space.settings import Settings


def explain(exc: HubpadError, req: Request, *, token: str | None = None) -> str:
    """The sentence for a failure of `req` (planning it, or running it)."""
    hub = Settings.hub_url()
    if isinstance(exc, GatedError):
        return gated(req.upstream, req.user)
    if isinstance(exc, NetworkError):
        return f"The Hub could not be reached ({_tail(exc, token)}); try again in a moment."
    if isinstance(exc, TargetTakenError):
        return (f"{req.target} already holds {exc.holds}, which this page never replaces: choose another name for "
                f"the padded copy.")
    if isinstance(exc, ConflictError):
        return (f"Someone else changed {req.target} on the Hub while this run worked, so nothing was published; "
                f"press Pad again.")
    if isinstance(exc, HubError) and exc.status == 401:
        return "The Hub refused your sign-in (it may have expired): sign out, sign in again, then press Pad."
    if isinstance(exc, HubError) and exc.status == 403:
        return cannot_write(req.target, req.user)
    if isinstance(exc, HubError) and exc.status == 404 and str(exc).startswith(f"upstream {req.upstream}"):
        return not_found(req.upstream)
    if isinstance(exc, ConfigError):
        return refused(req.upstream, req.tp, exc, token)
    return f"The run stopped: {_tail(exc, token)}. Nothing was published to {hub}/{req.target}."


def gated(upstream: str, user: str | None) -> str:
    who = f" as {user}" if user else ""
    return (f"{upstream} is gated: open {Settings.hub_url()}/{upstream}, accept its terms there while signed in{who}, "
            f"then try again (a request its authors approve by hand can take a while).")


def cannot_write(target: str, user: str | None, *, refused: bool = True) -> str:
    """`refused`: the Hub said no to a write (403); else the sign-in itself may create no repo there."""
    namespace = target.split("/", 1)[0]
    if namespace == user and refused:  # the sign-in's scopes (space/README.md): repos this Space created, no others
        return (f"The Hub refused to let this page write to {target}: a sign-in here may only write to repos this "
                f"Space created, and {target} was made elsewhere. Choose a new name.")
    if namespace == user:
        return (f"Your sign-in does not let this page create repos in {user}/ (it may only read): sign out, then "
                f"sign in again and allow it to write.")
    mine = f" Choose a name under {user}/ instead." if user else ""
    return (f"You cannot write to {target}: {namespace} is not your account or an organization where you may "
            f"create repos.{mine}")


def jobs_refused(exc: HubError, user: str | None) -> str:
    """The Hub would not start a job in the user's namespace: 402, no credit to bill it to; 403, the sign-in may not
    (this Space's sign-in asks for the `jobs` scope; a sign-in made before it did lacks it)."""
    where = f" {user}" if user else " your account"
    if exc.status == 402:
        return (f"Hugging Face Jobs are billed to your account, and{where} has no credit for them: add credits at "
                f"{Settings.hub_url()}/settings/billing, or run it on this Space instead.")
    return (f"The Hub did not let this page start a job in{where} (the sign-in may not run Jobs): sign out, sign in "
            f"again and allow it to run Jobs, or run it on this Space instead.")


def not_found(upstream: str) -> str:
    return (f"{upstream} was not found on the Hub (or it is private and your account cannot see it): check the "
            f"name, or pick one from the list.")


def refused(upstream: str, tp: int | None, exc: HubpadError | str, token: str | None = None) -> str:
    at = f" for TP {tp}" if tp else ""
    return f"{upstream} cannot be padded{at}: {_tail(exc, token)}."


def upstream_moved(req: Request, pinned: str, head: str, *, published: bool) -> str:
    """The upstream got a new commit while the run read the one it pinned at the start."""
    done = (f"{req.target} was published from {pinned[:12]}, so it is already behind" if published
            else "nothing was published")
    return (f"{req.upstream} changed while this run was working (commit {pinned[:12]} became {head[:12]}): {done}; "
            f"press Pad again to pad the new version (shards whose inputs did not change are kept).")


def interrupted(req: Request, staged: int) -> str:
    """A run of this page's user that this process does not know: the Space restarted while it worked."""
    if staged:
        return (f"Your run of {req.upstream} into {req.target} stopped before it finished, most likely because the "
                f"Space restarted. {staged} finished shard(s) are safe on the Hub: press Pad to resume, they are not "
                f"built again.")
    return (f"Your run of {req.upstream} into {req.target} stopped before it finished, most likely because the "
            f"Space restarted, and had not kept a shard yet: press Pad to start it again.")


def interrupted_job(req: Request, jobs: list[str]) -> str:
    """A run on Jobs that this process no longer follows (the Space restarted): the job itself runs on."""
    where = f" ({', '.join(jobs)})" if jobs else ""
    return (f"The Space restarted while following your job for {req.target}{where}: the job runs on in your account, "
            f"so open its page for its log, and press Pad once it has ended (an up-to-date copy is not padded again).")


def _tail(exc: HubpadError | str, token: str | None) -> str:
    """The library's one line, without a token and without a final period (the sentence adds its own)."""
    return redact(str(exc), token).strip().rstrip(".")
