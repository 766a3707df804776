#!/usr/bin/env python3
"""usage: compare_builds_summary.py OUTPUT: per measurement, both builds' figures and new/base per
round, from the output of bench/compare_builds.sh."""
import re,collections,sys
txt=open(sys.argv[1]).read()
rounds=re.split(r'^## round (\d+), (base|new)$',txt,flags=re.M)
data=collections.OrderedDict()
for i in range(1,len(rounds),3):
    r,which,body=rounds[i],rounds[i+1],rounds[i+2]
    for line in body.splitlines():
        m=re.match(r'^(BM_\S+)\s+([\d.]+) (ms|us)',line)
        if m:
            label=m.group(1)+(' '+line.split()[-1] if 'kernels:' in line else '')
            data.setdefault(label+' ('+m.group(3)+', lower is better)',{'base':[],'new':[]})[which].append(float(m.group(2))); continue
        m=re.match(r'^generate (.*): prompt: \d+ tokens, ([\d.]+) tokens/s \| generated: \d+ tokens, ([\d.]+)',line)
        if m:
            data.setdefault('prefill tokens/s, '+m.group(1),{'base':[],'new':[]})[which].append(float(m.group(2)))
            data.setdefault('decode tokens/s, '+m.group(1),{'base':[],'new':[]})[which].append(float(m.group(3)))
print("# summary: new/base per round (time: < 1 is faster; tokens/s: > 1 is faster)")
for k,v in data.items():
    b,n=v['base'],v['new']
    print(f"{k}: base {b}, new {n}, new/base {' '.join(f'{x/y:.2f}' for x,y in zip(n,b))}")
