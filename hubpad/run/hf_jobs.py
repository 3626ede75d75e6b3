"""One hubpad command as a Hugging Face job: the flavor and its disk, the job's spec, submitting, following, outcome.

A job installs this exact hubpad (run/job_install.py) in `python:3.12-slim` and runs the same command line. The
token reaches it only as the secret `HF_TOKEN`: never in the command, the environment, the labels or a log line.
The local command follows the job's log (hubpad's own progress lines), ends with the job's outcome (hubpad's own
`error:` line passed through), and cancels the job on Ctrl-C.
"""

from __future__ import annotations

import difflib
import re
import shlex
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from hubpad.errors import ConfigError, HubError, HubpadError
from hubpad.run.job_install import Install, resolve_install
from hubpad.source.hub_api import api_for, endpoint, hub_errors, whoami_name
from hubpad.util.log import log
from hubpad.util.redact import redact
from hubpad.util.refs import is_local
from hubpad.util.sizes import format_size, human

# The defaults and why (README "Run it on Hugging Face Jobs"): 8 vCPU hash and upload (Xet chunking is CPU work)
# several streams at once; 6 hours is GitHub's own job limit, which the fan-out is sized against.
DEFAULT_FLAVOR = "cpu-upgrade"
DEFAULT_TIMEOUT = "6h"
IMAGE = "python:3.12-slim"
IMAGE_WITH_GIT = "python:3.12"  # for a git+ install
TERMINAL = ("COMPLETED", "CANCELED", "ERROR", "DELETED")
CONFIG_ENV = "HUBPAD_CONFIG_YAML"  # a shipped mirrors file travels in the job's env; the job writes it here:
CONFIG_NAME = "hubpad.yaml"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# What `--max-disk` leaves of a flavor's ephemeral disk for the rest of the job: the image, pip, caches, logs.
DISK_RESERVE, DISK_RESERVE_SHARE = 3 * 10**9, 0.10


def parse_duration(text: str) -> int:
    """`90`, `90s`, `30m`, `6h`, `1d` as seconds (what Jobs' timeout takes)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", str(text))
    if not m or float(m[1]) <= 0:
        raise ConfigError(f"--timeout {text!r} is not a duration (a number of seconds, or with s, m, h or d: 6h)")
    return int(float(m[1]) * _UNITS[m[2] or "s"])


def _disk_bytes(text: str | None) -> int | None:
    """A flavor's `ephemeralStorage` ("50 GB", "1 TB") in bytes; None when the API gives none."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT])i?B\s*", text or "", re.I)
    return int(float(m[1]) * 1000 ** "KMGT".index(m[2].upper()) * 1000) if m else None


@dataclass(frozen=True)
class Settings:
    """How jobs run: the command line's job options (or the webhook receiver's)."""

    flavor: str = DEFAULT_FLAVOR
    timeout: str = DEFAULT_TIMEOUT
    namespace: str | None = None
    install: str | None = None
    attempts: int = 1


@dataclass
class Account:
    """Who runs jobs: the API with the token, and the namespace they run (and are billed) in."""

    api: object
    token: str
    namespace: str


def connect(namespace: str | None = None, token: str | None = None) -> Account:
    """The token's account, in `namespace` (default: the token's user). `token`: a given one (a web page's
    signed-in user), else huggingface_hub's usual one."""
    api = api_for(token)
    if not api.token:
        raise HubpadError("no Hugging Face token: set HF_TOKEN or run `hf auth login` (a job gets it as its "
                          "HF_TOKEN secret)")
    return Account(api, api.token, namespace or whoami_name(api))


@dataclass
class Launcher(Account):
    """Settings checked against the Hub once: the namespace, the flavor, the install; then jobs submitted."""

    flavor: str = DEFAULT_FLAVOR
    disk: int | None = None  # the flavor's ephemeral disk, bytes
    price: str = "?"  # "$0.03/hour", from the API's unit cost
    timeout_s: int = 0
    install: Install | None = None
    attempts: int = 1

    @property
    def disk_budget(self) -> int | None:
        """The most `--max-disk` may be on this flavor."""
        if self.disk is None:
            return None
        return self.disk - max(DISK_RESERVE, int(self.disk * DISK_RESERVE_SHARE))

    def max_disk(self, asked: int | None) -> int | None:
        """`--max-disk` for a job: as asked if it fits the flavor's disk, else the flavor's budget."""
        budget = self.disk_budget
        if asked is not None and budget is not None and asked > budget:
            raise ConfigError(f"--max-disk {human(asked)} does not fit flavor {self.flavor}'s {human(self.disk)} "
                              f"ephemeral disk (at most {human(budget)} leaves room for the image and caches); "
                              f"lower it or pick a flavor with more disk (hubpad mirror --help)")
        return asked if asked is not None else budget


