"""Whole jobs: mirror, check, verify and card refresh, each sequencing the lower layers."""

__all__: list[str] = []  # import the job modules directly (run.mirror, run.check, run.verify, run.card_refresh)
