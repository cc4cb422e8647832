#!/usr/bin/env python3
"""Greedy edge set cover: keep all seeds, add the fuzzer finds that add the most new edges,
up to LIMIT files in total. Usage: pick_corpus.py BINARY SEEDS WORK LIMIT OUT"""
import os, subprocess, sys, tempfile, hashlib, shutil
binary, seeds, work, limit, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
tmp = tempfile.mkdtemp()
ctl = os.path.join(tmp, 'ctl'); empty = os.path.join(tmp, 'empty'); os.mkdir(empty)
subprocess.run([binary, '-merge=1', '-use_counters=0', '-timeout=10', '-merge_control_file=' + ctl, empty, seeds, work],
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
lines = open(ctl).read().split('\n')
n = int(lines[0]); files = lines[2:2 + n]
cov = {}
for line in lines[2 + n:]:
    parts = line.split()
    if parts and parts[0] == 'COV':
        cov[int(parts[1])] = set(parts[2:])
    if parts and parts[0] == 'FT':
        cov.setdefault(int(parts[1]), set())
covered = set()
seed_files = [i for i, f in enumerate(files) if f.startswith(seeds)]
for i in seed_files: covered |= cov.get(i, set())
cands = {i: cov.get(i, set()) for i, f in enumerate(files) if not f.startswith(seeds) and os.path.getsize(f) <= 65536}
budget = limit - len(os.listdir(seeds))
chosen = []
while len(chosen) < budget:
    best = max(cands, key=lambda i: (len(cands[i] - covered), -os.path.getsize(files[i])), default=None)
    if best is None or not (cands[best] - covered): break
    covered |= cands.pop(best); chosen.append(best)
total = set().union(*cov.values()) if cov else set()
os.makedirs(out, exist_ok=True)
for i in chosen:
    data = open(files[i], 'rb').read()
    open(os.path.join(out, 'min-' + hashlib.sha1(data).hexdigest()[:16]), 'wb').write(data)
print(f"seeds={len(seed_files)} chosen={len(chosen)} edges covered={len(covered)} of {len(total)} (all inputs)")
shutil.rmtree(tmp)
