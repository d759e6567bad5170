#!/usr/bin/env python3
"""Parses the raw output of bench/run.sh and writes bench/RESULTS.md.

    summarize.py --one TOOL PREFIX            print one run's numbers (progress line)
    summarize.py --manifest M --results R     median per cell over the rounds -> markdown

Per run, PREFIX.time holds `/usr/bin/time -f '%U %S %M'` (user s, sys s, max RSS KiB),
PREFIX.out the tool's stdout and, for stampede, PREFIX.json its report.
"""

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time

TOOLS = ("stampede", "stampede-base", "wrk", "oha")
# Issue #17: CPU per request at most wrk's at 50 and at 1,000 connections (issue #2 had 1.25×).
TARGET_CPU_VS_WRK = 1.0
WRK_RATIO_CONNS = (50, 1000)
TARGET_CPU_VS_OHA = 0.8
TARGET_RSS_BYTES = 20_000_000  # 20 MB, decimal: stricter than 20 MiB
RATIO_CONNS = 50
RSS_CONNS = 1000

WRK_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def parse_time(prefix):
    """user+sys seconds and peak RSS bytes from GNU time's last line."""
    lines = [ln for ln in read(prefix + ".time").splitlines() if ln.strip()]
    if not lines:
        return None, None
    parts = lines[-1].split()
    try:
        user, sys_, maxrss_kib = float(parts[0]), float(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        return None, None
    return user + sys_, maxrss_kib * 1024


def parse_wrk(prefix):
    out = read(prefix + ".out")
    r = {}
    m = re.search(r"^\s*(\d+) requests in ([\d.]+)(\w+)", out, re.M)
    if m:
        r["requests"] = int(m.group(1))
    m = re.search(r"^Requests/sec:\s*([\d.]+)", out, re.M)
    if m:
        r["rps"] = float(m.group(1))
    m = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s|m|h)\s*$", out, re.M)
    if m:
        r["p99_ms"] = float(m.group(1)) * WRK_UNITS[m.group(2)]
    errors = 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errors += sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        errors += int(m.group(1))
    r["errors"] = errors
    return r


def parse_oha(prefix):
    try:
        j = json.loads(read(prefix + ".out"))
    except json.JSONDecodeError:
        return {}
    ok = sum(j.get("statusCodeDistribution", {}).values())
    errs = j.get("errorDistribution", {})
    # Requests cut off by the -z deadline are not failures (oha itself leaves them out).
    errors = sum(v for k, v in errs.items() if "deadline" not in k.lower())
    r = {"requests": ok, "errors": errors}
    total = j.get("summary", {}).get("total")
    if total:
        r["rps"] = ok / total  # answered requests per second, like wrk and stampede
    p99 = j.get("latencyPercentiles", {}).get("p99")
    if p99 is not None:
        r["p99_ms"] = p99 * 1e3
    return r


def parse_stampede(prefix):
    try:
        j = json.loads(read(prefix + ".json"))
    except json.JSONDecodeError:
        return {}
    t = j.get("total", {})
    r = {"requests": t.get("requests"), "rps": t.get("rps"), "errors": t.get("errors", 0)}
    p99 = t.get("latencyMs", {}).get("p99")
    if p99 is not None:
        r["p99_ms"] = p99
    g = j.get("run", {}).get("generator", {})
    r["self_cpu_us_per_req"] = g.get("cpuMicrosPerRequest")
    r["self_rss_bytes"] = g.get("peakRssBytes")
    return r


PARSERS = {"wrk": parse_wrk, "oha": parse_oha, "stampede": parse_stampede, "stampede-base": parse_stampede}


def parse_run(tool, prefix):
    r = PARSERS[tool](prefix)
    cpu, rss = parse_time(prefix)
    r["cpu_s"], r["rss_bytes"] = cpu, rss
    if cpu is not None and r.get("requests"):
        r["cpu_us_per_req"] = cpu * 1e6 / r["requests"]
    return r


