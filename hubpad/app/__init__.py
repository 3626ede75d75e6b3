"""The user-facing layer: the click CLI, GitHub Actions output, progress bars, plan reports and the demo."""

__all__: list[str] = []  # nothing imports this layer; the entry point is hubpad.app.cli:main