def prepare(settings: Settings, token: str | None = None) -> Launcher:
    """Check the token (`token`, else the usual one), the namespace, the flavor and the install before anything is
    started."""
    timeout_s = parse_duration(settings.timeout)
    install = resolve_install(settings.install)
    account = connect(settings.namespace, token)
    api = account.api
    with hub_errors("list the Jobs hardware"):
        hardware = {hw.name: hw for hw in api.list_jobs_hardware()}
    hw = hardware.get(settings.flavor)
    if hw is None:
        close = difflib.get_close_matches(settings.flavor, list(hardware), n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ConfigError(f"--flavor {settings.flavor!r} is not a Jobs flavor ({hint}known: "
                          f"{', '.join(sorted(hardware))})")
    price = f"${hw.unit_cost_usd * (60 if hw.unit_label == 'minute' else 1):.2f}/hour" \
        if hw.unit_label in ("minute", "hour") else f"${hw.unit_cost_usd}/{hw.unit_label}"
    return Launcher(api=api, token=account.token, namespace=account.namespace, flavor=hw.name,
                    disk=_disk_bytes(hw.ephemeral_storage), price=price, timeout_s=timeout_s, install=install,
                    attempts=max(settings.attempts, 1))


@dataclass(frozen=True)
class Command:
    """A hubpad command line to run in a job, and the mirrors file it reads (shipped in the job's env)."""

    argv: tuple[str, ...]  # without "hubpad"
    config_text: str | None = None
    name: str = "hubpad"
    labels: tuple[tuple[str, str], ...] = ()

    def with_args(self, *extra: str, name: str | None = None) -> Command:
        return replace(self, argv=(*self.argv, *extra), name=name or self.name)


def ship_mirrors_file(path: str, budget: int | None) -> str:
    """The mirrors file a job reads: checked here (every mistake at once), its Hub repos only, and every entry's
    disk within the flavor's (`defaults.max_disk` set to the flavor's budget where the file names none)."""
    import yaml

    from hubpad.formats.mirrors_file import MirrorsFileError, load_mirrors

    specs = load_mirrors(path)
    problems = [f"{s.where}: {ref} is a local folder, which a job cannot read; name a Hub repo"
                for s in specs for ref in (s.upstream, s.target) if ref and is_local(ref)]
    if budget is not None:
        problems += [f"{s.where}: max_disk {human(s.max_disk)} does not fit the flavor's ephemeral disk (at most "
                     f"{human(budget)})" for s in specs if s.max_disk is not None and s.max_disk > budget]
    if problems:
        raise MirrorsFileError(problems)
    text = Path(path).read_text(encoding="utf-8")
    if budget is None:
        return text
    doc = yaml.safe_load(text)
    defaults = doc.get("defaults") or {}
    defaults.setdefault("max_disk", format_size(budget))
    doc["defaults"] = defaults
    return yaml.safe_dump(doc, sort_keys=False)


def refuse_local(refs: Sequence[str | None], templates: str | None = None) -> None:
    """A job runs on Hugging Face's machines: every SRC, DST and draft must be a Hub repo."""
    local = [r for r in refs if r and is_local(r)]
    if local:
        raise ConfigError(f"--on hf-jobs: {local[0]} is a local folder, which a job on Hugging Face's machines "
                          f"cannot read; name Hub repos")
    if templates:
        raise ConfigError("--on hf-jobs: --templates names a local folder, which a job cannot read")


def job_command(launcher: Launcher, argv: Sequence[str], *, config_file: str | None = None, disk: bool = False,
                max_disk: int | None = None, about: str | None = None) -> Command:
    """What a job runs: `argv` as typed (without the job options, `--max-disk` and with `--config` naming
    CONFIG_NAME), the mirrors file shipped, and (`disk`: mirror, publish) `--max-disk` within the flavor's disk: as
    asked, else the flavor's budget; a mirrors file carries the budget in its defaults instead, so its own max_disk
    values still count."""
    config_text = ship_mirrors_file(config_file, launcher.disk_budget if disk else None) if config_file else None
    extra: list[str] = []
    if disk and (max_disk is not None or not config_file):
        value = launcher.max_disk(max_disk)
        extra = ["--max-disk", format_size(value)] if value else []
    name = "-".join(["hubpad", argv[0], *([about] if about else [])])
    return Command((*argv, *extra), config_text, name)


def label_value(text: str) -> str:
    """Jobs labels allow letters, digits, '-' and '_' (100 at most)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", text)[:100]


def script(install: Install, command: Command, run_lines: Sequence[str] = ()) -> str:
    """The job's shell script: install this hubpad, write the shipped mirrors file, run the command (or
    `run_lines`, a script of hubpad commands)."""
    pip = "pip install --no-cache-dir --quiet --disable-pip-version-check --root-user-action=ignore"
    lines = ["set -eu"]
    if install.lock:
        lines.append(f"{pip} --require-hashes -r {shlex.quote(install.lock)}")
    lines.append(f"{pip}{' --no-deps' if install.lock else ''} {shlex.quote(install.requirement)}")
    if command.config_text is not None:
        lines.append(f'printf "%s\\n" "${CONFIG_ENV}" > {CONFIG_NAME}')
    lines += run_lines or ["exec " + shlex.join(["hubpad", *command.argv])]
    return "\n".join(lines)


def job_env(command: Command) -> dict[str, str]:
    """What the job's environment holds: never the token (that is a secret); the Hub endpoint when not the default."""
    env = {"PYTHONUNBUFFERED": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    if endpoint() != "https://huggingface.co":
        env["HF_ENDPOINT"] = endpoint()
    if command.config_text is not None:
        env[CONFIG_ENV] = command.config_text
    return env


def job_spec(launcher: Launcher, command: Command, run_lines: Sequence[str] = ()) -> dict:
    """The keyword arguments of HfApi.run_job / create_scheduled_job for this command."""
    return {"image": IMAGE_WITH_GIT if launcher.install.needs_git else IMAGE,
            "command": ["bash", "-c", script(launcher.install, command, run_lines)], "env": job_env(command),
            "secrets": {"HF_TOKEN": launcher.token}, "flavor": launcher.flavor, "timeout": launcher.timeout_s,
            "labels": {"hubpad": label_value(command.argv[0]), "hubpad-version": launcher.install.label,
                       **dict(command.labels)},
            "name": label_value(command.name)}


@contextmanager
def jobs_errors(namespace: str, what: str):
    """Hub errors of a Jobs call as one line; 402 and 403 say what the namespace needs to run Jobs."""
    try:
        with hub_errors(what):
            yield
    except HubError as exc:
        if exc.status == 402:
            raise HubError(f"namespace {namespace} cannot run Jobs ({exc}): Jobs are billed per minute to the "
                           f"namespace and need a positive credit balance (a PRO, Team or Enterprise plan's credits "
                           f"count); add credits at https://huggingface.co/settings/billing, or run it with "
                           f"--namespace ORG or on your own machine", 402) from None
        if exc.status == 403:
            raise HubError(f"namespace {namespace}: this token may not run Jobs there ({exc}); use a token of a "
                           f"member with write access (a fine-grained token also needs the Jobs permission), or "
                           f"--namespace", 403) from None
        raise


def submit(launcher: Launcher, command: Command, *, attempts: int | None = None):
    """Start the job; its JobInfo."""
    spec = job_spec(launcher, command)
    with jobs_errors(launcher.namespace, f"start a job in {launcher.namespace}"):
        job = launcher.api.run_job(**spec, attempts=attempts or launcher.attempts, namespace=launcher.namespace)
    return job


def inspect(launcher: Launcher, job_id: str):
    with jobs_errors(launcher.namespace, f"job {job_id}"):
        return launcher.api.inspect_job(job_id=job_id, namespace=launcher.namespace)


def cancel(launcher: Launcher, job_id: str) -> None:
    with jobs_errors(launcher.namespace, f"cancel job {job_id}"):
        launcher.api.cancel_job(job_id=job_id, namespace=launcher.namespace)


class JobFailed(HubpadError):
    """A job that did not complete; `problems` are hubpad's own error lines from it (or one line about the job)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@dataclass
class Followed:
    """What following a job saw: its final info and hubpad's `error:` lines in its log."""

    info: object
    errors: list[str]


def follow(launcher: Launcher, job, echo: Callable[[str], None] = log, prefix: str = "") -> Followed:
    """Print the job's log as it comes (hubpad's `error:` lines held back, to be the command's own), until it ends."""
    errors: list[str] = []
    try:
        with jobs_errors(launcher.namespace, f"logs of job {job.id}"):
            for event in launcher.api.fetch_job_logs(job_id=job.id, namespace=launcher.namespace, follow=True):
                for line in str(event).splitlines() or [""]:
                    line = redact(line)
                    if line.startswith("error: "):
                        errors.append(line[len("error: "):])
                    else:
                        echo(prefix + line)
    except HubError as exc:  # no log (a job that never started): its stage still says how it ended
        echo(f"{prefix}(no log: {exc})")
    info = inspect(launcher, job.id)
    while info.status.stage not in TERMINAL:
        time.sleep(1)
        info = inspect(launcher, job.id)
    return Followed(info, errors)


def outcome_problems(launcher: Launcher, followed: Followed) -> list[str]:
    """Nothing when the job completed; else the lines that say why it did not (hubpad's own first)."""
    info = followed.info
    stage, message = info.status.stage, info.status.message or ""
    if stage == "COMPLETED":
        return []
    if timed_out(info, launcher.timeout_s):
        return [f"job {info.id} timed out after {launcher.timeout_s}s (--timeout {_duration(launcher.timeout_s)}); "
                f"run the same command again: it resumes from what the job staged ({info.url})"]
    if followed.errors:
        return followed.errors
    if stage == "CANCELED":
        return [f"job {info.id} was cancelled ({info.url})"]
    return [f"job {info.id} ended {stage}{f' ({message})' if message else ''}; its log: {info.url}"]


def timed_out(info, timeout_s: int) -> bool:
    """The API's message says so, or the job ran out its whole timeout (the message's wording is not documented)."""
    if re.search(r"time[ds]?[\s_-]?out", info.status.message or "", re.I):
        return True
    running = getattr(getattr(info, "durations", None), "running_secs", None)
    return info.status.stage == "ERROR" and running is not None and running >= timeout_s - 1


def _duration(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def run(launcher: Launcher, command: Command, *, detach: bool = False, echo: Callable[[str], None] = log,
        started: Callable[[object], None] | None = None):
    """Start one job and (unless detached) follow it to its end; raises JobFailed unless it completed. `started`
    gets the JobInfo as soon as the job exists (a page links to it).

    Ctrl-C while following cancels the job, then stops the command (KeyboardInterrupt goes on up)."""
    job = submit(launcher, command)
    try:
        if started is not None:
            started(job)
        echo(f"started job {job.id} on {launcher.flavor} ({launcher.price}, timeout "
             f"{_duration(launcher.timeout_s)}) in {launcher.namespace}, hubpad {launcher.install.pin[:12]}: {job.url}")
        if detach:
            return job
        followed = follow(launcher, job, echo)
    except KeyboardInterrupt:
        stop_jobs(launcher, [job.id], echo)
        raise
    problems = outcome_problems(launcher, followed)
    if problems:
        raise JobFailed(problems)
    return followed.info


def stop_jobs(launcher: Launcher, job_ids: Sequence[str], echo: Callable[[str], None] = log) -> None:
    """Cancel the jobs still running (Ctrl-C): nothing this command started is left behind."""
    for job_id in job_ids:
        try:
            if inspect(launcher, job_id).status.stage not in TERMINAL:
                cancel(launcher, job_id)
                echo(f"cancelled job {job_id}")
        except HubpadError as exc:
            echo(f"could not cancel job {job_id}: {exc}")
