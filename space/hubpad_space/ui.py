"""The page: Gradio components in three steps (which model, options, pad it), wired to handlers.py.

Where a run executes is a choice of routes (`ROUTES`); this Space's own queue is the only one today. A route that runs
the mirror as a Hugging Face Job in the user's namespace (hubpad's Jobs issue) plugs in as a second entry, and shows
the "Where it runs" picker; a scheduled refresh through such a route is the place for a "keep it up to date" checkbox,
next to the workflow snippet the page shows now.
"""

from __future__ import annotations

import hashlib
import os

import gradio as gr
from gradio.utils import get_space

from hubpad_space import handlers, view
from hubpad_space.handlers import Visitor
from hubpad_space.job import execute
from hubpad_space.runs import Runs
from hubpad_space.settings import Settings

INTRO = """# Pad a model for the GPUs you have

Many big models only run split across 1, 2, 4 or 8 GPUs. **hubpad** makes a copy that runs on another number, such as
**three DGX Sparks**: it adds heads and neurons that are exactly zero, so the copy gives the same answers, and publishes
it to your Hugging Face account with instructions to serve it. Nothing to install: sign in, name a model, press *Pad it*.
"""
TP_HELP = ("Tensor-parallel size (TP): how many GPUs, or DGX Sparks, share the model. Three Sparks: pick 3.")


def routes(settings: Settings) -> dict[str, tuple[str, Runs]]:
    """Where runs execute: value -> (label, queue). Today only this Space, one mirror at a time."""
    return {"space": ("On this Space: one run at a time, in a queue", Runs(lambda run: execute(run, settings)))}


def build(settings: Settings | None = None) -> gr.Blocks:
    settings = settings or Settings.from_env()
    where = routes(settings)
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
        route = gr.Radio([(label, key) for key, (label, _) in where.items()], value="space", label="Where it runs",
                         visible=len(where) > 1, elem_id="hp-route")
        queue_note = gr.HTML(elem_id="hp-queue")
        pad = gr.Button("Pad it", variant="primary", elem_id="hp-pad")
        run_box = gr.HTML(elem_id="hp-run")
        with gr.Accordion("Keep it up to date", open=False, elem_id="hp-fresh-box"):
            gr.Markdown(view.fresh_help(settings))
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

        def queue_of(key: str) -> Runs:
            return where.get(key or "space", where["space"])[1]

        # -- page load: who is here, and their run if they have one --------------------------------------------

        def on_load(last_run, chosen, profile: gr.OAuthProfile | None, oauth: gr.OAuthToken | None):
            v = who(profile, oauth)
            hello = (f"Signed in as **{v.user}**: padded copies are published to your account." if v.signed_in
                     else handlers.SIGN_IN_FIRST)
            box, active = _show_run(last_run, v)
            busy = view.message(view.queue_line(queue_of("space").size(), queued=active))
            # the visitor's last run (running, or lost to a restart) fills the form again: Pad resumes it; else the
            # model they had picked before signing in (the sign-in reloads the page)
            again = box and (last_run or {}).get("user") == v.user and (last_run or {}).get("upstream")
            name = last_run["upstream"] if again else (chosen or {}).get("upstream")
            model = gr.Dropdown(value=name, choices=[name]) if name else gr.skip()
            return hello, box, gr.Timer(active=active), busy, model

        def _show_run(last_run, v: Visitor) -> tuple[str, bool]:
            runs = queue_of("space")
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

        def on_model(name, current_target, auto, last_run, remembered, profile: gr.OAuthProfile | None,
                     oauth: gr.OAuthToken | None):
            v = who(profile, oauth)
            advised = handlers.advise_upstream(name, v, settings)
            if advised.advice is None:
                return (view.message(advised.error, "error"), gr.Radio(choices=[], value=None), current_target,
                        auto, "", gr.skip())
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
                    view.form_memory(name, chosen, new_target, v.user))

        def _target_for(name, chosen, current, auto, v: Visitor) -> str:
            """The default name for this model and TP, unless the visitor typed a name of their own."""
            if current and current != auto:
                return current
            return handlers.default_target(name, chosen, v) if chosen else ""

        upstream.change(on_model, inputs=[upstream, target, auto_target, last, form], outputs=[advice, tp, target,
                        auto_target, target_note, form], trigger_mode="always_last", concurrency_limit=4, concurrency_id="headers",
                        show_progress="full")

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

        # -- the run -----------------------------------------------------------------------------------------

        def on_pad(name, chosen, target_name, vis, draft_name, key, last_run, profile: gr.OAuthProfile | None,
                   oauth: gr.OAuthToken | None):
            v = who(profile, oauth)
            runs = queue_of(key)
            try:
                req = handlers.make_request(name, chosen, target_name, vis == "private", draft_name, v, settings)
                run = handlers.start(req, v, runs)
            except ValueError as exc:
                return (view.message(str(exc), "error"), last_run, gr.Timer(active=False), gr.skip(), gr.skip(),
                        gr.skip())
            return (view.run_view(run, runs.place(run), runs.size()), view.remembered(run, req),
                    gr.Timer(active=True), view.mirrors_entry(req), view.workflow(req, settings),
                    view.message(view.queue_line(runs.size(), queued=True)))

        pad.click(on_pad, inputs=[upstream, tp, target, visibility, draft, route, last],
                  outputs=[run_box, last, ticker, fresh_yaml, fresh_workflow, queue_note], concurrency_limit=4,
                  concurrency_id="headers")

        def on_tick(last_run, profile: gr.OAuthProfile | None, oauth: gr.OAuthToken | None):
            box, active = _show_run(last_run, who(profile, oauth))
            return box, gr.Timer(active=active), view.message(view.queue_line(queue_of("space").size(), active))

        ticker.tick(on_tick, inputs=[last], outputs=[run_box, ticker, queue_note], show_progress="hidden",
                    concurrency_limit=None)
    return page


def _browser_secret() -> str:
    return hashlib.sha256(f"hubpad-space:{os.environ.get('OAUTH_CLIENT_SECRET') or ''}".encode()).hexdigest()[:32]


def launch(page: gr.Blocks, **kw):
    """Serve the page (Gradio's queue: each event's concurrency is set where it is wired)."""
    return page.queue(default_concurrency_limit=None).launch(css=view.CSS, footer_links=[], **kw)
