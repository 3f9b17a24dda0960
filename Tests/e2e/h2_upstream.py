"""An HTTP/2 upstream (h2c, prior knowledge) on 127.0.0.1 built on PyPI's h2: the frames the gateway's HTTP/2
upstream side must cope with, on demand, per request path:

  /refuse/<key>       first attempt for <key>: RST_STREAM(REFUSED_STREAM) once the request is in (RFC 9113 8.7: the
                      server did nothing with it); later attempts: the JSON answer
  /goaway/<key>       first attempt: GOAWAY whose last stream id is below the stream (not taken), then the connection
                      closes; later attempts: the JSON answer
  /reset/<key>        RST_STREAM(INTERNAL_ERROR) every time: the request may have been acted on
  /big/<n>            200 with n bytes, sent as the flow-control windows allow
  /drip/<n>/<ms>      200 with n chunks of 1 KiB, one every <ms> milliseconds
  anything else       the JSON answer

The JSON answer: {"path", "attempts" (for the key), "connection" (1-based number of the connection it came on),
"body_sha256", "body_length"}. `attempts`, `connections` and `closed` are read by the tests."""

from __future__ import annotations

import collections
import hashlib
import json
import socket
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions


class H2Upstream:
    def __init__(self) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.attempts: collections.Counter = collections.Counter()
        self.connections = 0
        self.closed = 0   # connections the gateway (or we) ended
        self.lock = threading.Lock()
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.stopping = True
        try:
            self.listener.close()
        except OSError:
            pass

    def _accept(self) -> None:
        while not self.stopping:
            try:
                s, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                number = self.connections
            threading.Thread(target=self._serve, args=(s, number), daemon=True).start()

    # One connection: requests collected, then answered per path; queued bodies go out as windows open.
    def _serve(self, s: socket.socket, number: int) -> None:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        requests: dict[int, dict] = {}
        sending: dict[int, memoryview] = {}
        drips: dict[int, list] = {}   # stream -> [chunks left, interval s, next time]
        s.settimeout(0.01)
        try:
            s.sendall(conn.data_to_send())
            while not self.stopping:
                try:
                    data = s.recv(65536)
                except socket.timeout:
                    data = None
                if data == b"":
                    break
                if data:
                    for ev in conn.receive_data(data):
                        if isinstance(ev, h2.events.RequestReceived):
                            requests[ev.stream_id] = {"path": dict(ev.headers)[":path"], "body": bytearray()}
                            if ev.stream_ended:
                                if self._answer(conn, ev.stream_id, requests.pop(ev.stream_id), number, sending, drips):
                                    s.sendall(conn.data_to_send())
                                    return
                        elif isinstance(ev, h2.events.DataReceived):
                            if ev.stream_id in requests:
                                requests[ev.stream_id]["body"] += ev.data
                            conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                        elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id in requests:
                            if self._answer(conn, ev.stream_id, requests.pop(ev.stream_id), number, sending, drips):
                                s.sendall(conn.data_to_send())
                                return
                        elif isinstance(ev, h2.events.StreamReset):
                            sending.pop(ev.stream_id, None)
                            drips.pop(ev.stream_id, None)
                        elif isinstance(ev, h2.events.ConnectionTerminated):
                            s.sendall(conn.data_to_send())
                            return
                for sid in list(sending):
                    rest = sending[sid]
                    n = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, len(rest))
                    if n > 0:
                        conn.send_data(sid, bytes(rest[:n]), end_stream=n == len(rest))
                        sending[sid] = rest[n:]
                    if len(sending[sid]) == 0:
                        del sending[sid]
                now = time.monotonic()
                for sid in list(drips):
                    left, interval, due = drips[sid]
                    if now >= due:
                        conn.send_data(sid, b"d" * 1024, end_stream=left == 1)
                        if left == 1:
                            del drips[sid]
                        else:
                            drips[sid] = [left - 1, interval, now + interval]
                out = conn.data_to_send()
                if out:
                    s.sendall(out)
        except (OSError, h2.exceptions.ProtocolError):
            pass
        finally:
            with self.lock:
                self.closed += 1
            s.close()

    def _answer(self, conn, sid: int, req: dict, number: int, sending: dict, drips: dict) -> bool:
        """Answers one complete request; True when the connection is to close now."""
        path = req["path"]
        parts = path.strip("/").split("/")
        with self.lock:
            self.attempts[path] += 1
            attempt = self.attempts[path]
        if parts[0] == "refuse" and attempt == 1:
            conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
            return False
        if parts[0] == "goaway" and attempt == 1:
            conn.close_connection(error_code=h2.errors.ErrorCodes.NO_ERROR, last_stream_id=max(0, sid - 2))
            return True
        if parts[0] == "reset":
            conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.INTERNAL_ERROR)
            return False
        if parts[0] == "big":
            n = int(parts[1])
            conn.send_headers(sid, [(":status", "200"), ("content-length", str(n))])
            sending[sid] = memoryview(b"b" * n)
            return False
        if parts[0] == "drip":
            conn.send_headers(sid, [(":status", "200"), ("content-length", str(int(parts[1]) * 1024))])
            drips[sid] = [int(parts[1]), int(parts[2]) / 1000, time.monotonic()]
            return False
        body = json.dumps({"path": path, "attempts": attempt, "connection": number,
                           "body_sha256": hashlib.sha256(req["body"]).hexdigest(),
                           "body_length": len(req["body"])}).encode()
        conn.send_headers(sid, [(":status", "200"), ("content-type", "application/json"),
                                ("content-length", str(len(body)))])
        conn.send_data(sid, body, end_stream=True)
        return False