def fmt(v, digits=1):
    if v is None:
        return "—"
    if isinstance(v, float) and digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def med(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def spread(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    if len(vals) < 2:
        return ""
    return f"{min(vals):.2f}–{max(vals):.2f}"


def cpu_model():
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def verdict(ok):
    if ok is None:
        return "unknown"
    return "**met**" if ok else "**missed**"


def summarize(manifest, results):
    rows = []
    with open(manifest, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            rows.append(dict(zip(header, line.rstrip("\n").split("\t"))))
    cells = {}
    raw = []
    for row in rows:
        r = parse_run(row["tool"], row["prefix"])
        r.update(conns=int(row["conns"]), round=int(row["round"]), tool=row["tool"], rc=int(row["rc"]),
                 load1=float(row["load1_after"]))
        raw.append(r)
        cells.setdefault((r["conns"], r["tool"]), []).append(r)
    with open(os.path.join(os.path.dirname(manifest), "runs.json"), "w", encoding="utf-8") as f:
        json.dump(raw, f, indent=1)

    levels = sorted({c for c, _ in cells})
    tools = [t for t in TOOLS if any(t == tt for _, tt in cells)]
    # run.sh passes the run's facts as BENCH_* variables and keeps them in meta.json beside the
    # manifest, so `summarize.py --manifest M --results R` can regenerate the page later.
    meta_path = os.path.join(os.path.dirname(manifest), "meta.json")
    meta = {}
    if os.path.exists(meta_path):
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)

    def env(key, default=None):
        return os.environ.get(key) or meta.get(key) or default

    rounds = env("BENCH_ROUNDS", "?")
    loads = [r["load1"] for r in raw]

    out = []
    w = out.append
    w("# Benchmark results: stampede vs wrk vs oha")
    w("")
    w("<!-- Generated by bench/run.sh (bench/summarize.py); rerun it instead of editing. -->")
    w("")
    w(f"- Date: {env('BENCH_DATE') or time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    w(f"- Machine: {os.cpu_count()} CPUs (nproc), {cpu_model()}, Linux {platform.release()}")
    w(f"- Tools: stampede {env('BENCH_V_STAMPEDE', '?').removeprefix('stampede ')}; "
      f"{env('BENCH_V_WRK', '?')}; {env('BENCH_V_OHA', '?')}; {env('BENCH_V_NGINX', '?').removeprefix('nginx version: ')}")
    w(f"- Command: `{env('BENCH_CMDLINE', 'bash bench/run.sh')}` — {rounds} round(s) × {env('BENCH_DURATION', '?')} s "
      f"per generator and connection level, generators interleaved (order rotated each round); "
      f"every cell is the **median over the rounds**.")
    w(f"- Server: nginx, 1 worker pinned to CPU {env('BENCH_SERVER_CPU', '0')} (`taskset -c`), "
      f"`access_log off`, `keepalive_requests 1000000`, a static {env('BENCH_PAGE_BYTES', '?')}-byte page "
      f"on 127.0.0.1.")
    w(f"- Generators, each pinned to CPU {env('BENCH_GEN_CPU', '1')} with one thread, N = connections "
      f"(stampede: VUs, one keep-alive connection each):")
    w(f"  - `{env('BENCH_CMD_STAMPEDE', '?')}`")
    w(f"  - `{env('BENCH_CMD_WRK', '?')}`")
    w(f"  - `{env('BENCH_CMD_OHA', '?')}`")
    w("- Measurement, the same for all three: each generator runs as "
      "`/usr/bin/time -f '%U %S %M' timeout … GENERATOR`; CPU-µs/req = (user + sys) × 10⁶ / requests, "
      "peak RSS = `%M` (max resident set). Requests: wrk's `N requests in`, the sum of oha's "
      "`statusCodeDistribution` (answered requests; requests cut off by the deadline are not counted), "
      "stampede's `total.requests`. req/s and p99 come from each tool's own output "
      "(oha: answered requests / `summary.total`; p99 from `latencyPercentiles.p99`). "
      "MB = 10⁶ bytes.")
    idle = env("BENCH_IDLE_LOAD")
    waited = env("BENCH_LOAD_WAITED", "0")
    load_note = (f"- Machine load (`/proc/loadavg`): at start `{env('BENCH_LOAD_START', '?')}`, "
                 f"at end `{env('BENCH_LOAD_END', '?')}`; 1-min load after each run: "
                 f"median {statistics.median(loads):.2f}, max {max(loads):.2f} (the benchmark's own "
                 f"server and generator account for up to about 2 of that)" if loads else "")
    if idle:
        if env("BENCH_LOAD_GAVE_UP") == "1":
            load_note += (f"; **the machine was busy**: waited {waited} s for the 1-min load to drop below "
                          f"{idle}, then ran anyway")
        else:
            load_note += f"; waited {waited} s for the 1-min load to drop below {idle} first"
    w(load_note + ". Other processes on this 2-CPU machine share both CPUs; runs vary by ±15–30 %.")
    w(f"- Raw per-run data: `{env('BENCH_RAW', os.path.dirname(manifest))}/` (gitignored; `runs.json` has every run).")
    w("")

    w("## Results")
    w("")
    w("| conns | generator | req/s | p99 ms | CPU-µs/req | CPU-µs/req min–max | peak RSS MB | errors | failed runs |")
    w("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for n in levels:
        for t in tools:
            runs = cells.get((n, t), [])
            rss = med(runs, "rss_bytes")
            errors = sum(r.get("errors") or 0 for r in runs)
            failed = sum(1 for r in runs if r["rc"] != 0 or r.get("cpu_us_per_req") is None)
            name = f"**{t}**" if t == "stampede" else t
            w(f"| {n} | {name} | {fmt(med(runs, 'rps'), 0)} | {fmt(med(runs, 'p99_ms'), 2)} | "
              f"{fmt(med(runs, 'cpu_us_per_req'), 2)} | {spread(runs, 'cpu_us_per_req')} | "
              f"{fmt(rss / 1e6 if rss else None, 1)} | {errors} | {failed}/{len(runs)} |")
    w("")

    w("## Targets")
    w("")
    w("| target | measured | result |")
    w("|---|---|---|")

    def cpu(n, t):
        return med(cells.get((n, t), []), "cpu_us_per_req")

    def per_round_ratios(n, a, b):
        by_round = {}
        for r in raw:
            if r["conns"] == n and r["tool"] in (a, b) and r.get("cpu_us_per_req"):
                by_round.setdefault(r["round"], {})[r["tool"]] = r["cpu_us_per_req"]
        return [v[a] / v[b] for v in by_round.values() if a in v and b in v]

    checks = [(n, "wrk", TARGET_CPU_VS_WRK) for n in WRK_RATIO_CONNS] + [(RATIO_CONNS, "oha", TARGET_CPU_VS_OHA)]
    for n, other, limit in checks:
        s, o = cpu(n, "stampede"), cpu(n, other)
        if other not in tools or n not in levels:
            continue
        ratio = s / o if s and o else None
        pr = per_round_ratios(n, "stampede", other)
        pr_txt = f"; per round {', '.join(f'{x:.2f}' for x in pr)}" if len(pr) > 1 else ""
        measured = (f"{ratio:.2f}× ({s:.2f} / {o:.2f} µs{pr_txt})" if ratio else "—")
        w(f"| CPU-µs/req at {n} connections, stampede / {other} ≤ {limit}× | {measured} | "
          f"{verdict(ratio <= limit if ratio else None)} |")
    for n in levels:
        s, b = cpu(n, "stampede"), cpu(n, "stampede-base")
        if s and b:
            pr = per_round_ratios(n, "stampede", "stampede-base")
            w(f"| (before/after) CPU-µs/req at {n} connections, stampede / stampede-base | {s / b:.2f}× ({s:.2f} / "
              f"{b:.2f} µs; per round {', '.join(f'{x:.2f}' for x in pr)}) | — |")
    rss = med(cells.get((RSS_CONNS, "stampede"), []), "rss_bytes")
    w(f"| peak RSS at {RSS_CONNS} connections ≤ {TARGET_RSS_BYTES / 1e6:.0f} MB | "
      f"{fmt(rss / 1e6 if rss else None, 1)} MB ({fmt(rss / 2**20 if rss else None, 1)} MiB) | "
      f"{verdict(rss <= TARGET_RSS_BYTES if rss else None)} |")
    w("")

    # Keep the sections other scripts write into the same page (bench/flow/run.sh, bench/open.sh,
    # bench/sweep.sh, bench/h2.sh): every `<!-- BEGIN bench/NAME … -->` … `<!-- END bench/NAME -->`.
    try:
        with open(results, encoding="utf-8") as f:
            old = f.read()
    except OSError:
        old = ""
    for m in re.finditer(r"<!-- BEGIN bench/([\w-]+)", old):
        end = f"<!-- END bench/{m.group(1)} -->"
        stop = old.find(end, m.start())
        if stop >= 0:
            out += ["", old[m.start() : stop + len(end)], ""]
    with open(results, "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    print("\n".join(out[out.index("## Results"):]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", nargs=2, metavar=("TOOL", "PREFIX"))
    ap.add_argument("--manifest")
    ap.add_argument("--results")
    a = ap.parse_args()
    if a.one:
        tool, prefix = a.one
        r = parse_run(tool, prefix)
        rss = r.get("rss_bytes")
        print(f"  {tool}: {fmt(r.get('rps'), 0)} req/s, p99 {fmt(r.get('p99_ms'), 2)} ms, "
              f"{fmt(r.get('cpu_us_per_req'), 2)} CPU-µs/req, RSS {fmt(rss / 1e6 if rss else None, 1)} MB, "
              f"errors {r.get('errors')}")
        return 0
    if not (a.manifest and a.results):
        ap.error("--manifest and --results are required")
    summarize(a.manifest, a.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
