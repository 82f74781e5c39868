"""Counts the instructions of one call, vDSO included, by single-stepping it under gdb.

callgrind cannot count the kernel's vDSO (valgrind gives the program no vDSO, so the clock is
read by a system call it does not see); this counts every user-space instruction a call executes,
the vDSO's `clock_gettime` too. Load it once the program stands at the function's first
instruction, with the call in its steady state:

    gdb -q -batch -ex 'starti time-async 10' \\
        -ex 'break *ADDRESS_OF_RUN' -ex continue \\
        -ex 'break *ADDRESS_OF_THE_FUNCTION' -ex continue \\
        -ex 'source bench/step_count.py' target/release/examples/time_window_paths

(gdb turns address randomisation off: an address is 0x555555554000 plus the one `nm` prints.)
It counts six calls and prints each count; the smallest is the steady path (a larger one met a
slice boundary, or the vDSO retried its read because the kernel updated the time while the
call was being stepped, which single-stepping makes likely).
"""

import gdb

gdb.execute("set pagination off")
counts = []
for _ in range(6):
    frame = int(gdb.parse_and_eval("$sp"))
    steps = 0
    while True:
        gdb.execute("stepi", to_string=True)
        steps += 1
        # The call returned once the stack pointer is above its return address.
        if int(gdb.parse_and_eval("$sp")) > frame:
            break
    counts.append(steps)
    gdb.execute("continue", to_string=True)
print("instructions per call:", counts, "min", min(counts))
