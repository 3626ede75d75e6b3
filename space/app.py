"""hubpad's Space: sign in with Hugging Face, name a model, pick a tensor-parallel size, get a padded derivative.

Run it locally with `python space/app.py` (the Hub at HF_ENDPOINT, your own login standing in for the Space's
sign-in); on a Space, this file is the app. Settings: hubpad_space/settings.py.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
if (HERE.parent / "hubpad" / "__init__.py").is_file():  # a checkout: hubpad's package beside space/
    sys.path.insert(1, str(HERE.parent))

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def main() -> None:
    from hubpad_space.ui import build, launch

    page = build()
    # Names a visitor types are Hub repo ids only; hubpad reads a value whose first path component exists in the
    # working directory as a local folder, so the app works from an empty one (the Space's files stay out of reach).
    os.chdir(tempfile.mkdtemp(prefix="hubpad-space-"))
    launch(page, server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1" if not os.environ.get("SPACE_ID")
                                            else "0.0.0.0"),
           server_port=int(os.environ.get("GRADIO_SERVER_PORT") or 7860))


if __name__ == "__main__":
    main()
