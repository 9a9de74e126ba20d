"""Code-span scanner benchmark: the invisible-character rule's scanner of code spans (adapters/invisible.py
``markdown_code_ranges``, and the live page's ``codeRanges`` in live-markdown.js), beside the scanner it replaced, in
the same run. The cost must grow linearly with the text: a text of many backtick runs that open no span (an agent's
answer quoting shell or Markdown) made the old one scan every later run for each opener, and search the gap up to
each for a blank line.

Run: ``uv run python bench/bench_code_spans.py [--repeat N]`` (the JS rows need ``node`` on PATH).

Inputs, at 5k to 40k characters: ``opener + pairs`` (one ``````  `` then ```a``` pairs), ``a`` then a``` (an
unmatched double run, then single runs alternating with text: "alternating backticks/text"), ``alternating`` (single
runs and letters: every run closes the one before). Columns: ms per text (the best of ``--repeat``) and ns per
character (flat when linear), for the baseline (the old scan) and the project's scanner, in Python and in node (there
the project's column is the page's whole ``stripInvisible`` after a reference, the scan included: its scanner is not
exported).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from streamrelay.adapters.invisible import markdown_code_ranges  # noqa: E402
from tests.unit.test_invisible_rule_edges import _spans_by_scanning as scanned  # noqa: E402  (the old scanner: the tests' oracle)

SCRIPT = ROOT / "streamrelay" / "adapters" / "web" / "static" / "live-markdown.js"
SIZES = (5_000, 10_000, 20_000, 40_000)


def inputs(n: int) -> dict[str, str]:
    """The texts of about ``n`` characters (module docstring)."""
    return {
        "opener + pairs": "``" + "`a`" * (n // 3),
        "a`` then a`": "a``" + "a`" * (n // 2),
        "alternating": "a`" * (n // 2),
    }


OLD_JS = r"""
function oldSpans(text) {
  const runs = [];
  const run = /`+/g;
  for (let m = run.exec(text); m; m = run.exec(text)) runs.push([m.index, m.index + m[0].length]);
  const spans = [];
  let i = 0;
  while (i < runs.length) {
    const [runStart, runEnd] = runs[i];
    i += 1;
    for (let j = i; j < runs.length; j += 1) {
      if (/\n[ \t]*\n/.test(text.slice(runEnd, runs[j][0]))) break;
      if (runs[j][1] - runs[j][0] === runEnd - runStart) { spans.push([runStart, runs[j][1]]); i = j + 1; break; }
    }
  }
  return spans;
}
"""


def best_ms(function: Callable[[str], object], text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        function(text)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def node_rows(repeat: int) -> dict[tuple[str, int], tuple[float, float]]:
    """(input, size) -> (baseline ms, project ms) in node: the page's stripInvisible on the text after a reference
    (so that it looks for code), beside the old scan alone."""
    node = shutil.which("node")
    if node is None:
        return {}
    cases = [[name, n, text] for n in SIZES for name, text in inputs(n).items()]
    script = (
        f"global.window = {{}}; require({json.dumps(str(SCRIPT))});{OLD_JS}"
        "const strip = window.streamrelayMarkdown.stripInvisible;"
        "const best = (f, t) => { f(t); let b = 1e9; for (let r = 0; r < REPEAT; r += 1) {"
        " const s = performance.now(); f(t); b = Math.min(b, performance.now() - s); } return b; };"
        "const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(cases.map(([name, n, text]) =>"
        " [name, n, best(oldSpans, text), best(strip, '&#x200B; ' + text)])));"
    ).replace("REPEAT", str(repeat))
    done = subprocess.run([node, "-e", script], input=json.dumps(cases), capture_output=True, text=True, check=True)
    return {(name, n): (old, new) for name, n, old, new in json.loads(done.stdout)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    js = node_rows(args.repeat)
    header = f"{'input':16} {'chars':>6} | {'py base ms':>10} {'ns/char':>7} | {'py ms':>7} {'ns/char':>7}"
    print(header + (f" | {'js base ms':>10} {'ns/char':>7} | {'js ms':>7} {'ns/char':>7}" if js else ""))
    for n in SIZES:
        for name, text in inputs(n).items():
            assert scanned(text) == markdown_code_ranges(text)
            old, new = best_ms(scanned, text, args.repeat), best_ms(markdown_code_ranges, text, args.repeat)
            row = [f"{name:16} {len(text):6}", _cell(old, text, 10), _cell(new, text, 7)]
            if (name, n) in js:
                js_old, js_new = js[(name, n)]
                row += [_cell(js_old, text, 10), _cell(js_new, text, 7)]
            print(" | ".join(row))


def _cell(ms: float, text: str, width: int) -> str:
    return f"{ms:{width}.1f} {ms * 1e6 / len(text):7.0f}"


if __name__ == "__main__":
    main()
