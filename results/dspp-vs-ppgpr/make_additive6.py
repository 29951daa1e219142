"""Writes additive6.csv: a small regression set the bench does not ship (400 rows, six
inputs, input-dependent noise), for checking the DSPP-vs-PPGPR selection off the bench's
own data. y = sin(3 x0) + x1 x2 + 0.5 x3^2 + 0.3 x4 + eps, eps ~ N(0, (0.1 + 0.2 |x5|)^2),
x ~ U(-1, 1)^6, Python's random.Random(7). Usage: python3 make_additive6.py OUT.csv"""
import math
import random
import sys

rng = random.Random(7)
with open(sys.argv[1], "w") as f:
    f.write("x0,x1,x2,x3,x4,x5,y\n")
    for _ in range(400):
        x = [rng.uniform(-1.0, 1.0) for _ in range(6)]
        sd = 0.1 + 0.2 * abs(x[5])
        y = math.sin(3 * x[0]) + x[1] * x[2] + 0.5 * x[3] ** 2 + 0.3 * x[4] + rng.gauss(0.0, sd)
        f.write(",".join(f"{v:.6f}" for v in x + [y]) + "\n")
