# An nbdkit plugin (python) for the rescue tests: a read-only disk over an
# image file whose reads fail as a failing disk's do.
#
#   nbdkit python weak_disk.py image=FILE [faults=FILE] [rate=R] [seed=N]
#                              [delay=SECONDS]
#
# faults: one line per weak area, "FIRST_SECTOR COUNT FAILURES" (512-byte
# sectors): every read that touches one of its sectors fails (EIO) until
# that sector has been read FAILURES times (-1: always); a read counts
# for every sector it touches, whether it fails or not.
# rate: besides, each read fails with probability R, drawn from a
# xorshift generator seeded with N: the same reads fail on every run
# that asks for the same reads in the same order.
# delay: seconds each read takes.

import errno
import io
import time

import nbdkit

API_VERSION = 2

SECTOR = 512

image = None
faults = None
rate = 0.0
seed = 1
delay = 0.0

data = b""
weak = {}
state = 0


def config(key, value):
    global image, faults, rate, seed, delay
    if key == "image":
        image = value
    elif key == "faults":
        faults = value
    elif key == "rate":
        rate = float(value)
    elif key == "seed":
        seed = int(value)
    elif key == "delay":
        delay = float(value)
    else:
        raise RuntimeError("unknown parameter " + key)


def config_complete():
    global data, state
    if image is None:
        raise RuntimeError("image= is required")
    with io.open(image, "rb") as f:
        data = f.read()
    if faults is not None:
        with io.open(faults) as f:
            for line in f:
                fields = line.split()
                if not fields:
                    continue
                first, count, failures = (int(x) for x in fields)
                for sector in range(first, first + count):
                    weak[sector] = failures
    state = seed or 1


def thread_model():
    return nbdkit.THREAD_MODEL_SERIALIZE_ALL_REQUESTS


def open(readonly):
    return 1


def get_size(h):
    return len(data)


def can_write(h):
    return False


def can_multi_conn(h):
    return False


def draw():
    # xorshift64, as the tests' own generator.
    global state
    state ^= (state << 13) & 0xFFFFFFFFFFFFFFFF
    state ^= state >> 7
    state ^= (state << 17) & 0xFFFFFFFFFFFFFFFF
    return state / 2.0**64


def pread(h, buf, offset, flags):
    if delay:
        time.sleep(delay)
    failed = False
    for sector in range(offset // SECTOR, (offset + len(buf) - 1) // SECTOR + 1):
        left = weak.get(sector)
        if left is None or left == 0:
            continue
        failed = True
        if left > 0:
            weak[sector] = left - 1
    if rate and draw() < rate:
        failed = True
    if failed:
        nbdkit.set_error(errno.EIO)
        raise RuntimeError("unreadable sector")
    buf[:] = data[offset : offset + len(buf)]
