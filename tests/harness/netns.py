"""A network namespace of its own for one process tree, which reaches chosen loopback ports (the test
brokers') only through relays this test process runs: a test cuts one relay and heals it, a network
partition between that process tree and one cluster while every other process still reaches it.

    ns = Namespace()                      # `unshare --net`, loopback up; needs root
    ns.relay(source_port); target = ns.relay(target_port)
    Mirrord(config, prefix=ns.command())  # the process tree runs inside: 127.0.0.1:<port> is the relay
    target.cut()                          # a partition: nothing passes, either way; new connections hang
    target.heal()                         # the connections of the cut are reset, new ones pass again
    ns.close()

A relay may also be a slow link: `ns.relay(port, rate=2 << 20)` carries at most that many bytes a second towards
the cluster, over all its connections together (a WAN link between regions), and the replies as they come.

What a cut is: a black hole, as a partition that drops packets. Bytes sent during it are lost; nothing
answers, so a client sees silence, not a refusal (its request times out). What a heal is: the connections
that lived through the cut are reset at both ends, as when the partition outlasted TCP's retransmissions,
and new connections pass. So what reaches the cluster after a heal is only what a client sends anew: a
producer's buffered records, never bytes a kernel had accepted before (TCP would retransmit those after a
short partition; that case is docs/decisions.md §6's "not guaranteed", not this harness's).

The listening sockets are made inside the namespace by a thread that enters it (setns(2) moves only the
calling thread) and then ends; the relay's other threads and its connections to the brokers stay in the
test process's own namespace.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import struct
import subprocess
import threading
import time

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class Namespace:
    """A network namespace held by a `sleep` of its own, with its loopback up and nothing else."""

    def __init__(self) -> None:
        if os.geteuid() != 0:
            raise RuntimeError("a network namespace of its own needs root")
        self.holder = subprocess.Popen(["unshare", "--net", "sleep", "infinity"], start_new_session=True)
        self.path = f"/proc/{self.holder.pid}/ns/net"
        deadline = time.monotonic() + 10
        while os.readlink(self.path) == os.readlink("/proc/self/ns/net"):  # unshare has not run yet
            if time.monotonic() > deadline:
                raise RuntimeError("unshare --net did not make a namespace")
            time.sleep(0.02)
        subprocess.run([*self.command(), "ip", "link", "set", "lo", "up"], check=True)
        self.relays: list[Relay] = []

    def command(self) -> list[str]:
        """The prefix that runs a command inside (nsenter execs it: the pid is the command's own)."""
        return ["nsenter", f"--net={self.path}", "--"]

    def relay(self, port: int, rate: float | None = None) -> Relay:
        """127.0.0.1:`port` inside the namespace reaches 127.0.0.1:`port` outside, until cut; `rate`: at most that
        many bytes a second towards it."""
        relay = Relay(self._listen(port), port, rate)
        self.relays.append(relay)
        return relay

    def _listen(self, port: int) -> socket.socket:
        made: dict[str, object] = {}

        def inside() -> None:
            try:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    if _libc.setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns")
                finally:
                    os.close(fd)
                listener = socket.socket()
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind(("127.0.0.1", port))
                listener.listen(64)
                made["socket"] = listener
            except OSError as exc:
                made["error"] = exc

        thread = threading.Thread(target=inside, name=f"netns-listen-{port}")  # ends in the namespace: discarded
        thread.start()
        thread.join()
        if "error" in made:
            raise made["error"]  # type: ignore[misc]
        return made["socket"]  # type: ignore[return-value]

    def close(self) -> None:
        for relay in self.relays:
            relay.close()
        with contextlib.suppress(ProcessLookupError):
            self.holder.kill()
        self.holder.wait(10)


class Relay:
    """One port's relay; `cut()` and `heal()` from the test's thread."""

    def __init__(self, listener: socket.socket, port: int, rate: float | None = None):
        self.listener = listener
        self.port = port
        self.rate = rate
        self._free_at = 0.0  # time.monotonic() when the slow link has carried what it was given
        self._lock = threading.Lock()
        self._cut = False
        self._links: set[_Link] = set()
        self.cut_at: float | None = None  # time.time() of the last cut
        self.healed_at: float | None = None
        self._closed = False
        threading.Thread(target=self._accept, name=f"relay-{port}", daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            self.cut_at = time.time()
            for link in self._links:
                link.silenced = True

    def heal(self) -> None:
        with self._lock:
            self._cut = False
            self.healed_at = time.time()
            dead = [link for link in self._links if link.silenced]
        for link in dead:
            link.reset()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.listener.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            link.reset()

    def _accept(self) -> None:
        while not self._closed:
            try:
                inner, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                cut = self._cut
            outer = None
            if not cut:
                try:
                    outer = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                    outer.settimeout(None)
                except OSError:
                    _reset(inner)  # the cluster itself is down: refused, as it would be
                    continue
            link = _Link(self, inner, outer, silenced=cut)
            with self._lock:
                self._links.add(link)
            link.start()

    def carry(self, size: int) -> None:
        """Waits while a slow link carries `size` bytes after what it was given before."""
        if self.rate is None:
            return
        with self._lock:
            done = max(time.monotonic(), self._free_at) + size / self.rate
            self._free_at = done
        time.sleep(max(0.0, done - time.monotonic()))

    def _gone(self, link: _Link) -> None:
        with self._lock:
            self._links.discard(link)


class _Link:
    """One relayed connection: a thread per direction; silenced, both drop what they read."""

    def __init__(self, relay: Relay, inner: socket.socket, outer: socket.socket | None, silenced: bool):
        self.relay = relay
        self.inner = inner
        self.outer = outer
        self.silenced = silenced
        self._done = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._pump, args=(self.inner, self.outer, True), daemon=True).start()
        if self.outer is not None:
            threading.Thread(target=self._pump, args=(self.outer, self.inner, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket | None, towards_cluster: bool) -> None:
        try:
            while True:
                data = src.recv(16384)
                if not data:
                    break
                if self.silenced or dst is None:
                    continue  # a black hole: read and dropped, nothing answers
                if towards_cluster:
                    self.relay.carry(len(data))
                dst.sendall(data)
        except OSError:
            pass
        self.reset()

    def reset(self) -> None:
        """Both ends closed with a reset (SO_LINGER 0): a connection the partition killed."""
        if self._done.is_set():
            return
        self._done.set()
        for sock in (self.inner, self.outer):
            if sock is not None:
                _reset(sock)
        self.relay._gone(self)


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
