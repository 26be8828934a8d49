"""A job started without -u: one line on stderr (line-buffered, so it reaches the log at once), then a
step line on stdout every 0.1 s, which stays in the block buffer unless stdout is unbuffered. Exits with
code 3 when a file named `stop` appears in its working directory."""

import os
import sys
import time

sys.stderr.write("hello from pid %d token=%s\n" % (os.getpid(), os.environ.get("GW_TEST_TOKEN")))
step = 0
while not os.path.exists("stop"):
    print("step %d cwd=%s token=%s" % (step, os.getcwd(), os.environ.get("GW_TEST_TOKEN")))
    step += 1
    time.sleep(0.1)
print("stopping after %d steps" % step)
sys.exit(3)
