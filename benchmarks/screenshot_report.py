"""Screenshots of a report as a browser draws it: headless Chromium renders report.html at a desktop
width and the page is cut into screen-high PNGs, so a reader can check the figures and tables as
someone opening the file would see them (labels that overprint, a caption that leaks Markdown).

    python benchmarks/screenshot_report.py reports/example/report.html --out docs/screenshots

Needs Chromium (Debian: ``apt-get install chromium``); not part of the tests.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image, ImageChops

# flags for a sandboxed machine without a display or network (Chromium otherwise tries both)
_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html", type=Path, help="the report.html to draw")
    ap.add_argument("--out", type=Path, default=Path("docs/screenshots"), help="folder for the PNGs")
    ap.add_argument("--width", type=int, default=1280, help="window width in pixels (default 1280)")
    ap.add_argument("--screen", type=int, default=1500, help="height of one screenshot (default 1500)")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium", help="browser binary")
    args = ap.parse_args(argv)
    if not args.html.is_file():
        print(f"screenshot_report: {args.html}: no such file", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "full.png"
        cmd = [
            args.chromium, *_FLAGS, f"--user-data-dir={tmp}/profile", f"--window-size={args.width},16000",
            f"--screenshot={full}", args.html.resolve().as_uri(),
        ]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
        page = Image.open(full).convert("RGB")
    box = ImageChops.difference(page, Image.new("RGB", page.size, (255, 255, 255))).getbbox()
    bottom = (box[3] if box else page.height) + 20
    for n, top in enumerate(range(0, bottom, args.screen)):
        path = args.out / f"report-{n + 1}.png"
        page.crop((0, top, args.width, min(top + args.screen, bottom))).save(path, optimize=True)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
