"""corewarding."""

from pathlib import Path

# The checkout the package runs from (an editable install, `pip install -e .`): flows/, dashboard/, configs/ and its
# git history live there. src/corewarding/__init__.py -> the checkout's root.
CHECKOUT = Path(__file__).resolve().parents[2]
