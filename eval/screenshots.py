"""Screenshots of `debugger ask --html` pages in headless Chromium (issue 12: the page must render with its charts
visible in a real browser, at 8, 128 and 1,024 ranks).

Chromium is not a Python dependency: on Debian `apt-get install chromium`. Without it this exits 2 and says so.

    python -m trainlog_debugger.eval.screenshots OUTDIR [CASE ...]    # OUTDIR/<case>.png
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CASES = ("gen-slurm-8r-a", "gen-128r-026", "gen-1024r-027")
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")


def browser() -> str | None:
    """The first headless-capable Chromium on PATH, or None."""
    return next((p for b in BROWSERS if (p := shutil.which(b))), None)


def _chromium(exe: str, page: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    # --virtual-time-budget lets Plotly's scripts run to completion before the DOM or the picture is taken
    return subprocess.run([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--virtual-time-budget=10000", *args, page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=timeout)


def rendered_dom(exe: str, page: Path) -> str:
    """The page's DOM after its scripts ran: Plotly draws each chart as `svg.main-svg`, so the charts were really
    drawn when those are in it (a page that only carries the data has none)."""
    return _chromium(exe, page, "--dump-dom").stdout


def screenshot(exe: str, page: Path, png: Path, width: int = 1400, height: int = 2600) -> bool:
    _chromium(exe, page, f"--window-size={width},{height}", f"--screenshot={png.resolve()}")
    return png.is_file() and png.stat().st_size > 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    exe = browser()
    if exe is None:
        print("error: no Chromium on PATH (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    import tempfile
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    pages = Path(tempfile.mkdtemp(prefix="debugger-shots-"))  # the pages (~5 MB each, Plotly inside) are not kept
    for case in argv[1:] or DEFAULT_CASES:
        page = pages / f"{Path(case).name}.html"
        src = Path(case) if Path(case).exists() else ROOT / "cases" / case
        subprocess.run([sys.executable, "-m", "trainlog_debugger.agent.cli.app", "ask", str(src), "--html", str(page)],
                       capture_output=True, check=False)
        charts = rendered_dom(exe, page).count('class="main-svg"')
        ok = screenshot(exe, page, out / f"{Path(case).name}.png")
        print(f"{case}: {charts} chart layers drawn; screenshot {'written' if ok else 'FAILED'}")
    import shutil
    shutil.rmtree(pages, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
