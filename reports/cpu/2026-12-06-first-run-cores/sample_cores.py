import time, sys
def read():
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    v = list(map(int, parts))
    idle = v[3] + v[4]
    return sum(v), idle
t0 = time.time(); prev = read()
out = open(sys.argv[1], "w")
while True:
    time.sleep(1.0)
    cur = read()
    tot, idle = cur[0]-prev[0], cur[1]-prev[1]
    busy = (tot-idle)/tot*2 if tot else 0
    out.write(f"{time.time()-t0:.0f} {busy:.2f}\n"); out.flush()
    prev = cur
