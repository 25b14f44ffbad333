#!/usr/bin/env python3
"""faultproxy.py - a fault-injecting HTTP/1.1 proxy between an S3 client and a real S3 server.

For the S3 store's retry tests (tests/s3/test_store_s3_faults.c).  It sits in front of a real
server (Ceph RGW): requests pass through unchanged (headers and body byte for byte, so SigV4
signatures stay valid: the client signs the proxy's host:port, which is the Host header the
server receives), except the first N requests that match an armed fault, which it answers or
breaks itself.  This is not a mock: whatever is forwarded is really stored.

    faultproxy.py --upstream http://127.0.0.1:7480 [--port 0]

prints "PORT <n>" on stdout once it listens on 127.0.0.1:<n>, and exits when its stdin reaches
EOF (so a test that dies does not leave it behind) or on SIGTERM.

Faults (arm one at a time; count requests matching method/path get it, then pass-through;
with seconds=SEC instead, every matching request gets it for SEC seconds from the arm, then
pass-through: an outage or a throttling storm of a fixed length):
    500 502 503 504 429 403 400   answer this status with an S3 XML error body, do not forward
                                  (503: SlowDown, 500: InternalError, 429: SlowDown,
                                  403: AccessDenied, 400: InvalidArgument)
    reset        read the headers and half of the body, then reset the connection (RST);
                 nothing is forwarded
    stall        read the request, forward nothing, hold the connection for `stall` seconds
                 (default 5), then close it: the client times out
    land_reset   forward the request (it lands on the server), read the server's answer, then
                 reset the client connection instead of answering: the answer is lost
    land_503     forward the request, then answer 503 SlowDown instead of the real answer
    land_stall   forward the request, then hold the connection for `stall` seconds and close
    long_200     forward the request, then answer 200 (not 206) with the real body twice: a
                 server that ignores Range and sends more than was asked for

Control requests (plain HTTP GET on the same port, never forwarded, never counted):
    /__faultproxy/arm?fault=F&count=N[&method=M][&path=SUBSTRING][&stall=SEC]
    /__faultproxy/arm?fault=F&seconds=SEC[&method=M][&path=SUBSTRING][&stall=SEC]
    /__faultproxy/clear            disarm and zero the counters
    /__faultproxy/stats            "seen=S faulted=F forwarded=W armed=A"

Every response carries "Connection: close" and the connection is closed after it, so each
request is a new connection: libcurl then never repeats a request by itself on a reused
connection, and the client's own retry counters are exact.
"""
import argparse
import http.client
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse

ERRORS = {
    400: ("Bad Request", "InvalidArgument", "Injected bad request."),
    403: ("Forbidden", "AccessDenied", "Injected access denied."),
    429: ("Too Many Requests", "SlowDown", "Injected throttling (429)."),
    500: ("Internal Server Error", "InternalError", "Injected internal error."),
    502: ("Bad Gateway", "BadGateway", "Injected bad gateway."),
    503: ("Slow Down", "SlowDown", "Please reduce your request rate (injected)."),
    504: ("Gateway Timeout", "GatewayTimeout", "Injected gateway timeout."),
}
KINDS = {str(c) for c in ERRORS} | {"reset", "stall", "land_reset", "land_503", "land_stall",
                                    "long_200"}


class State:
    """Armed fault and counters, shared by the connection threads (protected by mu)."""

    def __init__(self):
        self.mu = threading.Lock()
        self.clear()

    def clear(self):
        self.fault = None  # one of KINDS, or None
        self.count = 0  # requests left to fault
        self.method = None  # only requests of this method (None: any)
        self.path = None  # only requests whose target contains this (None: any)
        self.stall = 5.0  # seconds to hold a stalled connection
        self.until = None  # time.monotonic() the fault ends (seconds= mode; None: by count)
        self.seen = 0  # requests received (control requests excluded)
        self.faulted = 0  # requests that got the fault
        self.forwarded = 0  # requests sent to the upstream server

    def pick(self, method, target):
        """Count a request and return the fault it gets (None: pass through)."""
        with self.mu:
            self.seen += 1
            if self.until is not None and time.monotonic() >= self.until:
                self.fault, self.count, self.until = None, 0, None  # the storm is over
            if (self.fault and self.count > 0 and (not self.method or self.method == method)
                    and (not self.path or self.path in target)):
                if self.until is None:
                    self.count -= 1
                self.faulted += 1
                return self.fault
            return None

    def armed(self):
        """Faults still to inject (seconds= mode: 1 while it lasts).  Caller holds mu."""
        if self.until is not None:
            return 1 if time.monotonic() < self.until else 0
        return self.count if self.fault else 0


ST = State()
UPSTREAM = ("127.0.0.1", 7480)


def log(msg):
    if os.environ.get("FAULTPROXY_VERBOSE"):
        print("faultproxy: " + msg, file=sys.stderr, flush=True)


def rst(c):
    """Close c with a TCP reset instead of an orderly FIN."""
    try:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    c.close()


def send(c, status, reason, headers, body):
    head = "HTTP/1.1 %d %s\r\n" % (status, reason)
    for k, v in headers:
        head += "%s: %s\r\n" % (k, v)
    head += "Connection: close\r\n\r\n"
    c.sendall(head.encode("latin-1") + body)


