#!/usr/bin/env python3
"""Runs one load generator pinned to a CPU and measures its whole process tree.

    measure.py --out PREFIX --cpu 1 --limit 60 [--interrupt-after 20] [--stats-url URL] -- CMD ARGS...

Writes PREFIX.json with:
  cpu_s          user + sys CPU seconds of CMD and every descendant it waited for
                 (getrusage(RUSAGE_CHILDREN) of this script, which waits only for CMD);
  cpu_s_sampled  the same from /proc: last utime + stime seen for every process of CMD's session,
                 sampled every --interval s (a cross-check that also covers processes nobody waits
                 for; it misses each process's last interval);
  rss_tree_peak  peak over the samples of the SUM of VmRSS over CMD's session (bytes; pages shared
                 between processes count once per process);
  rss_max_proc   the largest VmHWM (peak RSS) of any single process of the session (bytes);
  processes      how many distinct processes the session had;
  target_requests requests the built-in target served while CMD ran (its /stats counter, the
                 /stats calls themselves excluded), when --stats-url is given;
  steady         CPU seconds and target requests inside the load phase only: the target's counter
                 and the tree's CPU are sampled every --stats-every s, and the window runs from one
                 sample after requests start to one sample before they stop (start-up, ramp-up and
                 shutdown left out); null when too short;
  rc, wall_s, signalled.
CMD runs in its own session (setsid) so the tree is found by session id even when a child is
re-parented; it is sent SIGINT at --interrupt-after (for tools without a duration option),
SIGTERM at --limit and SIGKILL 10 s later; leftovers of the session are killed at the end.
"""

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
import urllib.request

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def stats(url):
    if not url:
        return None
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)["requests"]


def session_procs(sid):
    """{pid: (utime+stime ticks, rss bytes, hwm bytes)} of the live processes in session sid."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            # fields after the command name "(…)", which may contain spaces
            rest = stat[stat.rindex(b")") + 2 :].split()
            if int(rest[3]) != sid:  # field 6: session
                continue
            ticks = int(rest[11]) + int(rest[12])  # fields 14, 15: utime, stime
            rss = hwm = 0
            with open(f"/proc/{name}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"VmRSS:"):
                        rss = int(line.split()[1]) * 1024
                    elif line.startswith(b"VmHWM:"):
                        hwm = int(line.split()[1]) * 1024
            out[int(name)] = (ticks, rss, hwm)
        except (OSError, ValueError, IndexError):
            continue
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--cpu", type=int, default=None)
    ap.add_argument("--limit", type=float, required=True)
    ap.add_argument("--interrupt-after", type=float, default=None)
    ap.add_argument("--stats-url", default=None)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--stats-every", type=float, default=0.5)
    ap.add_argument("--stdout", default=None)
    ap.add_argument("--stderr", default=None)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        ap.error("no command")

    def pin():
        if a.cpu is not None:
            os.sched_setaffinity(0, {a.cpu})

    before = stats(a.stats_url)
    polls = 1  # /stats calls made after `before` was read, the last one included
    timeline = []  # (t, cpu ticks of the live tree, target requests so far)
    next_poll = 0.0
    out = open(a.stdout, "wb") if a.stdout else None
    err = open(a.stderr, "wb") if a.stderr else None
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, preexec_fn=pin, start_new_session=True)
    sid = p.pid
    seen = {}  # pid -> last ticks
    hwm = {}
    rss_peak = 0
    signalled = []
    sent_int = sent_term = sent_kill = False
    while p.poll() is None:
        procs = session_procs(sid)
        rss_peak = max(rss_peak, sum(r for _, r, _ in procs.values()))
        for pid, (ticks, _, h) in procs.items():
            seen[pid] = ticks
            hwm[pid] = max(hwm.get(pid, 0), h)
        el = time.monotonic() - t0
        if a.stats_url and el >= next_poll:
            try:
                n = stats(a.stats_url)
                polls += 1
                timeline.append((el, sum(seen[pid] for pid in procs), n - before - polls + 1))
            except OSError:
                pass
            next_poll = el + a.stats_every
        if a.interrupt_after is not None and not sent_int and el >= a.interrupt_after:
            os.killpg(sid, signal.SIGINT)
            sent_int = True
            signalled.append(f"SIGINT at {el:.1f}s")
        if not sent_term and el >= a.limit:
            os.killpg(sid, signal.SIGTERM)
            sent_term = True
            signalled.append(f"SIGTERM at {el:.1f}s")
        if not sent_kill and el >= a.limit + 10:
            os.killpg(sid, signal.SIGKILL)
            sent_kill = True
            signalled.append(f"SIGKILL at {el:.1f}s")
        time.sleep(a.interval)
    wall = time.monotonic() - t0
    rc = p.returncode
    leftovers = session_procs(sid)
    for pid, (ticks, _, h) in leftovers.items():
        seen[pid] = ticks
        hwm[pid] = max(hwm.get(pid, 0), h)
    if leftovers:
        try:
            os.killpg(sid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        signalled.append(f"killed {len(leftovers)} leftover process(es)")
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    after = stats(a.stats_url)
    steady = None
    # ticks are per live process: the window is only valid while the set of processes is stable,
    # which holds for these tools (one long-lived process); check the tick sums never go down.
    moving = [i for i in range(1, len(timeline)) if timeline[i][2] > timeline[i - 1][2]]
    if len(moving) >= 4:
        i0, i1 = moving[0], moving[-1] - 1
        (ta, ca, ra), (tb, cb, rb) = timeline[i0], timeline[i1]
        if tb > ta and rb > ra and all(timeline[i][1] <= timeline[i + 1][1] for i in range(i0, i1)):
            steady = {"seconds": round(tb - ta, 3), "cpu_s": round((cb - ca) / TICK, 3), "target_requests": rb - ra}
    res = {
        "cmd": cmd,
        "rc": rc,
        "wall_s": round(wall, 3),
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
        "cpu_user_s": round(ru.ru_utime, 3),
        "cpu_sys_s": round(ru.ru_stime, 3),
        "cpu_s_sampled": round(sum(seen.values()) / TICK, 3),
        "rss_tree_peak": rss_peak,
        "rss_max_proc": max([ru.ru_maxrss * 1024] + list(hwm.values())),
        "processes": len(seen),
        "signalled": signalled,
        "target_requests": None if before is None else after - before - polls,
        "steady": steady,
    }
    with open(a.out + ".json", "w") as f:
        json.dump(res, f, indent=1)
    json.dump(res, sys.stderr)
    sys.stderr.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
