#!/usr/bin/env python3
"""The gRPC rows' upstream with BENCH_GRPC_UPSTREAM=grpcio: a grpcio server on 127.0.0.1:PORT (plaintext h2c) whose
`bench.Echo/Unary` answers the request's raw bytes (a generic handler, no generated code): HEADERS content-type
application/grpc, one DATA frame (the 5-byte gRPC prefix + the message), trailers grpc-status: 0. Python handlers
on a thread pool: far slower than nghttpd (the default upstream), so the proxies' req/s is bounded by it; their CPU
µs per request still compares."""

from __future__ import annotations

import sys
from concurrent import futures

import grpc


def main() -> None:
    port = int(sys.argv[1])
    same = lambda b: b   # noqa: E731: raw bytes in, raw bytes out
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                         options=[("grpc.max_concurrent_streams", 1024)])
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
        "bench.Echo", {"Unary": grpc.unary_unary_rpc_method_handler(lambda request, context: request, same, same)})])
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


if __name__ == "__main__":
    main()
