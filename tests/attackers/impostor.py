"""An impostor broker: run as another user, it listens on a Unix socket and records what clients
send it. The tests check that the driver's clients send it nothing.

usage: impostor.py SOCKET RECORD_DIR SECONDS

Writes RECORD_DIR/ready once listening, appends a line to RECORD_DIR/accepted per connection
and every byte received to RECORD_DIR/received. To look like a broker it sends each client a
well-formed frame first (a forged success would follow, as in the attack it stands for).
"""

import os
import socket
import sys
import time

path, record, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(16)
srv.settimeout(0.1)
open(os.path.join(record, "received"), "wb").close()
open(os.path.join(record, "accepted"), "w").close()
open(os.path.join(record, "ready"), "w").close()
clients = []
deadline = time.monotonic() + seconds
while time.monotonic() < deadline:
    try:
        c, _ = srv.accept()
        c.setblocking(False)
        try:
            # A frame of 6 bytes: BrokerToShim::Opened {session: "x"} is [0, 1, "x"]; for a
            # terminal command it is garbage. Either way the client must not have sent a byte.
            c.send(b"\x00\x00\x00\x03\x00\x01x")
        except OSError:
            pass
        clients.append(c)
        with open(os.path.join(record, "accepted"), "a") as f:
            f.write("accepted\n")
    except socket.timeout:
        pass
    for c in list(clients):
        try:
            data = c.recv(65536)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if data:
            with open(os.path.join(record, "received"), "ab") as f:
                f.write(data)
        else:
            clients.remove(c)
            c.close()
