"""Run every benchmark, one subprocess each, and write the table to docs/benchmarks.md.

``make bench`` runs ``python -m bench.run_all`` in ``.venv-bench``. Each bench module
runs in a fresh interpreter (its own ``trio.run``, its own daemon subprocesses) and
hands its result back as JSON. A bench that misses a target is run again with
``--quick --profile`` (pyinstrument; a daemon bench profiles the daemon process) and
the top of that profile is written under the table.

Only the part of docs/benchmarks.md between the ``bench:begin``/``bench:end`` markers
is rewritten: the analysis written by hand around it stays.

Options: ``--quick`` (few repetitions: a smoke run, nothing is written unless
``--write``), ``--only B3,B5``, ``--no-profile``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, BenchResult, machine_line

__all__ = ["BENCHES", "main", "render"]

BENCHES = [
    ("B1", "bench.b1_ask_roundtrip"),
    ("B2", "bench.b2_park_resume"),
    ("B3", "bench.b3_cancel_latency"),
    ("B4", "bench.b4_scale"),
    ("B5", "bench.b5_watcher"),
    ("B6", "bench.b6_double_resume"),
    ("B7", "bench.b7_cold_start"),
    ("B8", "bench.b8_sandbox"),
    ("B9", "bench.b9_scale_growth"),
    ("B11", "bench.b11_redis_daemons"),
    ("B12", "bench.b12_frontends"),
    ("B15", "bench.b15_hello"),
    ("B13", "bench.b13_model_turn"),
    ("B14", "bench.b14_conversation"),
    ("B17", "bench.b17_edit_file"),
    ("B16", "bench.b16_mcp"),
]
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN = "<!-- bench:begin (written by bench/run_all.py; edit outside these markers) -->"
END = "<!-- bench:end -->"
PROFILE_LINES = 45

_HEAD = """# Benchmarks

What the engine exists for, measured beside what a user would pick instead, in one run
on one machine. Run them with `make bench` (17 minutes in the run below, on a busy
2-core machine); each bench is a module in `bench/`, never part of the test suite.

"""


def _run_one(module: str, out: Path, extra: list[str]) -> BenchResult | str:
    command = [sys.executable, "-m", module, "--json", str(out), *extra]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    if done.returncode != 0 or not out.exists():
        sys.stderr.write(done.stderr)
        return f"`{' '.join(command[1:3])}` failed with exit code {done.returncode}"
    return BenchResult.from_json(json.loads(out.read_text()))


def _profile_head(path: Path) -> str:
    """The profile's call tree, trimmed: pyinstrument's text output, first lines."""
    candidates = sorted(path.parent.glob(path.stem + "*"))
    texts = []
    for candidate in candidates:
        lines = candidate.read_text(errors="replace").splitlines()
        texts.append(f"{candidate.name}:\n" + "\n".join(lines[:PROFILE_LINES]))
    return "\n\n".join(texts)


def render(
    results: list[BenchResult], failures: dict[str, str], profiles: dict[str, str], command: str
) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        BEGIN,
        "",
        f"- **Command:** `make bench` (`{command}` in .venv-bench)",
        f"- **Date:** {now}",
        f"- **Machine:** {machine_line()}",
        "",
        "| bench | metric | value | baseline (same run) | ratio | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for result in results:
        for row in result.rows:
            met = {True: "yes", False: "**no**", None: ""}[row.met]
            out.append(
                f"| {result.id} | {row.metric} | {row.value} | {row.baseline} | {row.ratio} "
                f"| {row.target} | {met} |"
            )
    for bench_id, message in failures.items():
        out.append(f"| {bench_id} | (did not run) | {message} | | | | **no** |")
    out.append("")
    out.append("Notes of this run:")
    out.append("")
    for result in results:
        out.append(f"- **{result.id}** {result.title} ({result.seconds:.0f} s):")
        for note in result.notes:
            out.append(f"  {note}.")
    if profiles:
        out.append("")
        out.append("Profiles of the benches that missed a target (`--quick --profile`):")
        for bench_id, text in profiles.items():
            out.append("")
            out.append(f"<details><summary>{bench_id}</summary>")
            out.append("")
            out.append("```")
            out.append(text)
            out.append("```")
            out.append("")
            out.append("</details>")
    out.append("")
    out.append(END)
    return "\n".join(out)


def _write(section: str) -> None:
    text = DOC.read_text() if DOC.exists() else _HEAD + BEGIN + "\n" + END + "\n"
    if BEGIN in text and END in text:
        before = text[: text.index(BEGIN)]
        after = text[text.index(END) + len(END) :]
        text = before + section + after
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    DOC.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--no-profile", action="store_true")
    ns = parser.parse_args()
    only = {name.strip().upper() for name in ns.only.split(",") if name.strip()}
    extra = ["--quick"] if ns.quick else []
    results: list[BenchResult] = []
    failures: dict[str, str] = {}
    profiles: dict[str, str] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="agentrio-bench-") as tmp:
        for bench_id, module in BENCHES:
            if only and bench_id not in only:
                continue
            outcome = _run_one(module, Path(tmp) / f"{bench_id}.json", extra)
            if isinstance(outcome, str):
                failures[bench_id] = outcome
                continue
            results.append(outcome)
            if outcome.missed and not ns.no_profile:
                profile = Path(tmp) / f"profile-{bench_id}.txt"
                _run_one(
                    module,
                    Path(tmp) / f"{bench_id}-profile.json",
                    ["--quick", "--profile", str(profile)],
                )
                text = _profile_head(profile)
                if text:
                    profiles[bench_id] = text
    total = time.perf_counter() - started
    command = " ".join(["python -m bench.run_all", *sys.argv[1:]])
    print(f"all benches: {total:.0f} s")
    if not ns.quick or ns.write:
        _write(render(results, failures, profiles, command))
        print(f"wrote {DOC.relative_to(ROOT)}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
