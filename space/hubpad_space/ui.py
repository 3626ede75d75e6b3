"""The page: Gradio components in three steps (which model, options, pad it), wired to handlers.py.

Where a run executes is a choice of routes (`routes`): this Space's queue, or, where this Space can pin the hubpad a
job installs, a job in the user's own namespace on Hugging Face Jobs (billed to them). "Keep it up to date" makes
the derivative's scheduled refresh there (fresh.py), and always shows the `hubpad.yaml` and the workflow that do the
same from a repository of the user's own.
"""

from __future__ import annotations

import hashlib
import os

import gradio as gr
from gradio.utils import get_space

from hubpad.util.log import log

from hubpad_space import fresh, handlers, view
from hubpad_space.handlers import Visitor
from hubpad_space.job import execute
from hubpad_space.runs import ON_JOBS, ON_SPACE, Runs
from hubpad_space.settings import Settings

INTRO = """# Pad a model for the GPUs you have

Many big models only run split across 1, 2, 4 or 8 GPUs. **hubpad** makes a copy that runs on another number, such as
**three DGX Sparks**: it adds heads and neurons that are exactly zero, so the copy gives the same answers, and publishes
it to your Hugging Face account with instructions to serve it. Nothing to install: sign in, name a model, press *Pad it*.
"""
TP_HELP = ("Tensor-parallel size (TP): how many GPUs, or DGX Sparks, share the model. Three Sparks: pick 3.")


def routes(settings: Settings) -> dict[str, str]:
    """Where runs may execute: value -> label. Jobs only where this Space can pin the hubpad a job installs."""
    where = {ON_SPACE: "On this Space: free, one run at a time, in a queue"}
    off = settings.jobs_off()
    if off:
        log(f"space: no Jobs route: {off}")
    else:
        where[ON_JOBS] = (f"As a job on Hugging Face Jobs in your account, billed to you ({settings.jobs_flavor}, "
                          f"at most {settings.jobs_timeout}; no queue)")
    return where