def send_error(c, status, target):
    reason, code, msg = ERRORS[status]
    body = ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message>'
            '<Resource>%s</Resource><RequestId>faultproxy</RequestId></Error>' %
            (code, msg, target.split("?")[0])).encode()
    send(c, status, reason, [("Content-Type", "application/xml"),
                             ("Content-Length", str(len(body)))], body)


def forward(method, target, headers, body):
    """Send the request upstream unchanged; return (status, reason, headers, body)."""
    conn = http.client.HTTPConnection(*UPSTREAM, timeout=120)
    try:
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for k, v in headers:
            if k.lower() not in ("connection", "keep-alive"):
                conn.putheader(k, v)
        conn.endheaders(body if body else None)
        r = conn.getresponse()
        rbody = r.read()
        with ST.mu:
            ST.forwarded += 1
        hs = []
        for k, v in r.getheaders():
            kl = k.lower()
            if kl in ("connection", "keep-alive", "transfer-encoding"):
                continue
            if kl == "content-length" and method != "HEAD":
                continue  # recomputed below (the body may have been chunked)
            hs.append((k, v))
        if method != "HEAD":
            hs.append(("Content-Length", str(len(rbody))))
        return r.status, r.reason, hs, rbody
    finally:
        conn.close()


def control(c, target):
    u = urllib.parse.urlsplit(target)
    q = dict(urllib.parse.parse_qsl(u.query))
    cmd = u.path[len("/__faultproxy/"):]
    status, text = 200, ""
    with ST.mu:
        if cmd == "arm":
            f = q.get("fault")
            if f not in KINDS:
                status, text = 400, "unknown fault %r\n" % f
            else:
                ST.fault, ST.count = f, int(q.get("count", "1"))
                ST.until = None
                if "seconds" in q:
                    ST.count = 1
                    ST.until = time.monotonic() + float(q["seconds"])
                ST.method, ST.path = q.get("method"), q.get("path")
                ST.stall = float(q.get("stall", "5"))
        elif cmd == "clear":
            ST.clear()
        elif cmd != "stats":
            status, text = 404, "unknown command %r\n" % cmd
        if not text:
            text = "seen=%d faulted=%d forwarded=%d armed=%d\n" % (
                ST.seen, ST.faulted, ST.forwarded, ST.armed())
    body = text.encode()
    send(c, status, "OK" if status == 200 else "Error",
         [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))], body)


def recv_until(c, buf, n):
    """Read from c until buf holds n bytes (False on EOF)."""
    while len(buf) < n:
        d = c.recv(min(1 << 20, n - len(buf)))
        if not d:
            return False
        buf.extend(d)
    return True


def serve(c):
    """One request on connection c (then it is closed)."""
    buf = bytearray()
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d or len(buf) > (1 << 20):
            return
        buf.extend(d)
    end = buf.index(b"\r\n\r\n")
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    del buf[:end + 4]
    method, target, _ = lines[0].split(" ", 2)
    headers = []
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers.append((k.strip(), v.strip()))
    clen = int(next((v for k, v in headers if k.lower() == "content-length"), "0") or "0")
    if target.startswith("/__faultproxy/"):
        control(c, target)
        return
    fault = ST.pick(method, target)
    log("%s %s (%d bytes) -> %s" % (method, target, clen, fault or "pass"))
    if fault == "reset":
        recv_until(c, buf, clen // 2)
        rst(c)
        return
    if not recv_until(c, buf, clen):
        return
    body = bytes(buf[:clen])
    if fault == "stall":
        time.sleep(ST.stall)
        return
    if fault and fault.isdigit():
        send_error(c, int(fault), target)
        return
    try:
        status, reason, hs, rbody = forward(method, target, headers, body)
    except (OSError, http.client.HTTPException) as e:
        log("upstream failed: %s" % e)
        send_error(c, 502, target)
        return
    if fault == "land_reset":
        rst(c)
        return
    if fault == "land_stall":
        time.sleep(ST.stall)
        return
    if fault == "land_503":
        send_error(c, 503, target)
        return
    if fault == "long_200":
        rbody += rbody
        hs = [(k, v) for k, v in hs if k.lower() not in ("content-length", "content-range")]
        hs.append(("Content-Length", str(len(rbody))))
        status, reason = 200, "OK"
    send(c, status, reason, hs, b"" if method == "HEAD" else rbody)


def conn_thread(c):
    try:
        serve(c)
    except OSError as e:
        log("connection: %s" % e)
    finally:
        try:
            c.close()
        except OSError:
            pass


def main():
    global UPSTREAM
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", required=True, help="http://host:port of the real server")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    a = ap.parse_args()
    u = urllib.parse.urlsplit(a.upstream)
    if u.scheme != "http" or not u.hostname:
        sys.exit("faultproxy: --upstream must be http://host:port")
    UPSTREAM = (u.hostname, u.port or 80)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", a.port))
    ls.listen(64)
    print("PORT %d" % ls.getsockname()[1], flush=True)

    def watch_stdin():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()
    while True:
        c, _ = ls.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=conn_thread, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
