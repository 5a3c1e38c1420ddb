"""Connects to 127.0.0.1:PORT (argv[1]) outside, and to a server of its own on its loopback; prints both."""

import socket
import sys

try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
    print("outside: connected", flush=True)
except OSError as exc:
    print("outside: refused", type(exc).__name__, flush=True)
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
socket.create_connection(server.getsockname(), timeout=5).close()
print("own loopback: connected", flush=True)
