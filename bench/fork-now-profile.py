#!/usr/bin/env python3
# Per-step profile of NOW forks from a fork-now bench run made with
# BENCH_FORK_NOW_PROFILE=<dir>: Basin's debug log (<dir>/fork-now.log) and each
# timed fork's PostgreSQL log (<dir>/<fork id>/*.json). Times in ms from the
# POST's 202 (the access log's line).
import json, sys, os, glob, datetime, statistics
d = sys.argv[1]
lines = [json.loads(l) for l in open(os.path.join(d, 'fork-now.log')) if l.startswith('{')]
forks = [n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n))]
posts = [l for l in lines if l.get('route', '').endswith('/forkService')]
def pgtime(ts):
    return datetime.datetime.strptime(ts[:23], '%Y-%m-%d %H:%M:%S.%f').replace(tzinfo=datetime.timezone.utc).timestamp() * 1000
PG = [('postmaster starting', 'starting PostgreSQL 15'),
      ('startup: was interrupted (fsync of the data dir begins)', 'database system was interrupted'),
      ('startup: recovery starts (fsync done)', 'starting point-in-time recovery'),
      ('redo done', 'redo done at'),
      ('new timeline selected', 'selected new timeline'),
      ('end-of-recovery checkpoint starts', 'checkpoint starting: end-of-recovery'),
      ('end-of-recovery checkpoint done', 'checkpoint complete'),
      ('ready to accept connections', 'ready to accept connections'),
      ('reload (access rules)', 'received SIGHUP')]
rows = {}
for f in sorted(forks):
    mine = [l for l in lines if f in (l.get('serviceId'), l.get('resource'), l.get('id'))]
    if not mine: continue
    first = mine[0]['time']
    post = max(p['time'] for p in posts if p['time'] <= first + 1)
    ev = []
    seen_wait = set()
    for l in mine:
        msg = l['msg']
        if msg == 'operation waits':
            k = l['step']
            if k in seen_wait: continue
            seen_wait.add(k); msg = f"first wait: {k}"
        elif msg == 'fork step':
            msg = f"  fork step: {l['step']} (task +{l['ms']})"
        elif msg in ('storage measured',): continue
        ev.append((l['time'] - post, msg))
        if msg == 'operation done': break
    for pf in glob.glob(os.path.join(d, f, '*.json')):
        done = set()
        for pl in open(pf):
            j = json.loads(pl)
            for name, needle in PG:
                if name not in done and needle in j['message']:
                    done.add(name); ev.append((pgtime(j['timestamp']) - post, 'PG ' + name))
    ev.sort()
    rows[f] = ev
    print(f'--- fork {f}')
    for t, m in ev: print(f'{t:8.0f}  {m}')

# Phases: each from the previous mark to its own; medians over the forks.
MARKS = [
    ('claimed; its network namespace made', 'network namespace ready'),
    ("the fork's OS user made (useradd)", "created the service's OS user"),
    ('the restore task started', 'first wait: restoring the fork'),
    ('started over (its user\'s processes, stale staging)', '  fork step: started over'),
    ('connected to the parent', '  fork step: connected to the parent'),
    ('slot; pg_backup_start (immediate checkpoint)', '  fork step: backup started'),
    ('~1,000 files copied (reflinks)', '  fork step: files copied'),
    ('pg_backup_stop; its WAL copied', '  fork step: WAL copied'),
    ("waiting for its backups' side (repository user, server)", "  fork step: its backups' side made"),
    ('checked, identified, chowned, put in place', '  fork step: in place'),
    ('configured (cgroups, conf, certificate) and spawned', 'starting PostgreSQL'),
    ('spawn to the postmaster\'s first line', 'PG postmaster starting'),
    ('startup: sync of the data directory', 'PG startup: recovery starts'),
    ('recovery, promotion, end-of-recovery checkpoint', 'PG ready to accept connections'),
    ('seen ready; opened (password, grants)', 'the fork is open'),
    ('access rules reloaded; operation done', 'operation done'),
]
def phases(ev):
    out = []; prev = 0
    for name, needle in MARKS:
        t = next((t for t, m in ev if m.startswith(needle)), None)
        if t is None: out.append(None); continue
        out.append(max(0, t - prev)); prev = max(prev, t)
    return out, prev
print('\n| step | ' + ' | '.join(rows) + ' | median |')
table = {f: phases(ev) for f, ev in rows.items()}
for i, (name, _) in enumerate(MARKS):
    vals = [table[f][0][i] for f in rows]
    good = [v for v in vals if v is not None]
    med = statistics.median(good) if good else None
    print(f'| {name} | ' + ' | '.join('-' if v is None else f'{v:.0f}' for v in vals) + f" | {'-' if med is None else f'{med:.0f}'} |")
print('| accept to operation done | ' + ' | '.join(f'{table[f][1]:.0f}' for f in rows) + f" | {statistics.median([table[f][1] for f in rows]):.0f} |")
