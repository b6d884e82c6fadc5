# An nbdkit plugin (python) for the power-cut tests: an export whose
# writes stay volatile, in the server's memory, until a flush makes them
# durable (or the write itself carried FUA), the way a disk's write cache
# behaves. Its power is cut at the CUT-th request that writes, zeroes or
# flushes: that request is lost with every volatile write, and the server
# dies on the spot, dropping its connections. What is durable is the file
# DURABLE, which the test then reads.
#
#   nbdkit python powercut.py durable=FILE [cut=N] [count=FILE]
#
# cut=0 (the default) never cuts; count=FILE gets the number of such
# requests served so far after each one, so that a first run can say how
# many a whole copy makes.

import os

import nbdkit

API_VERSION = 2

durable = None
cut = 0
count = None
served = 0
fd = None
# The volatile writes, in the order they came: (offset, bytes).
volatile = []


def config(key, value):
    global durable, cut, count
    if key == "durable":
        durable = value
    elif key == "cut":
        cut = int(value)
    elif key == "count":
        count = value
    else:
        raise RuntimeError("unknown parameter: " + key)


def config_complete():
    global fd
    if durable is None:
        raise RuntimeError("durable=FILE is required")
    fd = os.open(durable, os.O_RDWR)


def thread_model():
    return nbdkit.THREAD_MODEL_SERIALIZE_ALL_REQUESTS


def open(readonly):
    return 1


def get_size(h):
    return os.fstat(fd).st_size


def can_write(h):
    return True


def can_flush(h):
    return True


def can_fua(h):
    return nbdkit.FUA_NATIVE


def can_zero(h):
    return True


def can_multi_conn(h):
    # One cache for every connection: a flush on any makes all durable.
    return True


def served_one():
    """Count a request that changes state; cut the power at the CUT-th."""
    global served
    served += 1
    if cut and served >= cut:
        # Power gone: the volatile writes and this request are lost, and
        # so is the server.
        os._exit(0)
    if count is not None:
        with builtins_open(count, "w") as f:
            f.write(str(served))


def builtins_open(path, mode):
    import builtins

    return builtins.open(path, mode)


def pread(h, buf, offset, flags):
    data = bytearray(os.pread(fd, len(buf), offset))
    data.extend(bytes(len(buf) - len(data)))
    end = offset + len(buf)
    for at, written in volatile:
        lo, hi = max(at, offset), min(at + len(written), end)
        if lo < hi:
            data[lo - offset : hi - offset] = written[lo - at : hi - at]
    buf[:] = data


def store(offset, data, flags):
    served_one()
    volatile.append((offset, bytes(data)))
    if flags & nbdkit.FLAG_FUA:
        # This write is durable now; earlier volatile ones are not.
        os.pwrite(fd, data, offset)


def pwrite(h, buf, offset, flags):
    store(offset, buf, flags)


def zero(h, count_, offset, flags):
    store(offset, bytes(count_), flags)


def flush(h, flags):
    global volatile
    served_one()
    for at, written in volatile:
        os.pwrite(fd, written, at)
    volatile = []
