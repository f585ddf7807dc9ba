"""``krr-explorer``: start the browser app (the console command ``pip install ".[app]"`` installs).

It runs ``streamlit run app.py`` in the app's own directory, so the app's ``.streamlit/config.toml``
applies exactly as it does from a checkout; any further arguments go to Streamlit
(``krr-explorer --server.port 8502 --server.headless true``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path


def app_dir() -> Path:
    """The directory holding ``app.py``: the checkout this module lives in, else the installed
    ``krr_explorer`` package. The checkout comes first: an editable install of another checkout
    also answers to ``krr_explorer``."""
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "app.py").is_file():
        return checkout
    spec = importlib.util.find_spec("krr_explorer")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return checkout


def main(argv: list[str] | None = None) -> None:
    root = app_dir()
    if not (root / "app.py").is_file():
        sys.exit(f'krr-explorer: app.py not found in {root}; reinstall with pip install ".[app]"')
    args = sys.argv[1:] if argv is None else argv
    os.chdir(root)
    os.execv(sys.executable, [sys.executable, "-m", "streamlit", "run", str(root / "app.py"), *args])


if __name__ == "__main__":
    main()
