"""Write docs/cli.md from the commands' help (citegate_assets/cli/reference.py); `--check` exits 1 when it is stale.

python scripts/cli_docs.py            # regenerate docs/cli.md
python scripts/cli_docs.py --check    # what CI and tests/test_cli_docs.py check
python scripts/cli_docs.py --check --page FILE   # check another copy of the page
"""

from __future__ import annotations

import sys
from pathlib import Path

from citegate_assets.cli import citegate
from citegate_assets.cli.reference import render

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def main(argv: list[str]) -> int:
    page = Path(argv[argv.index("--page") + 1]) if "--page" in argv else PAGE
    text = render(citegate)
    if "--check" in argv:
        current = page.read_text(encoding="utf-8") if page.exists() else ""
        if current != text:
            print(f"{page} is stale: run `python scripts/cli_docs.py` to regenerate it", file=sys.stderr)
            return 1
        print(f"{page} is current")
        return 0
    page.write_text(text, encoding="utf-8")
    print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
