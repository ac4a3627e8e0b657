import subprocess, random, re, sys
def ev(p):
    out=subprocess.run(['./split_model_sim','sim']+[f'{k}={v}' for k,v in p.items()],capture_output=True,text=True).stdout
    m=re.match(r's1 (\d+)/48 regret ([\d.]+) rms ([\d.]+) \| s2 (\d+)/48 regret ([\d.]+) rms ([\d.]+)',out)
    return int(m[1]),float(m[2]),float(m[3]),int(m[4]),float(m[5]),float(m[6])
random.seed(int(sys.argv[1]) if len(sys.argv)>1 else 0)
which = sys.argv[2] if len(sys.argv)>2 else 's1'
p=dict(cta=30,hbm=0.9,t0=2,e=1,m0=2,m1=0.5)
def score(r): return r[1] if which=='s1' else (r[1]+r[4])/2
best=ev(p); print(p,best,flush=True)
for it in range(150):
    q=dict(p); k=random.choice(list(q))
    q[k]=max(0.0, q[k]*random.choice([0.7,0.85,1.15,1.4]) + (random.random()*0.2 if k in('e','m1') else 0))
    if k=='hbm': q[k]=min(q[k],1.0)
    r=ev(q)
    if score(r)<score(best): p,best=q,r; print(it,{k:round(v,3) for k,v in p.items()},best,flush=True)
