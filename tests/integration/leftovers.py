"""Lists and SIGKILLs the processes whose environment holds SLUICE_IT_RUN=MARK
(the processes of one run of run.sh), except PIDs given after the mark:

    python3 leftovers.py MARK [PID...]

Prints "PID command line" for each; nothing when none is left.  Waits a
moment first: a child whose parent just died (setpriv --pdeathsig) may be
being killed right now."""
import os
import signal
import sys
import time


def marked(mark, skip):
    want = ("SLUICE_IT_RUN=%s" % mark).encode()
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                env = f.read().split(b"\0")
            if want not in env:
                continue
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open("/proc/%s/stat" % name) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue                    # already dead, its parent reaps it
        except OSError:
            continue                            # gone, or not ours to read
        found[int(name)] = cmd
    return found


def main():
    mark, skip = sys.argv[1], {int(p) for p in sys.argv[2:]} | {os.getpid()}
    left = marked(mark, skip)
    if left:
        time.sleep(1.0)
        left = marked(mark, skip)
    for pid, cmd in sorted(left.items()):
        print("%d %s" % (pid, cmd))
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


main()
