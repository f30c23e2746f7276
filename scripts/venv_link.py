"""Make a dlx build importable from a venv, from anywhere: a .pth file in the venv's
site-packages naming the build's python/ folder (run with the venv's interpreter).
Usage: venv/bin/python scripts/venv_link.py BUILD/python"""
import os
import sys
import sysconfig

target = os.path.abspath(sys.argv[1])
pth = os.path.join(sysconfig.get_paths()["purelib"], "dlx-build.pth")
line = target + "\n"
try:
    with open(pth) as f:
        unchanged = f.read() == line
except FileNotFoundError:
    unchanged = False
if not unchanged:
    with open(pth, "w") as f:
        f.write(line)
