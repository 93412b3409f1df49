"""Length-prefixed msgpack frames (see PROTOCOL.md).

A frame is a 4-byte big-endian unsigned length followed by that many bytes of
msgpack encoding one map. Used by the worker, its tests and selftest.py.
"""

import struct
import time

import msgpack

MAX_FRAME = 1 << 30
_HDR = struct.Struct(">I")


class FrameError(Exception):
    """The byte stream is not a valid frame; the connection cannot recover."""


class CleanEOF(Exception):
    """The stream ended between two frames."""


def _read_exact(f, n):
    chunks = []
    left = n
    while left > 0:
        b = f.read(left)
        if not b:
            break
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def read_frame(f):
    """Read one frame from binary file f.

    Returns (message, t_header_ns, t_decoded_ns): t_header_ns is
    time.monotonic_ns() right after the 4-byte header arrived, t_decoded_ns
    after the body was read and decoded.
    """
    hdr = _read_exact(f, 4)
    if len(hdr) == 0:
        raise CleanEOF()
    t0 = time.monotonic_ns()
    if len(hdr) < 4:
        raise FrameError("short frame header: got %d of 4 bytes" % len(hdr))
    (n,) = _HDR.unpack(hdr)
    if n == 0:
        raise FrameError("frame length is 0")
    if n > MAX_FRAME:
        raise FrameError("frame length %d exceeds the limit of %d bytes "
                         "(header bytes %s)" % (n, MAX_FRAME, hdr.hex()))
    body = _read_exact(f, n)
    if len(body) < n:
        raise FrameError("short frame body: got %d of %d bytes" % (len(body), n))
    try:
        msg = msgpack.unpackb(body, raw=False, use_list=True, strict_map_key=False)
    except Exception as e:  # msgpack raises several exception types
        raise FrameError("frame body is not valid msgpack: %s: %s" % (type(e).__name__, e))
    if not isinstance(msg, dict):
        raise FrameError("frame body is a msgpack %s, want a map" % type(msg).__name__)
    return msg, t0, time.monotonic_ns()


def encode_frame(msg):
    body = msgpack.packb(msg, use_bin_type=True)
    return _HDR.pack(len(body)) + body


def write_frame(f, msg):
    data = encode_frame(msg)
    f.write(data)
    f.flush()
    return len(data)


class Client:
    """Driver side for tests and selftest: runs worker.py as a subprocess."""

    def __init__(self, argv, env=None, stderr=None):
        import subprocess
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, env=env)

    def send(self, msg):
        return write_frame(self.proc.stdin, msg)

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self):
        msg, _, _ = read_frame(self.proc.stdout)
        return msg

    def call(self, msg):
        self.send(msg)
        return self.recv()

    def close(self, timeout=60):
        try:
            self.proc.stdin.close()
        except Exception:
            pass
        try:
            return self.proc.wait(timeout=timeout)
        except Exception:
            self.proc.kill()
            return self.proc.wait()
