"""Fabric side of bench/run: one Connection running N commands, or one command on many
hosts through a ThreadingGroup. Host keys are checked against the bench known_hosts.
Usage: fab.py solo PORT KEY KNOWN_HOSTS N CMD
       fab.py fan KEY KNOWN_HOSTS CMD PORT...
       fab.py kex PORT KEY KNOWN_HOSTS   (prints the key exchange paramiko agreed on)
"""
import sys

from fabric import Connection, ThreadingGroup
from paramiko.client import RejectPolicy


def connection(port, key, known):
    c = Connection("127.0.0.1", user="root", port=port,
                   connect_kwargs={"key_filename": key, "look_for_keys": False, "allow_agent": False})
    c.client.load_host_keys(known)
    c.client.set_missing_host_key_policy(RejectPolicy())
    return c


def main():
    mode = sys.argv[1]
    if mode == "solo":
        port, key, known, n, cmd = int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
        c = connection(port, key, known)
        for _ in range(n):
            c.run(cmd, hide=True, in_stream=False)
        c.close()
    elif mode == "fan":
        key, known, cmd, ports = sys.argv[2], sys.argv[3], sys.argv[4], [int(p) for p in sys.argv[5:]]
        g = ThreadingGroup.from_connections([connection(p, key, known) for p in ports])
        g.run(cmd, hide=True, in_stream=False)
        g.close()
    elif mode == "kex":  # which key exchange paramiko agrees on with the bench sshd
        import logging

        agreed = []

        class Grab(logging.Handler):
            def emit(self, record):
                msg = record.getMessage()
                if msg.startswith("Kex: "):
                    agreed.append(msg[5:])

        log = logging.getLogger("paramiko.transport")
        log.setLevel(logging.DEBUG)
        log.addHandler(Grab())
        port, key, known = int(sys.argv[2]), sys.argv[3], sys.argv[4]
        c = connection(port, key, known)
        c.open()
        c.close()
        print(agreed[0] if agreed else "unknown")
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