def build(settings: Settings | None = None) -> gr.Blocks:
    settings = settings or Settings.from_env()
    where = routes(settings)
    runs = Runs(lambda run: execute(run, settings))
    on_space = get_space() is not None

    def who(profile, oauth) -> Visitor:
        return handlers.visitor(profile, oauth, on_space)

    with gr.Blocks(title="hubpad: pad a model for your tensor-parallel size", analytics_enabled=False) as page:
        gr.Markdown(INTRO)
        with gr.Row(equal_height=True):
            gr.LoginButton(scale=0, min_width=330)
            signed = gr.Markdown(elem_id="hp-signed")
        gr.Markdown("## 1. Which model?")
        upstream = gr.Dropdown(label="Model on the Hugging Face Hub", choices=[], value=None, allow_custom_value=True,
                               filterable=True, elem_id="hp-upstream",
                               info="Type part of its name and pick it from the list, or type namespace/name and "
                                    "press Enter.")
        advice = gr.HTML(elem_id="hp-advice")
        gr.Markdown("## 2. Options")
        tp = gr.Radio(label=TP_HELP, choices=[], value=None, elem_id="hp-tp",
                      info="The sizes appear with the advisor's verdict once a model is named.")
        target = gr.Textbox(label="Name of the padded copy", elem_id="hp-target",
                            info="Published to your account: <you>/<model>-TP<tp> unless you change it.")
        visibility = gr.Radio([("Public", "public"), ("Private", "private")], value="public", label="Visibility",
                              elem_id="hp-visibility")
        with gr.Accordion("Speculative-decoding draft (optional)", open=False, elem_id="hp-draft-box"):
            draft = gr.Textbox(label="Draft model", elem_id="hp-draft",
                               info="An EAGLE-3, DSpark or MTP draft made for this model (Llama, Qwen3, DeepSeek "
                                    "families have them). It is padded for the same TP, and the serve command uses it.")
        target_note = gr.HTML(elem_id="hp-target-note")
        gr.Markdown("## 3. Pad it")
        route = gr.Radio([(label, key) for key, label in where.items()], value=ON_SPACE, label="Where it runs",
                         visible=len(where) > 1, elem_id="hp-route",
                         info="A job runs on Hugging Face's machines in your account and is billed to it per minute "
                              "(Jobs need credits on your account); this Space is free but pads one model at a "
                              "time.")
        keep = gr.Checkbox(False, label="Keep it up to date: re-pad it when the model changes (checked every 6 hours "
                                        "by a scheduled job in your account, billed to you)",
                           visible=ON_JOBS in where, elem_id="hp-keep")
        queue_note = gr.HTML(elem_id="hp-queue")
        pad = gr.Button("Pad it", variant="primary", elem_id="hp-pad")
        fresh_note = gr.HTML(elem_id="hp-fresh-note")
        run_box = gr.HTML(elem_id="hp-run")
        with gr.Accordion("Keep it up to date from a repository of your own", open=False, elem_id="hp-fresh-box"):
            gr.Markdown(fresh.fresh_help(settings))
            fresh_yaml = gr.Code(language="yaml", label="hubpad.yaml", interactive=False, elem_id="hp-fresh-yaml")
            fresh_workflow = gr.Code(language="yaml", label=".github/workflows/hubpad.yml", interactive=False,
                                     elem_id="hp-fresh-workflow")
        ticker = gr.Timer(1.0, active=False)
        # The browser's memory of the visitor's last run. Its key must outlive a restart of the Space (Gradio's default
        # is new at every start, which would make a run lost to a restart unreadable): the Space's OAuth secret
        # is stable. Nothing in it is secret, and a value a visitor edits only ever reaches their own runs.
        last = gr.BrowserState(None, storage_key="hubpad-space-last-run", secret=_browser_secret())
        form = gr.BrowserState(None, storage_key="hubpad-space-form", secret=_browser_secret())  # survives sign-in
        auto_target = gr.State("")  # the last default name filled in: replaced as TP changes, unless edited
        advised_for = gr.State(None)  # the model whose table the page shows

        # -- page load: who is here, and their run if they have one --------------------------------------------

        def on_load(last_run, chosen, profile: gr.OAuthProfile | None, oauth: gr.OAuthToken | None):
            v = who(profile, oauth)
            hello = (f"Signed in as **{v.user}**: padded copies are published to your account." if v.signed_in
                     else handlers.SIGN_IN_FIRST)
            box, active = _show_run(last_run, v)
            busy = view.message(view.queue_line(runs.size(), queued=active))
            # the visitor's last run (running, or lost to a restart) fills the form again: Pad resumes it; else the
            # model they had picked before signing in (the sign-in reloads the page)
            again = box and (last_run or {}).get("user") == v.user and (last_run or {}).get("upstream")
            name = last_run["upstream"] if again else (chosen or {}).get("upstream")
            model = gr.Dropdown(value=name, choices=[name]) if name else gr.skip()
            return hello, box, gr.Timer(active=active), busy, model

        def _show_run(last_run, v: Visitor) -> tuple[str, bool]:
            run = runs.get((last_run or {}).get("run"))
            if run is not None and run.request.user == v.user:
                return view.run_view(run, runs.place(run), runs.size()), run.active
            return view.message(handlers.lost_run(last_run, v), "error"), False

        page.load(on_load, inputs=[last, form], outputs=[signed, run_box, ticker, queue_note, upstream])

        # -- the model: completion, then the advisor's table ---------------------------------------------------

        def on_type(data: gr.KeyUpData, profile: gr.OAuthProfile | None, oauth: gr.OAuthToken | None):
            return gr.Dropdown(choices=handlers.suggestions(data.input_value, who(profile, oauth)))

        # "multiple": Gradio 6.31's "always_last" sends a queued key_up with the FIRST pending keystroke's text
        upstream.key_up(on_type, inputs=None, outputs=[upstream], trigger_mode="multiple", show_progress="hidden",
                        concurrency_limit=8, concurrency_id="search")

        def on_model(name, current_target, auto, last_run, remembered, shown, profile: gr.OAuthProfile | None,
                     oauth: gr.OAuthToken | None):
            if name and name == shown:  # the same model again (the list of suggestions came back late): a second
                return (gr.skip(),) * 7  # answer would land after the visitor typed a name, and undo it
            v = who(profile, oauth)
            advised = handlers.advise_upstream(name, v, settings)
            if advised.advice is None:
                return (view.message(advised.error, "error"), gr.Radio(choices=[], value=None), current_target,
                        auto, "", gr.skip(), None)
            chosen = view.preferred_tp(advised.advice)
            name = advised.upstream
            new_target = _target_for(name, chosen, current_target, auto, v)
            for mine in (last_run or {}, remembered or {}):  # the visitor's last choices for this model
                if mine.get("upstream") == name and advised.row(mine.get("tp")):
                    chosen = mine["tp"]
                    own = mine.get("user") == v.user and v.signed_in and mine.get("target")
                    new_target = mine["target"] if own else handlers.default_target(name, chosen, v)
                    break
            return (view.advisor_table(advised.advice, chosen),
                    gr.Radio(choices=view.tp_choices(advised.advice), value=chosen), new_target, new_target,
                    view.message(handlers.target_status(name, chosen, new_target, v)),
                    view.form_memory(name, chosen, new_target, v.user), name)

        def _target_for(name, chosen, current, auto, v: Visitor) -> str:
            """The default name for this model and TP, unless the visitor typed a name of their own."""
            if current and current != auto:
                return current
            return handlers.default_target(name, chosen, v) if chosen else ""

        upstream.change(on_model, inputs=[upstream, target, auto_target, last, form, advised_for],
                        outputs=[advice, tp, target, auto_target, target_note, form, advised_for],
                        trigger_mode="always_last", concurrency_limit=4, concurrency_id="headers", show_progress="full")

        def on_tp(name, chosen, current_target, auto, profile: gr.OAuthProfile | None,
                  oauth: gr.OAuthToken | None):
            v = who(profile, oauth)
            new_target = _target_for(name, chosen, current_target, auto, v)
            return (new_target, new_target, view.message(handlers.target_status(name, chosen, new_target, v)),
                    view.form_memory(name, chosen, new_target, v.user))

        tp.input(on_tp, inputs=[upstream, tp, target, auto_target], outputs=[target, auto_target, target_note, form],
                 trigger_mode="always_last", concurrency_limit=8, concurrency_id="search")

        def on_target(name, chosen, current_target, profile: gr.OAuthProfile | None, oauth: gr.OAuthToken | None):
            v = who(profile, oauth)
            return (view.message(handlers.target_status(name, chosen, current_target, v)),
                    view.form_memory(name, chosen, current_target, v.user))

        gr.on([target.submit, target.blur], on_target, inputs=[upstream, tp, target], outputs=[target_note, form],
              trigger_mode="always_last", concurrency_limit=8, concurrency_id="search")

        # -- keep it up to date: the hubpad.yaml and the workflow of the form as it stands -----------------------

        def on_form(name, chosen, target_name, vis, draft_name, profile: gr.OAuthProfile | None,
                    oauth: gr.OAuthToken | None):
            req = handlers.form_request(name, chosen, target_name, vis == "private", draft_name, who(profile, oauth))
            if req is None:
                return "", ""
            return fresh.mirrors_entry(req, settings.shard_size), fresh.workflow(req, settings)

        gr.on([upstream.change, tp.change, target.change, visibility.change, draft.change], on_form,
              inputs=[upstream, tp, target, visibility, draft], outputs=[fresh_yaml, fresh_workflow],
              trigger_mode="always_last", show_progress="hidden", concurrency_limit=8, concurrency_id="search")

        # -- the run -----------------------------------------------------------------------------------------

        def on_pad(name, chosen, target_name, vis, draft_name, key, kept, last_run, profile: gr.OAuthProfile | None,
                   oauth: gr.OAuthToken | None):
            v = who(profile, oauth)
            try:
                req = handlers.make_request(name, chosen, target_name, vis == "private", draft_name, v, settings,
                                            key if key in where else ON_SPACE)
                run, said = handlers.pad(req, v, runs, settings, keep_fresh=bool(kept) and ON_JOBS in where)
            except ValueError as exc:
                return view.message(str(exc), "error"), last_run, gr.Timer(active=False), gr.skip(), ""
            return (view.run_view(run, runs.place(run), runs.size()), view.remembered(run, req),
                    gr.Timer(active=True), view.message(view.queue_line(runs.size(), queued=True)),
                    view.message(said, "done"))

        pad.click(on_pad, inputs=[upstream, tp, target, visibility, draft, route, keep, last],
                  outputs=[run_box, last, ticker, queue_note, fresh_note], concurrency_limit=4,
                  concurrency_id="headers")

        def on_tick(last_run, profile: gr.OAuthProfile | None, oauth: gr.OAuthToken | None):
            box, active = _show_run(last_run, who(profile, oauth))
            run = runs.get((last_run or {}).get("run"))
            known = run is not None and run.jobs and (last_run or {}).get("jobs") != run.jobs
            return (box, gr.Timer(active=active), view.message(view.queue_line(runs.size(), active)),
                    {**last_run, "jobs": list(run.jobs)} if known else gr.skip())  # a restart can name the job

        ticker.tick(on_tick, inputs=[last], outputs=[run_box, ticker, queue_note, last], show_progress="hidden",
                    concurrency_limit=None)
    return page


def _browser_secret() -> str:
    return hashlib.sha256(f"hubpad-space:{os.environ.get('OAUTH_CLIENT_SECRET') or ''}".encode()).hexdigest()[:32]


def launch(page: gr.Blocks, **kw):
    """Serve the page (Gradio's queue: each event's concurrency is set where it is wired)."""
    return page.queue(default_concurrency_limit=None).launch(css=view.CSS, footer_links=[], **kw)
